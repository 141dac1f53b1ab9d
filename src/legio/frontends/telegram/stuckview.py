"""A stuck turn, said in Telegram: once, in the agent's lane, with **Stop** and **Keep waiting**.

``LegioApp.follow_stuck`` hands each ``Stuck`` (a turn whose CLI has sent nothing for
``[sessions] stuck_minutes``) to ``StuckView.show``: one message in the topic of the
request the agent is on (``TelegramAsker.lanes``; else Caesar's private chats) with two
buttons. **Stop** ends the agent's turn like the status message's ⏹ Stop
(``LegioApp.stop``); **Keep waiting** lets it be for another period
(``OperationsDoor.keep_waiting``). Either way the buttons go and the message says what was done.
"""

from __future__ import annotations

import contextlib
import logging

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from legio.app import LegioApp
from legio.frontends.telegram.lanes import Lane, in_lane
from legio.frontends.telegram.sending import NO_PREVIEW
from legio.frontends.views import stop_text
from legio.request import Stuck

logger = logging.getLogger(__name__)

PREFIX = "stk"


def stuck_text(stuck: Stuck) -> str:
    minutes = stuck.silent_for_s / 60
    silent = f"{minutes:.0f} min" if minutes >= 1 else f"{stuck.silent_for_s:.0f} s"
    on = f" on #{stuck.seq}" if stuck.seq else ""
    project = f" (#{stuck.project})" if stuck.project else ""
    return (
        f"⚠️ {stuck.agent} has sent nothing for {silent}{on}{project}: its turn may be stuck. "
        "Stop it, or keep waiting?"
    )


def stuck_keyboard(agent: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton("⏹ Stop", callback_data=f"{PREFIX}:stop:{agent}"),
                InlineKeyboardButton("⏳ Keep waiting", callback_data=f"{PREFIX}:wait:{agent}"),
            ]
        ]
    )


class StuckView:
    """Says stuck turns and takes the taps on their buttons (see the module docstring)."""

    def __init__(self, bot: Bot, chat_ids: list[int], app: LegioApp, lanes: dict[str, Lane]):
        self.bot = bot
        self.chat_ids = chat_ids
        self.app = app
        self.operations = app.operations  # Keep waiting
        self.lanes = lanes  # each agent's request's topic (TelegramAsker.lanes)

    async def show(self, stuck: Stuck) -> None:
        lane = self.lanes.get(stuck.agent)
        chats = [lane.chat_id] if lane is not None else self.chat_ids
        for chat_id in chats:
            try:
                with in_lane(lane):
                    await self.bot.send_message(
                        chat_id,
                        stuck_text(stuck),
                        reply_markup=stuck_keyboard(stuck.agent),
                        link_preview_options=NO_PREVIEW,
                    )
            except TelegramError as e:
                logger.warning(
                    "could not tell chat %s about %s's stuck turn: %s", chat_id, stuck.agent, e
                )

    @staticmethod
    def takes(query: CallbackQuery) -> bool:
        return (query.data or "").startswith(f"{PREFIX}:")

    async def on_tap(self, query: CallbackQuery, receipt: int | None = None) -> None:
        """Stop, or Keep waiting (``receipt``: when the tap arrived; a Stop ends what was
        asked before it)."""
        parts = (query.data or "").split(":")
        if len(parts) != 3 or parts[1] not in ("stop", "wait"):
            await query.answer("Unknown button.")
            return
        agent = parts[2]
        if parts[1] == "stop":
            stopped = await self.app.stop([agent], receipt)
            line = stop_text(stopped, agent)
        elif self.operations.keep_waiting(agent):
            line = f"Waiting on for {agent}."
        else:
            line = f"{agent} has finished that turn."
        await query.answer(line)
        message = query.message
        if message is not None:
            with contextlib.suppress(TelegramError):
                await self.bot.edit_message_reply_markup(
                    message.chat.id, message.message_id, reply_markup=None
                )
                await self.bot.send_message(message.chat.id, line, link_preview_options=NO_PREVIEW)
