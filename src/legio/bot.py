"""The Telegram front-end (python-telegram-bot): Caesar only, answers rendered, never blocked.

- Only ``telegram.caesar_ids`` are served. Every other update is dropped before any
  handler runs: no reply, nothing stored; the refusal is logged once per user id.
- Text messages run as non-blocking handlers, so admin commands (quick, blocking)
  answer at once while agents work; messages to one agent keep their order (its
  session's FIFO lock), and a queued request says so in its status message.
- While agents work: a typing action, and (once a request takes over a second) one
  status message with their ``⏳`` lines, edited at most about once a second, never
  with unchanged text, deleted at the end.
- Answers: Markdown converted to text + entities by telegramify-markdown, split under
  4096 UTF-16 units (entities clipped at the cut), at most 100 entities a message;
  if Telegram still refuses one, it is sent again as plain text. Each agent's answer
  is its own message. ``AIORateLimiter`` retries 429s, so a flood limit loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any

from telegram import Bot, BotCommand, MessageEntity, ReplyParameters, Update
from telegram.constants import ChatAction
from telegram.error import BadRequest, NetworkError, TelegramError, TimedOut
from telegram.ext import (
    AIORateLimiter,
    Application,
    ApplicationBuilder,
    ApplicationHandlerStop,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)
from telegramify_markdown import convert, split_entities
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from legio.admin import COMMANDS, Admin, interruption_notice, parse_retry
from legio.config import Config
from legio.legatus import Legatus, Reply, ReplyCallback
from legio.telegram_files import UNSUPPORTED, receive, resume_pending, send_files

logger = logging.getLogger(__name__)

MAX_UTF16 = 4096
MAX_ENTITIES = 100
STATUS_INTERVAL_S = 1.0
STOP_WAIT_S = 10.0
TYPING_EVERY_S = 4.5

SEND_ATTEMPTS = 6

LegatusFactory = Callable[[], Awaitable[Legatus]]
Chunk = tuple[str, list[MessageEntity]]


# ------------------------------------------------------------------ rendering


def render(markdown: str) -> list[Chunk]:
    """Telegram messages (text + entities) for a Markdown answer, each within the limits."""
    try:
        text, entities = convert(markdown)
    except Exception:  # a converter bug must not cost Caesar the answer
        logger.warning("Markdown conversion failed; sending plain text", exc_info=True)
        text, entities = markdown, []
    chunks: list[Chunk] = []
    pending = split_entities(text, entities, MAX_UTF16)
    while pending:
        part_text, part_entities = pending.pop(0)
        if len(part_entities) > MAX_ENTITIES and len(part_text) > 1:
            smaller = split_entities(part_text, part_entities, max(1, len(part_text) // 2))
            if len(smaller) > 1:
                pending[:0] = smaller
                continue
            part_entities = []
        converted = [MessageEntity(**e.to_dict()) for e in part_entities]
        chunks.append((part_text, converted))
    if not chunks and markdown.strip():
        chunks = [(markdown[: MAX_UTF16 // 2], [])]
    return chunks


def plain_pages(text: str) -> list[str]:
    """Plain text cut into pieces Telegram accepts (UTF-16 length, at line breaks)."""
    return [t for t, _ in split_entities(text, [], MAX_UTF16)] or ["(empty)"]


def _transient(error: BaseException) -> bool:
    """Worth sending again: network trouble or a 5xx (not a refusal like 400 or 403)."""
    return isinstance(error, (NetworkError, TimedOut)) and not isinstance(error, BadRequest)


async def send_with_retries(bot: Bot, chat_id: int, text: str, **kwargs: Any) -> None:
    """sendMessage, retried with backoff on network errors (429s: AIORateLimiter)."""
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(_transient),
        stop=stop_after_attempt(SEND_ATTEMPTS),
        wait=wait_exponential(multiplier=0.5, max=8),
        reraise=True,
    ):
        with attempt:
            await bot.send_message(chat_id, text, **kwargs)


def origin_of(chat_id: int, message_id: int) -> str:
    return f"telegram:{chat_id}:{message_id}"


def chat_of(origin: str | None) -> int | None:
    """The chat a nuntius came from, for a ``telegram:<chat>:<message>`` origin."""
    if origin and origin.startswith("telegram:"):
        try:
            return int(origin.split(":")[1])
        except (IndexError, ValueError):
            return None
    return None


# ------------------------------------------------------------------ status message


class Typing:
    """The typing action in a chat while any request there is being worked on."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self._active: dict[int, int] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}

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
            with contextlib.suppress(TelegramError):
                await self.bot.send_chat_action(chat_id, ChatAction.TYPING)
            for _ in range(int(TYPING_EVERY_S / 0.1)):
                if self._active.get(chat_id, 0) <= 0:
                    return
                await asyncio.sleep(0.1)


