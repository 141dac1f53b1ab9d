"""Live answers on Telegram: each agent's text streams into a draft as it is written.

In a private chat, ``LiveView`` (one per request) shows what each answering agent is
writing as a draft (``sendMessageDraft``, Bot API 9.3+): a ``draft_id`` of its own per
agent and request, under the same attribution header as the final answer, rendered by
the same Markdown converter, cut to its last 4096 UTF-16 units, updated at most once
per ``interval_s`` per draft, at most one per ``CHAT_INTERVAL_S`` in a chat (so drafts
never crowd answers out of Telegram's limits), and always through the bot (so
``AIORateLimiter`` paces them with every other call). Before an agent writes, its ``⏳``
line (thinking, a tool, queued) is its draft; the lines of agents working for it (the
centuriones the Legatus dispatches to) appear under it. A request that shows nothing
within ``placeholder_after_s`` gets an empty draft (Telegram's "Thinking..."
placeholder), which its first agent's draft then continues; no draft at all is sent
before then, so an answer that quick costs no Bot API call but its ``sendMessage``.

A draft is only a preview: the caller still sends the final answer with
``sendMessage``, after ``finish(agent)`` (which stops that agent's draft and waits for
one in flight). Where drafts do not work (``[telegram] stream = false``, a group, an
old Bot API server, any refusal), the chat falls back for the rest of the run to the
status message (``StatusBoard``) and the typing action; a refusal is logged once per
chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

from telegram import Bot, MessageEntity
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from legio.frontends.statusview import previews, status_text
from legio.frontends.telegram.lanes import LANE, Lane
from legio.request import Status

if TYPE_CHECKING:
    from legio.frontends.telegram.status import StatusBoard

logger = logging.getLogger(__name__)

DRAFT_INTERVAL_S = 1.0  # at most one update per draft per second
CHAT_INTERVAL_S = 0.2  # and five per chat: drafts never crowd answers out of the rate limit
PLACEHOLDER_AFTER_S = 0.05  # show that work began, unless the answer is already there
REFRESH_S = 20.0  # a draft lasts 30 s on Telegram: show it again while the agent is silent
SOURCE_CHARS = 3500  # Markdown kept from the end of a long text before rendering

Chunk = tuple[str, list[MessageEntity]]
Renderer = Callable[[str], list[Chunk]]
Header = Callable[[str], str]  # agent -> its attribution line(s), "" for none
TypingShown = Callable[[int], AbstractAsyncContextManager[None]]


class DraftSupport:
    """Which chats get drafts, for the whole run; hands out draft ids."""

    def __init__(
        self,
        enabled: bool,
        *,
        first_id: int | None = None,
        chat_interval_s: float = CHAT_INTERVAL_S,
    ) -> None:
        self.enabled = enabled
        self.chat_interval_s = chat_interval_s
        self._refused: set[int] = set()
        self._next: dict[int, float] = {}
        self._turns: dict[int, asyncio.Lock] = {}
        start = first_id if first_id is not None else time.time_ns() // 1_000_000 % 10**9 + 1
        self._ids = itertools.count(start)

    def usable(self, chat_id: int) -> bool:
        """Drafts are on, the chat is private, and it has not refused one."""
        return self.enabled and chat_id > 0 and chat_id not in self._refused

    def refuse(self, chat_id: int, error: BaseException) -> None:
        if chat_id not in self._refused:
            self._refused.add(chat_id)
            logger.warning(
                "Telegram refused a draft in chat %s (%s); that chat gets the status message "
                "instead of streamed drafts until Legio restarts",
                chat_id,
                error,
            )

    def new_id(self) -> int:
        return next(self._ids)

    async def turn(self, chat_id: int) -> None:
        """Wait until a draft may go to ``chat_id`` (first come, first served)."""
        lock = self._turns.setdefault(chat_id, asyncio.Lock())
        async with lock:
            wait = self._next.get(chat_id, 0.0) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._next[chat_id] = time.monotonic() + self.chat_interval_s


def tail_markdown(markdown: str, chars: int = SOURCE_CHARS) -> str:
    """The end of a long Markdown text, cut at a line where it can be, code fences kept open."""
    if len(markdown) <= chars:
        return markdown
    tail = markdown[-chars:]
    newline = tail.find("\n")
    if 0 <= newline < chars // 4:
        tail = tail[newline + 1 :]
    if markdown[: len(markdown) - len(tail)].count("```") % 2:  # cut inside a code block
        return "…\n```\n" + tail
    return "…\n" + tail


def draft_chunk(header: str, body: str, render: Renderer) -> Chunk:
    """One message (text + entities) within Telegram's limits: the header and the end of
    ``body``."""
    chars = SOURCE_CHARS
    while True:
        chunks = render(header + tail_markdown(body, chars))
        if len(chunks) <= 1 or chars < 64:
            return chunks[-1] if chunks else ("", [])
        chars //= 2


@contextlib.asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


def _transient(error: TelegramError) -> bool:
    return isinstance(error, (TimedOut, RetryAfter)) or (
        isinstance(error, NetworkError) and not isinstance(error, BadRequest)
    )


def _working(agent: str) -> str:
    return f"⏳ {agent} is working..."


@dataclass
class _Draft:
    agent: str
    draft_id: int
    header: str
    text: str = ""
    line: str = ""
    line_last: bool = False  # the ⏳ line came after the text (a tool after some words)
    shown: str | None = None
    sent_at: float = float("-inf")
    done: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None


class LiveView:
    """What Caesar sees of one request while agents work; see the module docstring.

    ``update`` is the request's status callback, ``stream`` its text callback.
    """

    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        support: DraftSupport,
        board: StatusBoard,
        typing: TypingShown,
        render: Renderer,
        header: Header,
        *,
        interval_s: float = DRAFT_INTERVAL_S,
        placeholder_after_s: float = PLACEHOLDER_AFTER_S,
    ) -> None:
        self.bot = bot
        self.chat_id = chat_id
        self.support = support
        self.board = board
        self.typing = typing
        self.render = render
        self.header = header
        self.interval_s = interval_s
        self.placeholder_after_s = placeholder_after_s
        self.drafting = support.usable(chat_id)
        self._drafts: dict[str, _Draft] = {}
        self._guests: dict[str, str] = {}  # agent -> ⏳ line shown in the host draft
        self._first_id = support.new_id() if self.drafting else 0
        self._shown_any = False
        self._opened = time.monotonic()
        self._first_lock = asyncio.Lock()  # the placeholder and the first draft, in order
        self._soon: asyncio.Task[None] | None = None
        self._typing: AbstractAsyncContextManager[None] | None = None
        self.lane = LANE.get()  # the request's topic
        self.lanes: dict[str, Lane] = {}  # where each agent's stuck turn is said: the owner's

    # ---------------------------------------------------------- callbacks

    async def update(self, status: Status) -> None:
        """What an agent does now (the watch's ``status``)."""
        agent, line = status.agent, status_text(status)
        if self.lane is not None:  # its turn is this request's: so is a stuck turn's notice
            self.lanes[agent] = self.lane
        if not self.drafting:
            await self.board.update(agent, line)
            return
        # A draft cannot carry buttons: the status message keeps one line per working agent
        # for its ⏹ Stop button (⏸ while it waits for Caesar's approval); text goes to drafts.
        await self.board.update(agent, line if status.waits_for_caesar else _working(agent))
        draft = self._drafts.get(agent)
        host = self._host()
        if draft is None and host is not None:
            self._guests[agent] = line
            self._changed(host)
            return
        if draft is not None and previews(status, draft.text):
            return  # the draft shows that text already
        draft = draft or self._draft(agent)
        draft.line, draft.line_last = line, True
        self._changed(draft)

    async def stream(self, agent: str, text: str) -> None:
        """The text ``agent`` has written so far in its current message (the watch's ``stream``)."""
        if not self.drafting:
            return
        draft = self._drafts.get(agent)
        if draft is None:
            if agent not in self.board.lines:  # its ⏹ Stop button, while it writes
                await self.board.update(agent, _working(agent))
            draft = self._draft(agent)
            if self._guests.pop(agent, None) is not None and (host := self._host()):
                self._changed(host)
        draft.text, draft.line_last = text, False
        self._changed(draft)

    async def finish(self, agent: str) -> None:
        """``agent`` has answered: its draft stops (one in flight is waited for)."""
        self.board.done_with(agent)
        if self._guests.pop(agent, None) is not None and (host := self._host()):
            self._changed(host)
        draft = self._drafts.get(agent)
        if draft is None or draft.done:
            return
        draft.done = True
        async with draft.lock:
            pass
        if draft.task is not None:
            draft.task.cancel()

    # ---------------------------------------------------------- drafts

    def _host(self) -> _Draft | None:
        return next((d for d in self._drafts.values() if not d.done), None)

    def _draft(self, agent: str) -> _Draft:
        draft_id = self._first_id if not self._drafts else self.support.new_id()
        draft = _Draft(agent, draft_id, self.header(agent))
        if self._soon is None or self._soon.done():  # else _show_soon starts it, if needed
            draft.task = asyncio.create_task(self._pump(draft))
        self._drafts[agent] = draft
        return draft

    def _changed(self, draft: _Draft) -> None:
        draft.changed.set()

    def _content(self, draft: _Draft) -> str:
        body = draft.text
        if draft.line and (not body or draft.line_last):
            body = f"{body}\n\n{draft.line}" if body else draft.line
        if self._guests and draft is self._host():
            guests = "\n".join(f"{agent}: {line}" for agent, line in self._guests.items())
            body = f"{body}\n\n{guests}" if body else guests
        return body

    async def _pump(self, draft: _Draft) -> None:
        """Send the draft when it changes, at most once per interval; again before it expires."""
        while not draft.done and self.drafting:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(draft.changed.wait(), REFRESH_S)
            # not before placeholder_after_s: an answer that quick needs no draft at all
            due = max(draft.sent_at + self.interval_s, self._opened + self.placeholder_after_s)
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if draft.done:
                return
            await self.support.turn(self.chat_id)
            async with draft.lock:
                if draft.done or not self.drafting:
                    return
                draft.changed.clear()
                await self._send(draft)

    async def _send(self, draft: _Draft) -> None:
        text, entities = draft_chunk(draft.header, self._content(draft), self.render)
        if not text.strip():
            return
        draft.sent_at = time.monotonic()
        async with self._first_lock if draft.draft_id == self._first_id else _nothing():
            posted = await self._post(draft.draft_id, text, entities)
        if posted:
            draft.shown = text
            self._shown_any = True

    async def _post(self, draft_id: int, text: str, entities: list[MessageEntity]) -> bool:
        """One ``sendMessageDraft``; on a refusal, the chat falls back to the status message.

        An empty text is Telegram's "Thinking..." placeholder (Bot API 10.0); a server
        that refuses it gets ``⏳`` instead.
        """
        try:
            await self.bot.send_message_draft(
                self.chat_id, draft_id, text, entities=entities or None
            )
            return True
        except TelegramError as e:
            if _transient(e):
                logger.info("a draft was not updated: %s", e)
                return False
            if entities and isinstance(e, BadRequest) and "entit" in str(e).lower():
                return await self._post(draft_id, text, [])
            if not text and isinstance(e, BadRequest):
                return await self._post(draft_id, "⏳", [])
            self.support.refuse(self.chat_id, e)
            await self._fall_back()
            return False

    async def _fall_back(self) -> None:
        """Show this request's ⏳ lines in the status message from now on."""
        if not self.drafting:
            return
        self.drafting = False
        for draft in self._drafts.values():
            if not draft.done and draft.line:
                await self.board.update(draft.agent, draft.line)
        for agent, line in self._guests.items():
            await self.board.update(agent, line)
        await self._start_typing()

    async def _start_typing(self) -> None:
        if self._typing is None:
            self._typing = self.typing(self.chat_id)
            await self._typing.__aenter__()

    async def _show_soon(self) -> None:
        """After ``placeholder_after_s``: something that says work began."""
        await asyncio.sleep(self.placeholder_after_s)
        for draft in self._drafts.values():  # no pump before now: a quick answer needs none
            if draft.task is None and not draft.done:
                draft.task = asyncio.create_task(self._pump(draft))
        if not self.drafting:
            await self._start_typing()
        elif not self._drafts:
            await self.support.turn(self.chat_id)
            async with self._first_lock:
                if not self._shown_any and not self._drafts:
                    await self._post(self._first_id, "", [])

    # ---------------------------------------------------------- context

    async def __aenter__(self) -> LiveView:
        self._opened = time.monotonic()
        await self.board.__aenter__()
        self._soon = asyncio.create_task(self._show_soon())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._soon is not None:
            self._soon.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._soon
        for draft in self._drafts.values():
            draft.done = True
            if draft.task is not None:
                draft.task.cancel()
        await asyncio.gather(
            *(d.task for d in self._drafts.values() if d.task is not None), return_exceptions=True
        )
        try:
            await self.board.__aexit__(kind, exc, tb)
        finally:
            if self._typing is not None:
                await self._typing.__aexit__(None, None, None)
