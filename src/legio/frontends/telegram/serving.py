"""Running the Telegram bot: the python-telegram-bot ``Application`` built with every
handler of ``LegioBot`` (the gate first, the admin commands from their one table, text,
files, edits, taps, reactions), long polling for every update type (reactions included),
and a shutdown in order: polling stopped (the last updates confirmed), running requests
given their grace, what still runs interrupted, the application stopped, the engine closed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import operator
from typing import Any

from telegram import Update
from telegram.ext import (
    AIORateLimiter,
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    MessageHandler,
    MessageReactionHandler,
    TypeHandler,
    filters,
)

from legio.config import Config
from legio.frontends.admin import BY_NAME
from legio.frontends.telegram.bot import AppFactory, LegioBot
from legio.frontends.telegram.lanes import LaneBot

logger = logging.getLogger(__name__)


class FloodLimits(AIORateLimiter):
    """Telegram's flood limits as python-telegram-bot keeps them (30 calls a second in all,
    20 messages a minute in a group), except that a mark (👀, 👌) is no message: it counts
    toward the rate in all only, so marking a group's requests never holds up their answers
    (each request would otherwise take three of the group's 20 a minute)."""

    async def process_request(
        self,
        callback: Any,
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Any:
        if endpoint == "setMessageReaction":
            data = {**data, "chat_id": 0}  # limited as a private chat's call is
        return await super().process_request(
            callback, args, kwargs, endpoint, data, rate_limit_args
        )


def build_application(
    config: Config, token: str, bot: LegioBot
) -> Application[Any, Any, Any, Any, Any, Any]:
    """The python-telegram-bot Application with every handler registered."""
    # No Defaults(link_preview_options=...): PTB 22.8's ExtBot then turns an empty text
    # (the draft's "Thinking..." placeholder) into []. Every send passes NO_PREVIEW itself.
    base = config.telegram.base_url.rstrip("/") or "https://api.telegram.org/bot"
    file_url = base.replace("/bot", "/file/bot", 1)
    lane_bot = LaneBot(token, base, file_url, rate_limiter=FloodLimits(max_retries=5))
    app = ApplicationBuilder().bot(lane_bot).build()  # sends in the request's topic
    app.add_handler(TypeHandler(Update, bot.gate), group=-1)
    message = filters.UpdateType.MESSAGE
    # every admin command from the one table (legio.frontends.admin): run by Admin, except
    # the two this front-end answers itself; one that may wait for an agent does not block
    own = {"retry": bot.on_retry, "project": bot.talk.on_project, "publish": bot.on_publish}
    own["queue"] = bot.on_queue  # a request, after the agent's running turn
    own["plan"] = bot.on_plan  # a request its agent plans first
    for command in BY_NAME.values():
        callback = own.get(command.name, bot.on_command)
        handler = CommandHandler(command.name, callback, filters=message, block=not command.waits)
        app.add_handler(handler)
    app.add_handler(CommandHandler("cockpit", bot.on_cockpit, filters=message))
    app.add_handler(MessageHandler(message & filters.COMMAND, bot.on_command))  # unknown ones
    app.add_handler(
        MessageHandler(message & filters.TEXT & ~filters.COMMAND, bot.on_text, block=False)
    )
    media = (filters.PHOTO, filters.Document.ALL, filters.AUDIO, filters.VOICE, filters.VIDEO)
    files = functools.reduce(operator.or_, media, filters.VIDEO_NOTE)
    app.add_handler(MessageHandler(message & files, bot.on_file, block=False))
    app.add_handler(MessageHandler(message & ~filters.TEXT, bot.on_other))
    edits = filters.UpdateType.EDITED_MESSAGE & (filters.TEXT | filters.CAPTION)
    app.add_handler(MessageHandler(edits, bot.talk.on_edit, block=False))
    app.add_handler(CallbackQueryHandler(bot.on_callback, block=False))
    app.add_handler(MessageReactionHandler(bot.on_reaction, block=False))  # in allowed_updates
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
    application = build_application(config, token, bot)
    async with application:
        await bot.startup(application)
        try:
            await application.start()
            assert application.updater is not None
            await application.updater.start_polling(
                timeout=poll_timeout, drop_pending_updates=False, allowed_updates=Update.ALL_TYPES
            )
            logger.info("Legio is listening (Telegram long polling)")
            operations = bot.app.operations
            operations.listening("Telegram long polling")  # systemd: READY=1
            await stop.wait()
        finally:
            logger.info("Legio is stopping")
            if bot._app is not None:
                operations = bot.app.operations
                operations.stopping()
            if application.updater is not None and application.updater.running:
                await application.updater.stop()
            if bot._app is not None:
                await bot.app.pause_jobs()  # no new job runs; running ones are in_flight
            try:
                await asyncio.wait_for(bot.idle.wait(), grace_s)
            except TimeoutError:
                logger.info(
                    "interrupting %d running request(s) after %.0fs", bot.in_flight, grace_s
                )
                await bot.stop_all()
                for download in list(bot.downloads):  # its pending row is resumed at start
                    download.cancel()
            if application.running:
                await application.stop()
            await bot.shutdown()
