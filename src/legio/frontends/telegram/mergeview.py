"""✅ Merge in Telegram: the button on a pull request's ✅ CI line, one confirmation
showing its title, method, head branch, base and full head commit (and ⚠️ when the branch
changes the CI configuration that judged it), then the merge (``WorkDoor.merge``).

Button data: ``mg:ask:<project>:<number>`` (on the CI line), ``mg:yes:<id>`` (the
confirmation: ``id`` is a short random key of the question, which is pinned here, in
memory, with the full head commit Caesar was shown; a branch that moved since is refused),
``mg:no``. A tap after a restart, or on a forgotten question, is told so and merges
nothing. A red or pending CI, a blocked or closed pull request is refused with the reason
before anything is asked. Whatever the forge wrote (title, url, check names) is shown
through ``legio.visible.visible``. Strangers' taps never reach here.
"""

from __future__ import annotations

import contextlib
import secrets

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message
from telegram.error import TelegramError

from legio.doors.workdoor import WorkDoor
from legio.errors import ForgeError, ProjectError
from legio.forge.merging import MergePlan
from legio.frontends.numbers import digits
from legio.frontends.telegram.sending import send_with_retries
from legio.visible import visible

PREFIX = "mg"
KEPT = 200  # questions waiting for a tap (the oldest forgotten first)


def merge_button(project: str, number: int) -> InlineKeyboardButton:
    return InlineKeyboardButton("✅ Merge", callback_data=f"{PREFIX}:ask:{project}:{number}")


class MergeDesk:
    """See the module docstring."""

    def __init__(self, room: WorkDoor) -> None:
        self.room = room
        self.asked: dict[str, tuple[str, int, str]] = {}  # id -> project, number, full sha

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
        if parts[1:2] == ["yes"] and len(parts) == 3 and message is not None:
            pinned = self.asked.pop(parts[2], None)
            if pinned is None:
                await query.answer("This question is too old (or answered): tap ✅ Merge again.")
                return
            await self._merge(query, message, *pinned)
            return
        number = digits(parts[3]) if len(parts) == 4 and parts[1] == "ask" else None
        if message is None or number is None:
            await query.answer("This button is too old to answer here.")
            return
        await self._ask(query, message, parts[2], number)

    async def _ask(self, query: CallbackQuery, message: Message, project: str, number: int) -> None:
        try:
            plan = await self.room.merge_plan(project, number)
        except ForgeError as e:
            await query.answer("Not merged.")
            await send_with_retries(message.get_bot(), message.chat_id, f"Not merged: {e}")
            return
        if plan.refusal:
            await query.answer("Not merged.")
            text = f"Not merged: pull request #{number} of #{project}: {visible(plan.refusal)}"
            await send_with_retries(message.get_bot(), message.chat_id, text)
            return
        await query.answer()
        key = secrets.token_urlsafe(6)
        self.asked[key] = (project, number, plan.sha)
        while len(self.asked) > KEPT:
            self.asked.pop(next(iter(self.asked)))
        markup = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton("✅ Merge", callback_data=f"{PREFIX}:yes:{key}"),
                    InlineKeyboardButton("✖ Cancel", callback_data=f"{PREFIX}:no"),
                ]
            ]
        )
        await send_with_retries(
            message.get_bot(), message.chat_id, question(plan), reply_markup=markup
        )

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
                f"{visible(plan.base, keep='')} by {plan.method} "
                f"({visible(merged.commit[:7], keep='')}). {merged.moved}"
            )
        with contextlib.suppress(TelegramError):
            await message.edit_text(f"{message.text or ''}\n\n{said}", reply_markup=None)


def question(plan: MergePlan) -> str:
    """The confirmation's text: the pull request, its head branch into its base, the full
    head commit, and ⚠️ when the branch changes the CI that judged it."""
    text = (
        f"✅ Merge pull request #{plan.number} of {plan.agent} on #{plan.project}: "
        f"{visible(plan.branch, keep='')} into {visible(plan.base, keep='')} by "
        f"{plan.method}?\n“{visible(plan.title)}”\n{visible(plan.url, keep='')}\n"
        f"head {plan.sha}: CI passed. The merge is made with your forge token."
    )
    if plan.ci_files:
        shown = ", ".join(visible(name, keep="") for name in plan.ci_files[:10])
        more = f" and {len(plan.ci_files) - 10} more" if len(plan.ci_files) > 10 else ""
        text += f"\n⚠️ this branch changes the CI that judged it: {shown}{more}"
    elif plan.ci_unread:
        text += (
            "\n⚠️ its head is not in your repository: whether it changes the CI that judged "
            "it could not be checked (look at its files on the forge first)."
        )
    return text
