"""Lanes: where in Caesar's chat a request's messages go (a topic per agent, threaded mode).

A ``Lane`` is a chat and, in threaded mode, a topic (``thread_id``) and the agent it
belongs to, if any. The lane of the request being handled lives in a context variable
(``LANE``), set where a request starts (``in_lane``): every task started from there —
its status message, drafts, typing action, answers and files — inherits it, and
``LaneBot`` (python-telegram-bot's ``ExtBot``, given to the ``Application``) adds
``message_thread_id`` to each send in that chat. So no sending function needs to know
about topics.

A topic Caesar deleted makes Telegram answer "message thread not found": the message
is sent again outside any topic, the topic is forgotten (``on_lost``: made again when
next needed) and Caesar is told once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from telegram.error import BadRequest
from telegram.ext import ExtBot

logger = logging.getLogger(__name__)

LOST = "message thread not found"


@dataclass(frozen=True)
class Lane:
    chat_id: int
    thread_id: int | None = None
    agent: str | None = None  # the topic's agent; None: the main chat or another topic
    project: str | None = None  # the project the topic is bound to (/project)
    name: str | None = None  # the topic's name, as the agent is told it


LANE: ContextVar[Lane | None] = ContextVar("legio_lane", default=None)
LostTopic = Callable[[Lane], Awaitable[None]]


@contextlib.contextmanager
def in_lane(lane: Lane | None) -> Iterator[None]:
    """Run the block (and every task it starts) in ``lane``."""
    token = LANE.set(lane)
    try:
        yield
    finally:
        LANE.reset(token)


class LaneBot(ExtBot[Any]):
    """An ``ExtBot`` that sends in the current lane's topic (see the module docstring)."""

    __slots__ = ("on_lost",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.watch(None)

    def watch(self, on_lost: LostTopic | None) -> None:
        """Call ``on_lost(lane)`` when a lane's topic is gone (PTB freezes its bots)."""
        with self._unfrozen():
            self.on_lost = on_lost

    async def _lane(
        self, send: Callable[..., Awaitable[Any]], chat_id: Any, *args: Any, **kwargs: Any
    ) -> Any:
        lane = LANE.get()
        if lane is None or lane.thread_id is None or "message_thread_id" in kwargs:
            return await send(chat_id, *args, **kwargs)
        if str(chat_id) != str(lane.chat_id):
            return await send(chat_id, *args, **kwargs)
        try:
            return await send(chat_id, *args, message_thread_id=lane.thread_id, **kwargs)
        except BadRequest as e:
            if LOST not in str(e).lower():
                raise
            logger.warning(
                "topic %s in chat %s is gone; sending outside it", lane.thread_id, lane.chat_id
            )
            LANE.set(Lane(lane.chat_id))  # this request's other messages too
            if self.on_lost is not None:
                await self.on_lost(lane)
            return await send(chat_id, *args, **kwargs)

    async def send_message(self, chat_id: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._lane(super().send_message, chat_id, *args, **kwargs)

    async def send_message_draft(self, chat_id: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._lane(super().send_message_draft, chat_id, *args, **kwargs)

    async def send_photo(self, chat_id: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._lane(super().send_photo, chat_id, *args, **kwargs)

    async def send_document(self, chat_id: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._lane(super().send_document, chat_id, *args, **kwargs)

    async def send_chat_action(self, chat_id: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._lane(super().send_chat_action, chat_id, *args, **kwargs)