class SendChains:
    """Sends queued per (chat, agent): one agent's answers go out in the order it gave them,
    without the agent waiting for Telegram."""

    def __init__(self) -> None:
        self._tails: dict[tuple[int, str], asyncio.Task[None]] = {}

    def enqueue(
        self, chat_id: int, agent: str, send: Callable[[], Awaitable[None]]
    ) -> asyncio.Task[None]:
        previous = self._tails.get((chat_id, agent))

        async def run() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            await send()

        task = asyncio.create_task(run())
        self._tails[(chat_id, agent)] = task
        task.add_done_callback(lambda t: self._forget((chat_id, agent), t))
        return task

    def _forget(self, key: tuple[int, str], task: asyncio.Task[None]) -> None:
        if self._tails.get(key) is task:
            del self._tails[key]


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
                sent = await self.bot.send_message(self.chat_id, text)
                self.message_id = sent.message_id
            else:
                await self.bot.edit_message_text(text, self.chat_id, self.message_id)
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


# ------------------------------------------------------------------ handlers


class LegioBot:
    """The handlers; ``startup``/``shutdown`` open and close the Legatus."""

    def __init__(self, config: Config, legatus_factory: LegatusFactory) -> None:
        self.config = config
        self.legatus_factory = legatus_factory
        self.caesar_ids = frozenset(config.telegram.caesar_ids)
        self._legatus: Legatus | None = None
        self._admin: Admin | None = None
        self._refused: set[int] = set()
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.chains = SendChains()
        self._typing: Typing | None = None
        self.downloads: set[asyncio.Task[Any]] = set()  # cancelled at shutdown, resumed at start

    @property
    def legatus(self) -> Legatus:
        assert self._legatus is not None, "LegioBot.startup() was not called"
        return self._legatus

    @property
    def admin(self) -> Admin:
        assert self._admin is not None, "LegioBot.startup() was not called"
        return self._admin

    async def startup(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Open the Legatus and show the command menu."""
        self._legatus = await self.legatus_factory()
        self._admin = Admin(self._legatus)
        commands = [BotCommand(c.name, c.description[:256]) for c in COMMANDS]
        try:
            await app.bot.set_my_commands(commands)
        except TelegramError as e:
            logger.warning("could not set the command menu: %s", e)
        try:
            await resume_pending(app.bot, self._legatus)  # files a restart cut off
        except Exception:
            logger.exception("could not finish the downloads a restart interrupted")
        await self.tell_interruptions(app.bot)

    async def tell_interruptions(self, bot: Bot) -> None:
        """Tell Caesar, once, about requests the last run never answered."""
        for nuntius, agents in await self.legatus.notice_interruptions():
            chat = chat_of(nuntius.origin)
            chats = [chat] if chat is not None else sorted(self.caesar_ids)
            for chat_id in chats:
                try:
                    await send_with_retries(
                        bot, chat_id, interruption_notice(nuntius.seq, nuntius.text, agents)
                    )
                except TelegramError as e:
                    logger.warning("could not tell chat %s about #%s: %s", chat_id, nuntius.seq, e)

    async def shutdown(self) -> None:
        if self._legatus is not None:
            await self._legatus.close()
            self._legatus = None

    # ---------------------------------------------------------- gate

    async def gate(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Drop every update not from Caesar (no reply, nothing stored; logged once per id)."""
        user = update.effective_user if isinstance(update, Update) else None
        if user is not None and user.id in self.caesar_ids:
            return
        user_id = user.id if user else 0
        if user_id not in self._refused:
            self._refused.add(user_id)
            chat = update.effective_chat if isinstance(update, Update) else None
            logger.warning(
                "ignoring Telegram user id %s (%s, chat %s): not in telegram.caesar_ids",
                user_id or "unknown",
                user.full_name if user else "no user",
                chat.type if chat else "none",
            )
        raise ApplicationHandlerStop

    # ---------------------------------------------------------- Caesar

    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A message for the Legatus or the @mentioned centuriones."""
        message = update.effective_message
        if message is None or message.text is None:
            return
        text = message.text
        origin = origin_of(message.chat_id, message.message_id)
        await self._work(
            context.bot,
            message.chat_id,
            message.message_id,
            lambda board, send: self.legatus.handle_message(
                text, board.update, origin=origin, on_reply=send
            ),
        )

    async def on_file(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A photo, document, audio, voice note or video: stored, then routed like text."""
        message = update.effective_message
        if message is None:
            return
        origin = origin_of(message.chat_id, message.message_id)
        self.in_flight += 1  # a shutdown waits for a download, then cancels it
        self.idle.clear()
        try:
            task = asyncio.create_task(receive(context.bot, message, origin, self.legatus))
            self.downloads.add(task)
            await asyncio.wait([task])
            self.downloads.discard(task)
            if task.cancelled():
                return  # resumed at the next start
            received = task.result()
            if isinstance(received, str):
                await send_with_retries(context.bot, message.chat_id, received)
                return
            if received is None:
                return  # delivered twice: stored the first time
            await self._work(
                context.bot,
                message.chat_id,
                message.message_id,
                lambda board, send: self.legatus.handle_message(
                    received.text,
                    board.update,
                    origin=origin,
                    on_reply=send,
                    attachments=[received],
                ),
            )
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()

    async def on_retry(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """/retry [n]: run again what a restart interrupted, answered like any request."""
        message = update.effective_message
        if message is None or message.text is None:
            return
        parts = message.text.split(maxsplit=1)
        seq = parse_retry(parts[1] if len(parts) > 1 else "")
        if isinstance(seq, str):
            await send_with_retries(context.bot, message.chat_id, seq)
            return
        await self._work(
            context.bot,
            message.chat_id,
            message.message_id,
            lambda board, send: self.legatus.retry(seq, board.update, send),
        )

    async def _work(
        self,
        bot: Bot,
        chat_id: int,
        reply_to: int,
        run: Callable[[StatusBoard, ReplyCallback], Awaitable[list[Reply]]],
    ) -> None:
        """Run agents under a status message; send each reply as soon as it exists."""
        if self._typing is None:
            self._typing = Typing(bot)
        self.in_flight += 1
        self.idle.clear()
        sends: list[asyncio.Task[None]] = []
        try:
            async with self._typing.shown(chat_id), StatusBoard(bot, chat_id) as board:

                async def send(reply: Reply) -> None:
                    board.done_with(reply.agent)
                    sends.append(
                        self.chains.enqueue(
                            chat_id,
                            reply.agent,
                            lambda: self.send_markdown(bot, chat_id, reply.text, reply_to),
                        )
                    )
                    if reply.files:  # after the text, in the agent's order
                        files = lambda: send_files(bot, chat_id, reply.agent, reply.files)  # noqa: E731
                        sends.append(self.chains.enqueue(chat_id, reply.agent, files))

                try:
                    await run(board, send)
                finally:
                    for result in await asyncio.gather(*sends, return_exceptions=True):
                        if isinstance(result, BaseException):
                            logger.error("a reply could not be sent", exc_info=result)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()

    async def on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """An admin command: answered at once, even while agents work."""
        message = update.effective_message
        if message is None or message.text is None:
            return
        if self._typing is None:
            self._typing = Typing(context.bot)
        slow = message.text.lstrip().lower().startswith("/compact")  # a model turn
        async with self._typing.shown(message.chat_id) if slow else contextlib.nullcontext():
            pages = await self.admin.run(message.text)
        for page in pages:
            for piece in plain_pages(page):
                await send_with_retries(context.bot, message.chat_id, piece)

    async def on_other(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Stickers, locations, contacts…: say what the bot can take."""
        message = update.effective_message
        if message is not None:
            await send_with_retries(context.bot, message.chat_id, UNSUPPORTED)

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Log with the traceback, then tell Caesar briefly."""
        logger.error("error while handling an update", exc_info=context.error)
        user = update.effective_user if isinstance(update, Update) else None
        chat = update.effective_chat if isinstance(update, Update) else None
        if chat is not None and user is not None and user.id in self.caesar_ids:
            name = type(context.error).__name__
            with contextlib.suppress(TelegramError):
                await context.bot.send_message(
                    chat.id, f"⚠️ Something went wrong ({name}); the details are in Legio's log."
                )

    async def send_markdown(
        self, bot: Bot, chat_id: int, markdown: str, reply_to: int | None = None
    ) -> None:
        """Send an answer: rendered Markdown, split; plain text if Telegram refuses a part."""
        for index, (text, entities) in enumerate(render(markdown)):
            reply = (
                ReplyParameters(reply_to, allow_sending_without_reply=True)
                if reply_to and index == 0
                else None
            )
            try:
                await send_with_retries(
                    bot, chat_id, text, entities=entities or None, reply_parameters=reply
                )
            except BadRequest as e:
                logger.warning(
                    "Telegram refused a formatted message (%s); sending it as plain text", e
                )
                await send_with_retries(bot, chat_id, text, reply_parameters=reply)


def build_application(
    config: Config, token: str, bot: LegioBot
) -> Application[Any, Any, Any, Any, Any, Any]:
    """The python-telegram-bot Application with every handler registered."""
    builder = ApplicationBuilder().token(token).rate_limiter(AIORateLimiter(max_retries=5))
    if config.telegram.base_url:
        base = config.telegram.base_url.rstrip("/")
        builder = builder.base_url(base).base_file_url(base.replace("/bot", "/file/bot", 1))
    app = builder.build()
    app.add_handler(TypeHandler(Update, bot.gate), group=-1)
    slow = ["compact", "context"]  # they wait for an agent: the others must not wait for them
    names = [c.name for c in COMMANDS if c.name not in ("retry", *slow)] + ["start"]
    message = filters.UpdateType.MESSAGE
    app.add_handler(CommandHandler("retry", bot.on_retry, filters=message, block=False))
    app.add_handler(CommandHandler(slow, bot.on_command, filters=message, block=False))
    app.add_handler(CommandHandler(names, bot.on_command, filters=message))
    app.add_handler(MessageHandler(message & filters.COMMAND, bot.on_command))
    app.add_handler(
        MessageHandler(message & filters.TEXT & ~filters.COMMAND, bot.on_text, block=False)
    )
    files = (
        filters.PHOTO
        | filters.Document.ALL
        | filters.AUDIO
        | filters.VOICE
        | filters.VIDEO
        | filters.VIDEO_NOTE
    )
    app.add_handler(MessageHandler(message & files, bot.on_file, block=False))
    app.add_handler(MessageHandler(message & ~filters.TEXT, bot.on_other))
    app.add_error_handler(bot.on_error)
    return app


async def serve(
    config: Config,
    token: str,
    legatus_factory: LegatusFactory,
    stop: asyncio.Event,
    *,
    poll_timeout: int = 30,
    grace_s: float = 20.0,
) -> None:
    """Run the bot until ``stop`` is set, then shut down in order.

    Stop polling (the last fetched updates are confirmed), let running requests finish
    for ``grace_s`` seconds, interrupt what still runs, stop the application, then close
    the Legatus (sessions, then the praetorium).
    """
    bot = LegioBot(config, legatus_factory)
    app = build_application(config, token, bot)
    async with app:
        await bot.startup(app)
        try:
            await app.start()
            assert app.updater is not None
            await app.updater.start_polling(
                timeout=poll_timeout, drop_pending_updates=False, allowed_updates=Update.ALL_TYPES
            )
            logger.info("Legio is listening (Telegram long polling)")
            await stop.wait()
        finally:
            logger.info("Legio is stopping")
            if app.updater is not None and app.updater.running:
                await app.updater.stop()
            try:
                await asyncio.wait_for(bot.idle.wait(), grace_s)
            except TimeoutError:
                logger.info(
                    "interrupting %d running request(s) after %.0fs", bot.in_flight, grace_s
                )
                if bot._legatus is not None:
                    await bot.admin.cmd_stop("")
                for download in list(bot.downloads):  # its pending row is resumed at start
                    download.cancel()
            if app.running:
                await app.stop()
            await bot.shutdown()
