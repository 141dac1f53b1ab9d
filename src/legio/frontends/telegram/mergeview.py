"""✅ Merge in Telegram: the button on a pull request's ✅ CI line, one confirmation
showing its title, method and head, then the merge (``WorkDoor.merge``).

Button data: ``mg:ask:<project>:<number>`` (on the CI line), ``mg:yes:<project>:<number>:
<sha>`` (the confirmation: the head Caesar was shown, so a branch that moved since is
refused), ``mg:no``. A red or pending CI, a blocked or closed pull request is refused
with the forge's reason before anything is asked. Strangers' taps never reach here.
"""

from __future__ import annotations

import contextlib

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message
from telegram.error import TelegramError

from legio.doors.workdoor import WorkDoor
from legio.errors import ForgeError, ProjectError
from legio.frontends.numbers import digits
from legio.frontends.telegram.sending import send_with_retries
from legio.visible import visible

PREFIX = "mg"
SHA_CHARS = 12


def merge_button(project: str, number: int) -> InlineKeyboardButton:
    return InlineKeyboardButton("✅ Merge", callback_data=f"{PREFIX}:ask:{project}:{number}")


class MergeDesk:
    """See the module docstring."""

    def __init__(self, room: WorkDoor) -> None:
        self.room = room

    @staticmethod
    def owns(data: str | None) -> bool:
        return (data or "").startswith(PREFIX + ":")

    async def on_tap(self, query: CallbackQuery) -> None:
        parts = (query.data or "").split(":")
        message = query.message if isinstance(query.message, Message) else None
        if parts[1:2] == ["no"]:
            await query.answer("Not merged.")
            if message is not None:
                with contextlib.suppress(TelegramError):
                    await message.edit_text(f"{message.text or ''}\nNot merged.", reply_markup=None)
            return
        number = digits(parts[3]) if len(parts) >= 4 else None
        if message is None or number is None:
            await query.answer("This button is too old to answer here.")
            return
        project = parts[2]
        if parts[1] == "ask":
            await self._ask(query, message, project, number)
        elif parts[1] == "yes" and len(parts) == 5:
            await self._merge(query, message, project, number, parts[4])
        else:
            await query.answer("Unknown button.")

    async def _ask(self, query: CallbackQuery, message: Message, project: str, number: int) -> None:
        try:
            plan = await self.room.merge_plan(project, number)
        except ForgeError as e:
            await query.answer("Not merged.")
            await send_with_retries(message.get_bot(), message.chat_id, f"Not merged: {e}")
            return
        if plan.refusal:
            await query.answer("Not merged.")
            text = f"Not merged: pull request #{number} of #{project}: {plan.refusal}"
            await send_with_retries(message.get_bot(), message.chat_id, text)
            return
        await query.answer()
        text = (
            f"✅ Merge pull request #{number} of {plan.agent} on #{project} into {plan.base} "
            f"by {plan.method}?\n“{visible(plan.title)}”\n{plan.url}\nhead {plan.sha[:7]}: CI "
            "passed. The merge is made with your forge token."
        )
        sha = plan.sha[:SHA_CHARS]
        markup = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton(
                        "✅ Merge", callback_data=f"{PREFIX}:yes:{project}:{number}:{sha}"
                    ),
                    InlineKeyboardButton("✖ Cancel", callback_data=f"{PREFIX}:no"),
                ]
            ]
        )
        await send_with_retries(message.get_bot(), message.chat_id, text, reply_markup=markup)

    async def _merge(
        self, query: CallbackQuery, message: Message, project: str, number: int, sha: str
    ) -> None:
        await query.answer("Merging…")
        with contextlib.suppress(TelegramError):
            await message.edit_reply_markup(None)  # one tap, one merge
        try:
            merged = await self.room.merge(project, number, sha)
        except (ForgeError, ProjectError) as e:
            said = str(e)
        else:
            plan = merged.plan
            said = (
                f"✅ Merged pull request #{number} of {plan.agent} on #{project} into "
                f"{plan.base} by {plan.method} ({merged.commit[:7]}). {merged.moved}"
            )
        with contextlib.suppress(TelegramError):
            await message.edit_text(f"{message.text or ''}\n\n{said}", reply_markup=None)
