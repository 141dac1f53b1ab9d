"""🚀 Publish in Telegram: what will be posted, shown before anything is posted.

``PublishDesk.show`` sends a preview (``WorkDoor.publish_preview``, from a work card's
🚀 Publish or from ``/publish``) as plain text: the title and the body each in a ``pre``
entity (monospace, no Markdown rendered, hidden characters already ``⟨U+XXXX⟩``), or,
when they do not fit one message, the body as a ``.txt`` document with the title in its
caption; with **🚀 Post this pull request** and **✖ Cancel**. The preview is pinned to
that message (kept here, in memory): the confirming tap posts exactly it
(``WorkDoor.publish(preview)``), once. A second tap, or a tap after a restart, is told
so and posts nothing; so is Cancel. A push the forge refuses as not a fast-forward asks
**⚠️ Replace the forge's …** with the same preview pinned to that question.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from telegram import (
    Bot,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
)
from telegram.error import TelegramError

from legio.app import LegioApp
from legio.doors.workdoor import WorkDoor
from legio.errors import ForgeError, ProjectError, PushRejected
from legio.forge.publish import PublishPreview
from legio.frontends.forgelines import PUBLISH_USAGE, preview_parts, publish_words, published_text
from legio.frontends.telegram.lanes import Lane, in_lane
from legio.frontends.telegram.sending import (
    CAPTION_LIMIT,
    MAX_UTF16,
    file_retrying,
    send_with_retries,
)
from legio.visible import visible_name

logger = logging.getLogger(__name__)

KEPT = 200  # previews waiting for a tap (the oldest forgotten first)
POST, CANCEL = "pub:post", "pub:cancel"


@dataclass(frozen=True)
class _Pending:
    preview: PublishPreview
    force: bool


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def preview_message(preview: PublishPreview, force: bool) -> tuple[str, list[MessageEntity]]:
    """The preview as one message: its text, the title and the body in ``pre`` entities."""
    text, entities = "", []
    for part, pre in preview_parts(preview, force):
        if pre and part:
            entities.append(MessageEntity(MessageEntity.PRE, utf16(text), utf16(part)))
        text += part
    return text, entities


def keyboard(preview: PublishPreview, force: bool) -> InlineKeyboardMarkup:
    post = f"⚠️ Replace the forge's {visible_name(preview.branch)}" if force else ""
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(post or "🚀 Post this pull request", callback_data=POST),
                InlineKeyboardButton("✖ Cancel", callback_data=CANCEL),
            ]
        ]
    )


class PublishDesk:
    """Previews shown and waiting for Caesar's tap."""

    def __init__(self, app: Callable[[], LegioApp]) -> None:
        self._app = app
        self.pending: dict[tuple[int, int], _Pending] = {}

    @property
    def room(self) -> WorkDoor:
        """The door's work room: Publish's preview and Publish."""
        return self._app().work

    @staticmethod
    def owns(data: str | None) -> bool:
        return (data or "").startswith("pub:")

    def _pin(self, message: Message, pending: _Pending) -> None:
        self.pending[(message.chat_id, message.message_id)] = pending
        while len(self.pending) > KEPT:
            self.pending.pop(next(iter(self.pending)))

    async def show(
        self, bot: Bot, chat_id: int, preview: PublishPreview, *, force: bool = False
    ) -> None:
        """Send ``preview`` with its buttons (see the module docstring) and pin it there."""
        text, entities = preview_message(preview, force)
        markup = keyboard(preview, force)
        if utf16(text) <= MAX_UTF16:
            message = await send_with_retries(
                bot, chat_id, text, entities=entities, reply_markup=markup
            )
        else:
            head = "".join(part for part, _ in preview_parts(preview, force)[:2])
            caption = f"{head}\n\nBody: this document, exactly."
            if utf16(caption) > CAPTION_LIMIT:  # a long branch name: the rest still said
                caption = f"Title:\n{preview.title}\n\nBody: this document, exactly."
            message = await file_retrying(
                bot.send_document,
                chat_id,
                preview.body.encode(),
                filename=f"pull-request-{preview.agent}-{preview.project}.txt",
                caption=caption,
                reply_markup=markup,
            )
        self._pin(message, _Pending(preview, force))

    async def command(self, bot: Bot, chat_id: int, args: str) -> None:
        """``/publish <agent> <project> [force]`` in Telegram: the preview, with buttons."""
        words, force, _ = publish_words(args)
        try:
            target = self.room.project_target(words, PUBLISH_USAGE)
            preview = await self.room.branch_preview(target.agent, target.project)
        except (ForgeError, ProjectError) as e:
            await send_with_retries(bot, chat_id, f"Not published: {e}")
            return
        await self.show(bot, chat_id, preview, force=force)

    async def on_tap(self, query: CallbackQuery) -> None:
        """🚀 Post / ⚠️ Replace / ✖ Cancel under a preview."""
        message = query.message if isinstance(query.message, Message) else None
        if message is None:
            await query.answer("This preview is too old to answer here.")
            return
        pending = self.pending.pop((message.chat_id, message.message_id), None)
        with contextlib.suppress(TelegramError):
            await message.edit_reply_markup(None)
        if pending is None:
            await query.answer(
                "Already answered (or Legio restarted): nothing more is posted. "
                "Tap 🚀 Publish again for a new preview.",
                show_alert=True,
            )
            return
        lane = Lane(
            message.chat_id, message.message_thread_id if message.is_topic_message else None
        )
        bot = message.get_bot()
        if query.data != POST:
            await query.answer("Not published.")
            with in_lane(lane):
                await send_with_retries(bot, message.chat_id, "✖ Not published.")
            return
        await query.answer("Publishing…")
        with in_lane(lane):
            await self._post(bot, message.chat_id, pending)

    async def _post(self, bot: Bot, chat_id: int, pending: _Pending) -> None:
        preview = pending.preview
        try:
            done = await self.room.publish(preview, pending.force)
        except PushRejected as e:
            if not e.non_fast_forward or pending.force:
                await send_with_retries(bot, chat_id, f"The forge refused the push: {e.reason}")
                return
            branch = visible_name(preview.branch)
            asked = await send_with_retries(
                bot,
                chat_id,
                f"The forge refused the push: {e.reason}\nIts {branch} has commits "
                f"{preview.agent}'s branch does not. Replace it with {preview.agent}'s, with "
                "the pull request shown above? Only Legio's own branch moves; your base branch "
                "is never pushed.",
                reply_markup=keyboard(preview, True),
            )
            self._pin(asked, _Pending(preview, True))
            return
        except (ForgeError, ProjectError) as e:
            await send_with_retries(bot, chat_id, f"Not published: {e}")
            return
        await send_with_retries(bot, chat_id, published_text(done))
