"""What Caesar sees while agents work: the typing action and one status message.

``StatusBoard``: once a request takes over a second, one message with the agents'
``⏳`` lines, edited at most about once a second, never with unchanged text, deleted at
the end. ``Typing``: the typing action in a chat while any request there runs, and the
first sign (``sign``): one typing action the moment a request's update is admitted, before
it is stored or routed, so Caesar sees at once that Legio took his message. The typing
loop of a request that follows does not repeat it while it still shows (Telegram shows
one for about 5 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from types import TracebackType

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.constants import ChatAction
from telegram.error import BadRequest, TelegramError

from legio.frontends.telegram.sending import MAX_UTF16, NO_PREVIEW

logger = logging.getLogger(__name__)

STATUS_INTERVAL_S = 1.0
STOP_WAIT_S = 10.0
TYPING_EVERY_S = 4.5
SIGN_EVERY_S = 1.0  # one first sign per chat per second at most


class Typing:
    """The typing action in a chat while any request there is being worked on."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self._active: dict[int, int] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._sent: dict[int, float] = {}  # chat -> when its last typing action was sent
        self._signs: set[asyncio.Task[None]] = set()

    def sign(self, chat_id: int, thread_id: int | None = None) -> None:
        """The first sign: one typing action now, unless one went to the chat less than
        ``SIGN_EVERY_S`` ago (an album's parts, a burst: one sign, not one Bot API call
        per update taken from the rate limit that answers share). Otherwise never
        skipped: an answer sent meanwhile clears an earlier one on Caesar's screen.

        Sent from a task of its own: the caller (the update's admission) never waits for it.
        """
        if time.monotonic() - self._sent.get(chat_id, float("-inf")) < SIGN_EVERY_S:
            return
        self._sent[chat_id] = time.monotonic()
        task = asyncio.create_task(self._send(chat_id, thread_id))
        self._signs.add(task)
        task.add_done_callback(self._signs.discard)

    async def _send(self, chat_id: int, thread_id: int | None = None) -> None:
        with contextlib.suppress(TelegramError):
            if thread_id is None:  # LaneBot puts it in the request's topic, if any
                await self.bot.send_chat_action(chat_id, ChatAction.TYPING)
            else:
                await self.bot.send_chat_action(
                    chat_id, ChatAction.TYPING, message_thread_id=thread_id
                )

    @contextlib.asynccontextmanager
    async def shown(self, chat_id: int) -> AsyncIterator[None]:
        self._active[chat_id] = self._active.get(chat_id, 0) + 1
        if chat_id not in self._tasks or self._tasks[chat_id].done():
            self._tasks[chat_id] = asyncio.create_task(self._loop(chat_id))
        try:
            yield
        finally:
            self._active[chat_id] -= 1

    async def _loop(self, chat_id: int) -> None:
        while self._active.get(chat_id, 0) > 0:
            shown_until = self._sent.get(chat_id, float("-inf")) + TYPING_EVERY_S
            if time.monotonic() >= shown_until:  # not while the sign (or the last one) shows
                self._sent[chat_id] = time.monotonic()
                await self._send(chat_id)
                shown_until = time.monotonic() + TYPING_EVERY_S
            while time.monotonic() < shown_until:
                if self._active.get(chat_id, 0) <= 0:
                    return
                await asyncio.sleep(0.1)


class StatusBoard:
    """One status message per request while agents work (after the first second)."""

    def __init__(self, bot: Bot, chat_id: int, *, interval_s: float = STATUS_INTERVAL_S) -> None:
        self.bot = bot
        self.chat_id = chat_id
        self.interval_s = interval_s
        self.lines: dict[str, str] = {}
        self.message_id: int | None = None
        self.shown = ""
        self._changed = asyncio.Event()
        self._done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def update(self, agent: str, line: str) -> None:
        """A status callback for ``Legatus.handle_message``."""
        self.lines[agent] = line
        self._changed.set()

    def done_with(self, agent: str) -> None:
        """An agent has answered: its line leaves the status message."""
        if self.lines.pop(agent, None) is not None:
            self._changed.set()

    def stop_buttons(self) -> InlineKeyboardMarkup:
        """A Stop button per working agent (``stop:<name>``, as ``/stop <name>``)."""
        return InlineKeyboardMarkup(
            [[InlineKeyboardButton(f"⏹ Stop {a}", callback_data=f"stop:{a}")] for a in self.lines]
        )

    def text(self) -> str:
        if len(self.lines) == 1:
            return next(iter(self.lines.values()))
        return "\n".join(f"{agent}: {line}" for agent, line in self.lines.items())

    async def __aenter__(self) -> StatusBoard:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        if self._task is not None:
            # Stop by flag, not by cancellation: on Python 3.11 asyncio.wait_for can swallow a
            # cancel that coincides with its event, and the loop would never end.
            try:
                await asyncio.wait_for(asyncio.shield(self._task), STOP_WAIT_S)
            except TimeoutError:
                self._task.cancel()
            except Exception:
                logger.warning("status board failed", exc_info=True)
        if self.message_id is not None:
            try:
                await self.bot.delete_message(self.chat_id, self.message_id)
            except TelegramError as e:
                logger.info("could not delete a status message: %s", e)

    @staticmethod
    async def _wait_any(events: list[asyncio.Event], seconds: float) -> None:
        """Wait up to ``seconds`` for any of ``events``."""
        waiters = [asyncio.ensure_future(event.wait()) for event in events]
        try:
            await asyncio.wait(
                waiters, timeout=max(0.0, seconds), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _run(self) -> None:
        last_edit = time.monotonic()  # no status message for answers quicker than interval_s
        while not self._done.is_set():
            now = time.monotonic()
            if self._changed.is_set() and now - last_edit >= self.interval_s:
                self._changed.clear()
                await self._show(self.text())
                last_edit = time.monotonic()
            if self._done.is_set():
                return
            if self._changed.is_set():  # a line is waiting: show it when the interval allows
                await self._wait_any([self._done], last_edit + self.interval_s - time.monotonic())
            else:
                await self._wait_any([self._changed, self._done], 3600)

    async def _show(self, text: str) -> None:
        text = text[: MAX_UTF16 // 2]
        if not text.strip() or text == self.shown:
            return
        try:
            if self.message_id is None:
                sent = await self.bot.send_message(
                    self.chat_id,
                    text,
                    link_preview_options=NO_PREVIEW,
                    reply_markup=self.stop_buttons(),
                    disable_notification=True,  # progress: it does not ring
                )
                self.message_id = sent.message_id
            else:
                await self.bot.edit_message_text(
                    text,
                    self.chat_id,
                    self.message_id,
                    link_preview_options=NO_PREVIEW,
                    reply_markup=self.stop_buttons(),
                )
            self.shown = text
        except BadRequest as e:
            if "not modified" in str(e).lower():
                self.shown = text
            elif "not found" in str(e).lower():
                self.message_id = None
            else:
                logger.info("status message not updated: %s", e)
        except TelegramError as e:
            logger.info("status message not updated: %s", e)
