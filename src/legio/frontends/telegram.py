"""The Telegram front-end (python-telegram-bot): Caesar only, answers rendered, never blocked.

- Only ``telegram.caesar_ids`` are served. Every other update is dropped before any
  handler runs: no reply, nothing stored; the refusal is logged once per user id.
- Text messages, ``/retry``, ``/compact`` and ``/context`` run as non-blocking handlers,
  so the other admin commands answer at once while agents work; requests to one agent
  are answered in the order they arrived (its turn lock), and a queued request says so.
- While agents work: the typing action and a status message (``legio.frontends.status``).
- Each agent's answer is its own message, rendered and split by
  ``legio.frontends.sending``; if Telegram refuses the formatting, it is sent again as
  plain text. ``AIORateLimiter`` retries 429s, so a flood limit loses nothing.
- ``serve`` runs the bot and stops it in order: polling, grace period, interrupt, engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from telegram import Bot, BotCommand, ReplyParameters, Update
from telegram.error import BadRequest, TelegramError
from telegram.ext import (
    AIORateLimiter,
    Application,
    ApplicationBuilder,
    ApplicationHandlerStop,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)

from legio.admin import COMMANDS, Admin, parse_retry
from legio.app import LegioApp, Reply, ReplyCallback
from legio.config import Config
from legio.frontends.approvals import TelegramAsker
from legio.frontends.sending import (
    SendChains,
    chat_of,
    origin_of,
    plain_pages,
    render,
    send_with_retries,
)
from legio.frontends.status import StatusBoard, Typing
from legio.frontends.views import interruption_notice

logger = logging.getLogger(__name__)

AppFactory = Callable[[], Awaitable[LegioApp]]


# ------------------------------------------------------------------ handlers


class LegioBot:
    """The handlers; ``startup``/``shutdown`` open and close the engine (``LegioApp``)."""

    def __init__(self, config: Config, app_factory: AppFactory) -> None:
        self.config = config
        self.app_factory = app_factory
        self.caesar_ids = frozenset(config.telegram.caesar_ids)
        self._app: LegioApp | None = None
        self._admin: Admin | None = None
        self._refused: set[int] = set()
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.chains = SendChains()
        self._typing: Typing | None = None
        self.asker: TelegramAsker | None = None

    @property
    def app(self) -> LegioApp:
        assert self._app is not None, "LegioBot.startup() was not called"
        return self._app

    @property
    def admin(self) -> Admin:
        assert self._admin is not None, "LegioBot.startup() was not called"
        return self._admin

    async def startup(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Open the engine and show the command menu."""
        self._app = await self.app_factory()
        self._admin = Admin(self._app)
        self.asker = TelegramAsker(app.bot, sorted(self.caesar_ids), self._app)
        self._app.set_asker(self.asker)  # approvals and questions as buttons
        self._app.set_notifier(self.asker.notify)  # budget warnings, plan limits
        commands = [BotCommand(c.name, c.description[:256]) for c in COMMANDS]
        try:
            await app.bot.set_my_commands(commands)
        except TelegramError as e:
            logger.warning("could not set the command menu: %s", e)
        await self.tell_interruptions(app.bot)

    async def tell_interruptions(self, bot: Bot) -> None:
        """Tell Caesar, once, about requests the last run never answered."""
        for nuntius, agents in await self.app.notice_interruptions():
            chat = chat_of(nuntius.origin)
            chats = [chat] if chat is not None else sorted(self.caesar_ids)
            for chat_id in chats:
                try:
                    await send_with_retries(
                        bot, chat_id, interruption_notice(nuntius.seq, nuntius.text, agents)
                    )
                except TelegramError as e:
                    logger.warning("could not tell chat %s about #%s: %s", chat_id, nuntius.seq, e)

    async def stop_all(self) -> None:
        """Interrupt every agent that is working (shutdown after the grace period)."""
        if self._app is not None:
            await self._app.stop_all()

    async def shutdown(self) -> None:
        if self._app is not None:
            await self._app.close()
            self._app = None

    # ---------------------------------------------------------- gate

    async def gate(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Drop every update not from Caesar (no reply, nothing stored; logged once per id)."""
        user = update.effective_user if isinstance(update, Update) else None
        if user is not None and user.id in self.caesar_ids:
            return
        user_id = user.id if user else 0
        if isinstance(update, Update) and update.callback_query is not None:
            with contextlib.suppress(TelegramError):
                await update.callback_query.answer("Not yours.")
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
        if self.asker is not None and await self.asker.take_text(message):
            return  # a deny reason, or the answer to an agent's question
        origin = origin_of(message.chat_id, message.message_id)
        await self._work(
            context.bot,
            message.chat_id,
            message.message_id,
            lambda board, send: self.app.handle_message(
                text, board.update, origin=origin, on_reply=send
            ),
        )

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
            lambda board, send: self.app.retry(seq, board.update, send),
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

    async def on_callback(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A button tap: an approval, an agent's question, or Stop."""
        if update.callback_query is not None and self.asker is not None:
            await self.asker.on_tap(update.callback_query)

    async def on_other(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Photos, stickers, voice…: say what the bot can read."""
        message = update.effective_message
        if message is not None:
            await send_with_retries(
                context.bot,
                message.chat_id,
                "I can read text messages only: please write your request.",
            )

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
    app.add_handler(MessageHandler(message & ~filters.TEXT, bot.on_other))
    app.add_handler(CallbackQueryHandler(bot.on_callback, block=False))
    app.add_error_handler(bot.on_error)
    return app


async def serve(
    config: Config,
    token: str,
    app_factory: AppFactory,
    stop: asyncio.Event,
    *,
    poll_timeout: int = 30,
    grace_s: float = 20.0,
) -> None:
    """Run the bot until ``stop`` is set, then shut down in order.

    Stop polling (the last fetched updates are confirmed), let running requests finish
    for ``grace_s`` seconds, interrupt what still runs, stop the application, then close
    the engine (sessions, then the praetorium).
    """
    bot = LegioBot(config, app_factory)
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
                await bot.stop_all()
            if app.running:
                await app.stop()
            await bot.shutdown()
