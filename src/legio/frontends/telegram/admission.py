"""Who the Telegram bot obeys: Caesar, in his private chat (and the groups he opted in).

``Admission.admits(update)`` decides for every update before any handler runs:

- the sender must be one of ``telegram.caesar_ids`` (else: dropped, logged once per user);
- the chat must be Caesar's private chat, or a group listed in ``telegram.allowed_chats``
  (else: dropped, logged once per chat), so nothing Caesar says in a group is answered
  where every member reads it unless he asked for that;
- an update without a chat (inline queries, callback queries, polls…) is dropped.

What was logged is remembered in ``BoundedSet``\\ s of ``REMEMBERED`` ids each, so a
flood of strangers cannot grow the daemon's memory without limit (an id forgotten
after a flood is logged again, once). ``addressed_elsewhere`` tells a command meant
for another bot (``/status@other_bot``) from one for us. ``forwarded_from`` names where
a forwarded message (or one sent via an inline bot) came from: stored with it, and
shown to agents as its source, never as Caesar's own words.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Hashable, Iterable

from telegram import (
    Chat,
    Message,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    Update,
)
from telegram.constants import ChatType

from legio.frontends.admin import command_target

logger = logging.getLogger("legio.frontends.telegram.bot")

REMEMBERED = 4096
GROUPS = (ChatType.GROUP, ChatType.SUPERGROUP)


class BoundedSet:
    """A set that keeps at most ``limit`` items, forgetting the least recently added."""

    def __init__(self, limit: int = REMEMBERED) -> None:
        self.limit = limit
        self._items: OrderedDict[Hashable, None] = OrderedDict()

    def add(self, item: Hashable) -> bool:
        """Remember ``item``; whether it was new."""
        if item in self._items:
            self._items.move_to_end(item)
            return False
        self._items[item] = None
        while len(self._items) > self.limit:
            self._items.popitem(last=False)
        return True

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)


class Admission:
    """The decision for each update; see the module docstring."""

    def __init__(
        self, caesar_ids: Iterable[int], allowed_chats: Iterable[int], *, remember: int = REMEMBERED
    ) -> None:
        self.caesar_ids = frozenset(caesar_ids)
        self.allowed_chats = frozenset(allowed_chats)
        self.refused_users = BoundedSet(remember)
        self.refused_chats = BoundedSet(remember)

    def admits(self, update: object) -> bool:
        """Whether ``update`` may reach the handlers (logs the first refusal of each id)."""
        if not isinstance(update, Update):
            return False
        user, chat = update.effective_user, update.effective_chat
        if user is None or user.id not in self.caesar_ids:
            user_id = user.id if user else 0
            if self.refused_users.add(user_id):
                logger.warning(
                    "ignoring Telegram user id %s (%s, chat %s): not in telegram.caesar_ids",
                    user_id or "unknown",
                    user.full_name if user else "no user",
                    chat.type if chat else "none",
                )
            return False
        if chat is None:
            return False
        if chat.type == ChatType.PRIVATE and chat.id in self.caesar_ids:
            return True
        if chat.type in GROUPS and chat.id in self.allowed_chats:
            return True
        if self.refused_chats.add(chat.id):
            logger.warning(
                "ignoring Caesar's messages in chat %s (%s %r): only private chats are obeyed; "
                "add its id to telegram.allowed_chats to allow a group",
                chat.id,
                chat.type,
                chat.title or "",
            )
        return False


def addressed_elsewhere(text: str, username: str | None) -> bool:
    """Whether command ``text`` names another bot (``/cmd@other_bot``)."""
    target = command_target(text)
    return target is not None and target.lower() != (username or "").lower()


def _chat_name(chat: Chat, signature: str | None) -> str:
    name = chat.title or (f"@{chat.username}" if chat.username else f"chat {chat.id}")
    return f"{name} ({signature})" if signature else name


def forwarded_from(message: Message) -> str | None:
    """Who a forwarded message came from, or which inline bot sent it; None if neither."""
    source: str | None = None
    origin = message.forward_origin
    if isinstance(origin, MessageOriginUser):
        user = origin.sender_user
        source = user.full_name + (f" (@{user.username})" if user.username else "")
    elif isinstance(origin, MessageOriginHiddenUser):
        source = origin.sender_user_name
    elif isinstance(origin, MessageOriginChat):
        source = _chat_name(origin.sender_chat, origin.author_signature)
    elif isinstance(origin, MessageOriginChannel):
        source = _chat_name(origin.chat, origin.author_signature)
    elif origin is not None:
        source = "an unknown source"
    if message.via_bot is not None:
        via = f"@{message.via_bot.username or message.via_bot.id} (inline bot)"
        source = f"{source}, via {via}" if source else via
    return source
