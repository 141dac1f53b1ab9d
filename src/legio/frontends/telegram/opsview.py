"""The operations' events in Telegram: a failed backup said to Caesar, the morning digest
sent silently (``disable_notification``), to each of Caesar's private chats."""

from __future__ import annotations

import logging

from telegram import Bot
from telegram.error import TelegramError

from legio.frontends.digestview import backup_failed_text, digest_lines
from legio.frontends.telegram.sending import plain_pages, send_with_retries
from legio.operations.digest import DigestReady
from legio.request import BackupFailed

logger = logging.getLogger(__name__)


async def show_operation(bot: Bot, chats: list[int], event: BackupFailed | DigestReady) -> None:
    """Send one event's message to ``chats``."""
    if isinstance(event, DigestReady):
        text, silent = "\n".join(digest_lines(event.digest)), True
    else:
        text, silent = backup_failed_text(event), False
    for chat in chats:
        try:
            for page in plain_pages(text):
                await send_with_retries(bot, chat, page, disable_notification=silent)
        except TelegramError as e:
            logger.warning("could not send %s to chat %s: %s", type(event).__name__, chat, e)
