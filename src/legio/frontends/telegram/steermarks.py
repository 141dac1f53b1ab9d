"""➕ marks: Caesar's message joined an agent's running turn (a steer), in Telegram.

The mark is a short silent reply to his message, "➕ added to vorenus's turn", with one
button, ⏭ "after this turn": tapped before the agent has the message, it goes back in line
behind the turn (today's queueing) and the mark says so; tapped later, the tap says the
agent has it already. The button is dropped either way.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters
from telegram.error import TelegramError

from legio.frontends.telegram.sending import send_with_retries
from legio.request import Added

logger = logging.getLogger(__name__)

PREFIX = "steer:"
MARKS_KEPT = 200  # marks whose ⏭ still answers (older ones: "too old")


def added_text(agent: str) -> str:
    return f"➕ added to {agent}'s turn"


def after_text(agent: str) -> str:
    return f"⏭ {agent} takes it after this turn"


class SteerMarks:
    """The ➕ marks of one bot and their ⏭ buttons."""

    def __init__(self) -> None:
        self._added: dict[str, Added] = {}
        self._numbers = itertools.count(1)

    def shower(self, bot: Bot, chat_id: int, reply_to: int) -> Callable[[Added], Awaitable[None]]:
        """The ``on_joined`` of a request written as message ``reply_to`` in ``chat_id``."""

        async def show(added: Added) -> None:
            key = str(next(self._numbers))
            self._added[key] = added
            while len(self._added) > MARKS_KEPT:
                self._added.pop(next(iter(self._added)))
            button = InlineKeyboardButton("⏭ after this turn", callback_data=f"{PREFIX}{key}")
            try:
                await send_with_retries(
                    bot,
                    chat_id,
                    added_text(added.agent),
                    reply_parameters=ReplyParameters(reply_to, allow_sending_without_reply=True),
                    reply_markup=InlineKeyboardMarkup([[button]]),
                    disable_notification=True,
                )
            except TelegramError as e:
                logger.warning("could not mark #%s as added to a turn: %s", added.seq, e)

        return show

    @staticmethod
    def takes(query: CallbackQuery) -> bool:
        return (query.data or "").startswith(PREFIX)

    async def on_tap(self, query: CallbackQuery) -> None:
        """⏭: after this turn, if the agent has not got the message yet."""
        added = self._added.pop((query.data or "")[len(PREFIX) :], None)
        message = query.message
        if added is None:
            await query.answer("This mark is too old to change.")
        elif added.after():
            await query.answer(after_text(added.agent))
            if message is not None:
                with contextlib.suppress(TelegramError):
                    await query.get_bot().edit_message_text(
                        after_text(added.agent), message.chat.id, message.message_id
                    )
            return
        else:
            await query.answer(f"{added.agent} has it already: it is part of this turn.")
        if message is not None:
            with contextlib.suppress(TelegramError):
                await query.get_bot().edit_message_reply_markup(
                    message.chat.id, message.message_id, reply_markup=None
                )
