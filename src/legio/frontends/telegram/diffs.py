"""Diffs sent to Telegram so a phone can read them: a card's Diff and ``/diff``.

``send_pictures`` draws one diff (``legio.review``: a page per file or part of a file,
highlighted) in a worker thread and sends the pictures album by album (up to ten) as they
are drawn, so the first arrives before the last is drawn and the event loop never waits
for Pillow; the files it does not draw are said in words. ``send_page`` sends the
self-contained ``.html`` page. ``send_card_diff`` does all of it for what one card's turn
changed: its commits, then the uncommitted work apart (its pictures captioned as such),
with what has moved since said first. ``/diff`` gets the same around its ``.diff``
document (``diff_pictures`` and ``diff_page``, hooks of ``send_pages``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from telegram import Bot, InputMediaPhoto
from telegram.error import BadRequest, TelegramError

from legio.doors.workdoor import WorkDoor
from legio.frontends.telegram.sending import (
    file_retrying,
    plain_pages,
    send_document,
    send_with_retries,
)
from legio.review.page import html_page
from legio.review.rendering import Picture, Rendering, albums, render

logger = logging.getLogger(__name__)

ALBUM = 10  # Telegram's sendMediaGroup
_DONE = object()


async def _drawn(rendering: Rendering) -> Any:
    """``rendering``'s albums, drawn in a worker thread one picture ahead of the sender."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=ALBUM)
    stop = False

    def draw() -> None:
        try:
            pictures: Iterator[Picture] = rendering.pictures()
            for group in albums(pictures, ALBUM):
                if stop:
                    return
                asyncio.run_coroutine_threadsafe(queue.put(group), loop).result()
        except Exception as e:  # a picture that cannot be drawn: the rest said in words
            logger.exception("a diff could not be drawn")
            asyncio.run_coroutine_threadsafe(queue.put(e), loop).result()
        finally:
            asyncio.run_coroutine_threadsafe(queue.put(_DONE), loop).result()

    worker = asyncio.ensure_future(asyncio.to_thread(draw))
    try:
        while (item := await queue.get()) is not _DONE:
            yield item
    finally:
        stop = True
        while not worker.done():  # let the thread finish its last put
            with contextlib.suppress(asyncio.QueueEmpty):
                queue.get_nowait()
            await asyncio.sleep(0.01)


async def _send_album(bot: Bot, chat_id: int, group: list[Picture]) -> None:
    if len(group) == 1:
        [one] = group
        await file_retrying(bot.send_photo, chat_id, one.png, caption=one.caption[:1024])
        return
    media = [
        InputMediaPhoto(p.png, caption=p.caption[:1024], filename=f"page{i}.png")
        for i, p in enumerate(group)
    ]
    await file_retrying(bot.send_media_group, chat_id, media)


async def send_pictures(
    bot: Bot, chat_id: int, diff: bytes, title: str, label: str = ""
) -> Rendering:
    """``diff`` drawn for a phone: a line with ``title`` and what it holds (the files not
    drawn in words), then its pictures, album by album as they are drawn."""
    rendering = await asyncio.to_thread(render, diff, label=label)
    said = "\n".join([f"{title} · {rendering.summary}", *rendering.words])
    for piece in plain_pages(said):
        await send_with_retries(bot, chat_id, piece)
    async for item in _drawn(rendering):
        if isinstance(item, Exception):
            await send_with_retries(
                bot, chat_id, "Some pictures could not be drawn; the .diff has it all."
            )
            continue
        try:
            await _send_album(bot, chat_id, item)
        except BadRequest as e:  # refused as photos: the .diff and the page still come
            logger.warning("Telegram refused a diff's pictures: %s", e)
            await send_with_retries(
                bot, chat_id, "Telegram refused these pictures; the .diff has it all."
            )
            break
    return rendering


async def send_page(bot: Bot, chat_id: int, name: str, diff: bytes, title: str) -> None:
    """The diff as a self-contained ``name``.html page (no scripts, no requests)."""
    page = await asyncio.to_thread(html_page, diff, title)
    await send_document(bot, chat_id, f"{name}.html", page)


# ---------------------------------------------------------- /diff's hooks around its .diff


async def diff_pictures(bot: Bot, chat_id: int, name: str, content: bytes) -> None:
    if name.endswith(".diff") and content:
        await send_pictures(bot, chat_id, content, f"🔍 {name.removesuffix('.diff')}")


async def diff_page(bot: Bot, chat_id: int, name: str, content: bytes) -> None:
    if name.endswith(".diff") and content:
        stem = name.removesuffix(".diff")
        await send_page(bot, chat_id, stem, content, stem)


# ---------------------------------------------------------- a card's Diff


async def send_card_diff(bot: Bot, chat_id: int, work: WorkDoor, card_id: int) -> None:
    """What card ``card_id``'s turn changed, for its Diff button."""
    found = await work.card_diff(card_id)
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
    parts = [
        (name, found.committed, f"{card.agent} #{card.project} · this turn's commits", ""),
        (
            f"{name}-uncommitted",
            found.uncommitted,
            f"{card.agent} #{card.project} · not committed (as the turn left it)",
            "uncommitted",
        ),
    ]
    for stem, diff, title, label in parts:
        if not diff:
            continue
        try:
            await send_pictures(bot, chat_id, diff, f"🔍 {title}", label)
        except TelegramError as e:
            logger.warning("card %s: its pictures could not be sent: %s", card.id, e)
        await send_document(bot, chat_id, f"{stem}.diff", diff, caption=f"🔍 {title}"[:1024])
        await send_page(bot, chat_id, stem, diff, title)
