"""Diffs sent to Telegram so a phone can read them: a card's Diff and ``/diff``.

``send_diff`` sends one diff as pictures (``legio.review``: a page per file or part of a
file, highlighted, drawn in a worker thread and sent album by album as they are drawn, so
the first arrives before the last is drawn), the files it does not draw said in words,
then the ``.diff`` itself and a self-contained ``.html`` page. ``send_card_diff`` does so
for what one card's turn changed: its commits, then the uncommitted work apart, with what
has moved since said first.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram import Bot
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from legio.app import LegioApp
from legio.frontends.telegram.sending import FILE_ATTEMPTS, is_transient, send_with_retries

logger = logging.getLogger(__name__)


async def send_document(bot: Bot, chat_id: int, name: str, content: bytes, **kwargs: Any) -> None:
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(FILE_ATTEMPTS),
        wait=wait_exponential(multiplier=0.5, max=8),
        reraise=True,
    ):
        with attempt:
            await bot.send_document(chat_id, content, filename=name, **kwargs)


async def send_diff(bot: Bot, chat_id: int, name: str, diff: bytes, title: str) -> None:
    """``diff`` (as git wrote it) as the file ``name``.diff."""
    await send_document(bot, chat_id, f"{name}.diff", diff, caption=title[:1024])


async def send_card_diff(bot: Bot, chat_id: int, app: LegioApp, card_id: int) -> None:
    """What card ``card_id``'s turn changed, for its Diff button."""
    found = await app.card_diff(card_id)
    if found is None:
        await send_with_retries(bot, chat_id, "This card is gone.")
        return
    card = found.card
    said = [line for line in (found.note, found.problem) if line]
    if not found.committed and not found.uncommitted and not found.untracked:
        said.append(f"Nothing to show: {card.agent}'s turn on #{card.project} changed no file.")
    if found.untracked:
        shown = ", ".join(found.untracked[:20])
        more = f" and {len(found.untracked) - 20} more" if len(found.untracked) > 20 else ""
        said.append(f"New files, not committed: {shown}{more}.")
    for line in said:
        await send_with_retries(bot, chat_id, line)
    name = f"{card.agent}-{card.project}-card{card.id}"
    if found.committed:
        title = f"🔍 {card.agent} #{card.project} · this turn's commits on {card.branch}"
        await send_diff(bot, chat_id, name, found.committed, title)
    if found.uncommitted:
        title = f"🔍 {card.agent} #{card.project} · not committed (as the turn left it)"
        await send_diff(bot, chat_id, f"{name}-uncommitted", found.uncommitted, title)
