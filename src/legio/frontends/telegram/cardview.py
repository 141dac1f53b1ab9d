"""Work cards in Telegram: after a turn on a project, one silent message with buttons.

``CardDesk.send`` posts a card (``views.card_text``) right after the agent's answer, in the
request's lane, with **🔍 Diff**, **🧪 Checks** (a check configured), **🛠 Fix** (its check
failed) and **🗑 Drop**; ``update`` edits a card already shown when its check ends, and
posts a card nobody asked for (the Legatus's dispatch) in the agent's lane. A tap names
the card, never "the latest": an older card's buttons still show that card's own turn and
say when the branch has moved on. **🚀 Publish** shows what would be posted and posts only
on the confirming tap (``publishview``). **📋 Plan** (a turn that carried out a plan Caesar
agreed to) shows that plan again, as stored. Drop asks once more before it removes a copy.
Strangers' taps never reach here (``bot.py``'s gate answers them "not yours").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from telegram import (
    Bot,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    WebAppInfo,
)
from telegram.error import BadRequest, TelegramError

from legio.app import CheckRecord, LegioApp, Target
from legio.doors.workdoor import WorkDoor
from legio.errors import ForgeError, ProjectError
from legio.frontends.checkviews import check_report
from legio.frontends.numbers import digits
from legio.frontends.telegram.diffs import send_card_diff
from legio.frontends.telegram.lanes import Lane, in_lane
from legio.frontends.telegram.publishview import PublishDesk
from legio.frontends.telegram.sending import (
    plain_pages,
    send_document,
    send_markdown,
    send_with_retries,
)
from legio.frontends.telegram.undoview import on_again, on_undo, undo_buttons
from legio.frontends.views import card_text
from legio.request import Reply, Request, Watch, WorkCard

logger = logging.getLogger(__name__)

SHOWN_KEPT = 500  # cards whose message Legio remembers (to edit when its check ends)
LaneFor = Callable[[Bot, int, str], Awaitable[Lane]]
Work = Callable[[Bot, int, int, Callable[[Watch], Awaitable[list[Reply]]]], Awaitable[None]]


@dataclass(frozen=True)
class _Shown:
    chat_id: int
    message_id: int


def card_keyboard(
    card: WorkCard,
    check: CheckRecord | None = None,
    *,
    confirm_drop: bool = False,
    open_url: str = "",
) -> InlineKeyboardMarkup:
    """The card's buttons (``check``: its run as it is now); ``confirm_drop``: Drop's
    second question instead; ``open_url``: ↗ Open, its page in the cockpit (a Mini App)."""
    if confirm_drop:
        return InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton(
                        "🗑 Yes, drop the copy", callback_data=f"card:dropyes:{card.id}"
                    ),
                    InlineKeyboardButton("Keep it", callback_data=f"card:keep:{card.id}"),
                ]
            ]
        )
    row = [InlineKeyboardButton("🔍 Diff", callback_data=f"card:diff:{card.id}")]
    if card.check_id is not None:
        row.append(InlineKeyboardButton("🧪 Checks", callback_data=f"card:checks:{card.id}"))
    if card.plan_seq is not None:
        row.append(InlineKeyboardButton("📋 Plan", callback_data=f"card:plan:{card.id}"))
    if open_url:
        row.append(InlineKeyboardButton("↗ Open", web_app=WebAppInfo(open_url)))
    second = []
    if check is not None and check.state in ("failed", "timed_out"):
        second.append(InlineKeyboardButton("🛠 Fix", callback_data=f"card:fix:{card.id}"))
    if card.publishable:
        second.append(InlineKeyboardButton("🚀 Publish", callback_data=f"card:pub:{card.id}"))
    second.append(InlineKeyboardButton("🗑 Drop", callback_data=f"card:drop:{card.id}"))
    return InlineKeyboardMarkup([row, second, undo_buttons(card)])


class CardDesk:
    """Cards shown, and their buttons."""

    def __init__(self, app: Callable[[], LegioApp], caesar_ids: frozenset[int]) -> None:
        self._app = app
        self.caesar_ids = caesar_ids
        self.shown: dict[int, list[_Shown]] = {}
        self.bot: Bot | None = None
        self.lane_for: LaneFor | None = None
        self.work: Work | None = None  # runs a request under a live view (Fix)
        self.publishing = PublishDesk(app)  # 🚀 Publish's previews, waiting for a tap
        self.cockpit = ""  # [web] public_url: each card gets ↗ Open (Caesar's private chats)

    def _keyboard(
        self, card: WorkCard, check: CheckRecord | None, chat_id: int
    ) -> InlineKeyboardMarkup:
        """The card's buttons; ↗ Open only where Telegram allows a Mini App button."""
        private = chat_id > 0
        url = f"{self.cockpit}/card/{card.id}" if self.cockpit and private else ""
        return card_keyboard(card, check, open_url=url)

    @property
    def app(self) -> LegioApp:
        return self._app()

    @property
    def room(self) -> WorkDoor:
        """The door's work room: cards, checks, Publish, Drop."""
        return self._app().work

    async def _check(self, card: WorkCard) -> CheckRecord | None:
        return await self.room.check(card.check_id) if card.check_id is not None else None

    def _remember(self, card_id: int, message: Message) -> None:
        self.shown.setdefault(card_id, []).append(_Shown(message.chat_id, message.message_id))
        while len(self.shown) > SHOWN_KEPT:
            self.shown.pop(next(iter(self.shown)))

    async def send(self, bot: Bot, chat_id: int, card: WorkCard) -> None:
        """Post ``card`` silently (in the lane the caller is in)."""
        check = await self._check(card)
        message = await send_with_retries(
            bot,
            chat_id,
            card_text(card, check),
            reply_markup=self._keyboard(card, check, chat_id),
            disable_notification=True,
        )
        self._remember(card.id, message)

    async def update(self, card: WorkCard, new: bool) -> None:
        """``card`` changed (its check ended): edit it where it was shown; a ``new`` card
        (nobody's request showed it) is posted in the agent's lane in Caesar's chats."""
        bot = self.bot
        if bot is None:
            return
        if new and card.id not in self.shown:
            for chat_id in sorted(self.caesar_ids):
                lane = await self.lane_for(bot, chat_id, card.agent) if self.lane_for else None
                with in_lane(lane):
                    try:
                        await self.send(bot, chat_id, card)
                    except TelegramError as e:
                        logger.warning("card %s could not be sent: %s", card.id, e)
            return
        check = await self._check(card)
        for shown in self.shown.get(card.id, []):
            with contextlib.suppress(BadRequest):  # "message is not modified", or deleted
                await bot.edit_message_text(
                    card_text(card, check),
                    chat_id=shown.chat_id,
                    message_id=shown.message_id,
                    reply_markup=self._keyboard(card, check, shown.chat_id),
                )

    # ---------------------------------------------------------- taps

    async def on_tap(self, query: CallbackQuery) -> None:
        """A card's button, tapped by Caesar (a Publish preview's too: ``publishview``)."""
        if PublishDesk.owns(query.data):
            await self.publishing.on_tap(query)
            return
        parts = (query.data or "").split(":")
        number = digits(parts[2]) if len(parts) in (3, 4) else None  # 4: Try again's model
        card = await self.room.card(number) if number is not None else None
        if card is None:
            await query.answer("This card is gone.")
            return
        message = query.message if isinstance(query.message, Message) else None
        action = parts[1]
        if action == "drop":
            await query.answer()
            if message is not None:
                await message.edit_reply_markup(card_keyboard(card, confirm_drop=True))
            return
        if action == "keep":
            await query.answer("Kept.")
            if message is not None:
                await message.edit_reply_markup(
                    self._keyboard(card, await self._check(card), message.chat_id)
                )
            return
        if message is None:
            await query.answer("This card is too old to answer here.")
            return
        lane = Lane(
            message.chat_id, message.message_thread_id if message.is_topic_message else None
        )
        if action == "dropyes":
            await self._drop(query, message, card)
        elif action == "diff":
            await query.answer("Drawing the diff…")
            with in_lane(lane):
                await send_card_diff(message.get_bot(), message.chat_id, self.room, card.id)
        elif action == "checks":
            await query.answer()
            with in_lane(lane):
                await self._checks(message, card)
        elif action == "plan":
            await query.answer()
            plan = await self.room.card_plan(card.id)
            with in_lane(lane):
                await send_markdown(
                    message.get_bot(),
                    message.chat_id,
                    plan or "This card's plan is no longer recorded.",
                    message.message_id,
                )
        elif action == "fix":
            await self._fix(query, message, card, lane)
        elif action in ("pub", "force") and card.publishable:  # "force": a button of old
            await query.answer("What would be posted…")
            with in_lane(lane):
                await self._publish(message, card, force=action == "force")
        elif action in ("undo", "undoyes", "undono"):  # "undo" from a 👎 on the card too
            with in_lane(lane):
                await on_undo(self.room, query, message, card, action == "undoyes")
        elif action == "again":
            with in_lane(lane):
                model = parts[3] if len(parts) == 4 else None
                await on_again(self.room, query, message, card, self._run, model)
        elif action == "nopub":
            await query.answer("Not published.")
            with contextlib.suppress(TelegramError):
                await message.edit_text(f"{message.text or ''}\nNot published.", reply_markup=None)
        else:
            await query.answer("Unknown button.")

    async def _checks(self, message: Message, card: WorkCard) -> None:
        """🧪 Checks: the run's last lines as text, its whole log as a document."""
        bot, chat_id = message.get_bot(), message.chat_id
        check = await self._check(card)
        if check is None:
            await send_with_retries(bot, chat_id, "This card's check is no longer recorded.")
            return
        for piece in plain_pages(check_report(check)):
            await send_with_retries(bot, chat_id, piece)
        log = self.room.check_log(check.id)
        if log is not None and not check.running:
            try:
                content = await asyncio.to_thread(log.read_bytes)
            except OSError:
                return
            if content:
                await send_document(
                    bot, chat_id, f"{card.agent}-{card.project}-check{check.id}.log", content
                )

    async def _publish(self, message: Message, card: WorkCard, *, force: bool) -> None:
        """🚀 Publish: what would be posted, shown with 🚀 Post / ✖ Cancel
        (``publishview``); nothing is pushed or posted before that tap."""
        bot, chat_id = message.get_bot(), message.chat_id
        try:  # exactly what this card showed, its check's result only for that commit
            preview = await self.room.publish_preview(card.id)
        except (ForgeError, ProjectError) as e:
            await send_with_retries(bot, chat_id, f"Not published: {e}")
            return
        await self.publishing.show(bot, chat_id, preview, force=force)

    async def _fix(
        self, query: CallbackQuery, message: Message, card: WorkCard, lane: Lane
    ) -> None:
        """🛠 Fix: an ordinary request to the card's agent, in its lane, with the failure."""
        request = await self.room.fix_request(card.id)
        if request is None or self.work is None:
            await query.answer("Its check did not fail: nothing to fix.")
            return
        await query.answer(f"Asking {card.agent} to fix it…")
        with in_lane(lane):
            await self.work(
                message.get_bot(),
                message.chat_id,
                0,
                lambda watch: self.app.handle_message(request, watch),
            )

    async def _run(self, message: Message, request: Request) -> None:
        """``request`` run like any request, under a live view, in the lane we are in."""
        if self.work is not None:
            await self.work(
                message.get_bot(),
                message.chat_id,
                0,
                lambda watch: self.app.handle_message(request, watch),
            )

    async def _drop(self, query: CallbackQuery, message: Message, card: WorkCard) -> None:
        try:
            left = await self.room.drop_copy(Target(card.agent, card.project))
        except ProjectError as e:
            await query.answer()
            await send_with_retries(message.get_bot(), message.chat_id, f"Not dropped: {e}")
            await message.edit_reply_markup(card_keyboard(card))
            return
        if left is None:
            said = f"{card.agent} has no copy of #{card.project} any more."
        else:
            lost = f"; {left} uncommitted change(s) went with it" if left else ""
            said = f"🗑 Dropped {card.agent}'s copy of #{card.project} (its branch stays{lost})."
        await query.answer("Dropped." if left is not None else "Nothing to drop.")
        with contextlib.suppress(TelegramError):
            text = card_text(card, await self._check(card))
            await message.edit_text(f"{text}\n{said}", reply_markup=None)
