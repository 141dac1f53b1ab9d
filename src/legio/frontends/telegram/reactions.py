"""Reactions in Telegram: Legio's marks on Caesar's messages, and Caesar's on Legio's.

- **Marks.** A request's message gets 👀 the moment it is admitted (a task: the request
  never waits for it; with reactions on it is the request's first sign) and 👌 once it
  is answered — two ``setMessageReaction`` calls per request, none per answer beyond
  them. A request nobody answered (an error, a stop) loses its 👀 instead. A bot may use
  only Telegram's fixed list of reaction emoji (✅ is refused: PROTOCOLS.md).
- **Caesar's reactions** (``message_reaction`` updates, asked for in ``allowed_updates``):
  on an agent's answer, that agent reads "Caesar reacted 👍 to your answer to #12." with
  its next request (``ConversationDoor.reacted``); 👎 on a work card offers ↩️ Undo (a
  button ``card:undo:<id>``, which the card desk answers).
- ``[telegram] reactions = false`` turns both off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    ReactionTypeEmoji,
    ReplyParameters,
    Update,
)
from telegram.error import TelegramError

from legio.doors.talkdoor import ConversationDoor
from legio.frontends.telegram.cardview import CardDesk
from legio.frontends.telegram.sending import send_with_retries
from legio.request import Reply

logger = logging.getLogger(__name__)

TAKEN = "👀"
ANSWERED = "👌"
UNDO_ON = "👎"
# Telegram's reactions a bot may set (Bot API ReactionTypeEmoji); ✅ is not one
_ALLOWED = (
    "👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 ❤‍🔥 🌚 🌭 💯 🤣 "
    "⚡ 🍌 🏆 💔 🤨 😐 🍓 🍾 💋 🖕 😈 😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 "
    "🤪 🗿 🆒 💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷‍♂ 🤷 🤷‍♀ 😡"
)
ALLOWED = frozenset(_ALLOWED.split())
MARKS_KEPT = 1000  # 👀 marks whose request has not ended (a question's answer never does)


class Reactions:
    """Marks and Caesar's reactions; see the module docstring."""

    def __init__(self, enabled: bool, conversation: ConversationDoor, cards: CardDesk) -> None:
        self.enabled = enabled
        self.conversation = conversation
        self.cards = cards
        self._taken: dict[tuple[int, int], asyncio.Task[None]] = {}

    def taken(self, bot: Bot, chat_id: int, message_id: int) -> bool:
        """Mark Caesar's message 👀 now, without waiting (once); whether it was marked."""
        if not self.enabled or not message_id:
            return False
        key = (chat_id, message_id)
        if key not in self._taken:
            self._taken[key] = asyncio.create_task(self._mark(bot, chat_id, message_id, TAKEN))
            while len(self._taken) > MARKS_KEPT:
                self._taken.pop(next(iter(self._taken)))
        return True

    def first_sign(self, bot: Bot, update: Update) -> bool:
        """The first sign of a request's message: 👀 (None sent: reactions are off)."""
        message = update.message
        if message is None or (message.text or "").startswith("/"):
            return False
        if message.media_group_id is not None:  # an album: its request's first part, later
            return False
        return self.taken(bot, message.chat_id, message.message_id)

    async def done(self, bot: Bot, chat_id: int, message_id: int) -> None:
        """A message taken that is no request (the answer to an agent's question): 👌."""
        await self.answered(bot, chat_id, message_id, [Reply("", "", "answer")])

    async def answered(
        self, bot: Bot, chat_id: int, message_id: int, replies: Sequence[Reply]
    ) -> None:
        """The request ended: 👌 if an agent answered it, else its 👀 taken away."""
        task = self._taken.pop((chat_id, message_id), None)
        if task is None:
            return
        with contextlib.suppress(Exception):
            await task  # the marks in order: 👀 before 👌
        answered = any(r.kind == "answer" for r in replies)
        await self._mark(bot, chat_id, message_id, ANSWERED if answered else None)

    async def _mark(self, bot: Bot, chat_id: int, message_id: int, emoji: str | None) -> None:
        try:
            await bot.set_message_reaction(chat_id, message_id, emoji)
        except TelegramError as e:  # a mark is a courtesy: never a failed request
            logger.info("could not mark message %s with %s: %s", message_id, emoji, e)

    async def on_reaction(self, bot: Bot, update: Update) -> None:
        """Caesar reacted to a message of Legio's."""
        reaction = update.message_reaction
        if not self.enabled or reaction is None:
            return
        old = {r.emoji for r in reaction.old_reaction if isinstance(r, ReactionTypeEmoji)}
        added = [
            r.emoji
            for r in reaction.new_reaction
            if isinstance(r, ReactionTypeEmoji) and r.emoji not in old
        ]
        if not added:
            return  # taken away, or a custom emoji
        chat_id, message_id = reaction.chat.id, reaction.message_id
        card = next(
            (
                number
                for number, shown in self.cards.shown.items()
                if any((s.chat_id, s.message_id) == (chat_id, message_id) for s in shown)
            ),
            None,
        )
        if card is not None:
            if UNDO_ON in added:
                await self._offer_undo(bot, chat_id, message_id, card)
            return
        await self.conversation.reacted(chat_id, message_id, added[0])

    async def _offer_undo(self, bot: Bot, chat_id: int, message_id: int, card: int) -> None:
        button = InlineKeyboardButton("↩️ Undo this turn", callback_data=f"card:undo:{card}")
        await send_with_retries(
            bot,
            chat_id,
            "👎 Not what you wanted? ↩️ Undo puts the agent's branch and copy back where "
            "they were before this turn (its work is kept under a recoverable ref).",
            reply_markup=InlineKeyboardMarkup([[button]]),
            reply_parameters=ReplyParameters(message_id, allow_sending_without_reply=True),
            disable_notification=True,
        )
