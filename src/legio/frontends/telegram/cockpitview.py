"""The cockpit in Telegram: the menu button of Caesar's private chat opens it (a Mini
App), ``/cockpit`` sends a button for it. Off while ``[web] public_url`` is empty."""

from __future__ import annotations

import logging

from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    MenuButtonWebApp,
    Message,
    WebAppInfo,
)
from telegram.error import TelegramError

from legio.config import Config
from legio.frontends.telegram.cardview import CardDesk

logger = logging.getLogger(__name__)

OFF = (
    "The cockpit is off: set [web] listen and [web] public_url (the HTTPS address your "
    "phone reaches) in legio.toml, then restart Legio. docs/cockpit.md shows how."
)


async def offer(bot: Bot, chat_ids: list[int], cards: CardDesk, config: Config) -> None:
    """With ``[web] public_url``: the menu button opens the cockpit, cards get ↗ Open."""
    url = config.web.public_url.rstrip("/")
    if url:
        cards.cockpit = url
        await set_menu(bot, chat_ids, url)


async def set_menu(bot: Bot, chat_ids: list[int], url: str) -> None:
    """The menu button of each of Caesar's private chats opens the cockpit."""
    for chat_id in chat_ids:
        try:
            await bot.set_chat_menu_button(
                chat_id=chat_id, menu_button=MenuButtonWebApp("Cockpit", WebAppInfo(url))
            )
        except TelegramError as e:
            logger.warning("could not set the cockpit's menu button for %s: %s", chat_id, e)


async def send_button(message: Message, url: str) -> None:
    """``/cockpit``: a button that opens the cockpit inside Telegram."""
    if not url:
        await message.reply_text(OFF)
        return
    button = InlineKeyboardButton("↗ Open the cockpit", web_app=WebAppInfo(url.rstrip("/")))
    await message.reply_text(
        "The cockpit: every agent live, approvals, work, history.",
        reply_markup=InlineKeyboardMarkup([[button]]),
    )
