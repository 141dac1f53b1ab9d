"""Sending to Telegram: Markdown rendered and split, retries, per-agent order.

- ``render``: Markdown converted to text + entities by telegramify-markdown, split under
  4096 UTF-16 units (entities clipped at the cut), at most 100 entities a message.
- ``send_with_retries``: sendMessage retried with backoff on network errors and 5xx
  (``AIORateLimiter`` retries 429s).
- ``SendChains``: one agent's answers go out in the order it gave them.
- ``send_files``: the files an agent sent with ``send_file``, after its answer: images as
  photos (a document if Telegram refuses the photo), the rest as documents, captioned
  like answers (``⚔️ name`` for centuriones).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from telegram import Bot, LinkPreviewOptions, Message, MessageEntity, ReplyParameters
from telegram.error import BadRequest, NetworkError, TimedOut
from telegramify_markdown import convert, split_entities
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from legio.names import LEGATUS
from legio.request import SentFile
from legio.timing import mark
from legio.visible import visible

logger = logging.getLogger(__name__)

MAX_UTF16 = 4096
MAX_ENTITIES = 100
SEND_ATTEMPTS = 6
FILE_ATTEMPTS = 4
CAPTION_LIMIT = 1024

Chunk = tuple[str, list[MessageEntity]]


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


def is_transient(error: BaseException) -> bool:
    """Worth sending again: network trouble or a 5xx (not a refusal like 400 or 403)."""
    return isinstance(error, (NetworkError, TimedOut)) and not isinstance(error, BadRequest)


NO_PREVIEW = LinkPreviewOptions(is_disabled=True)  # a previewed URL is fetched by Telegram


async def send_with_retries(bot: Bot, chat_id: int, text: str, **kwargs: Any) -> Message:
    """sendMessage without a link preview, retried with backoff on network errors (429s:
    AIORateLimiter). A link preview would make Telegram fetch the URL, no click needed: an
    agent steered by a page could leak data through one."""
    kwargs.setdefault("link_preview_options", NO_PREVIEW)
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(SEND_ATTEMPTS),
        wait=wait_exponential(multiplier=0.5, max=8),
        reraise=True,
    ):
        with attempt:
            return await bot.send_message(chat_id, text, **kwargs)
    raise AssertionError("unreachable: tenacity re-raises the last error")


def caption_for(agent: str, file: SentFile) -> str:
    """An agent's file is attributed like its answers (to the centurio that sent it, when
    the Legatus's answer carries a file sent in its dispatch)."""
    agent = file.sender or agent
    head = "" if agent == LEGATUS else f"⚔️ {agent}"
    return "\n".join(part for part in (head, file.caption) if part)[:CAPTION_LIMIT]


async def send_files(bot: Bot, chat_id: int, agent: str, files: tuple[SentFile, ...]) -> list[int]:
    """Send an agent's files: images as photos, the rest as documents; their messages' ids."""
    sent = []
    for file in files:
        caption = caption_for(agent, file) or None
        if file.is_photo:
            try:
                sent.append(await _send_file(bot, chat_id, file.path, file.name, caption, True))
                continue
            except BadRequest as e:  # e.g. PHOTO_INVALID_DIMENSIONS: a document always goes
                logger.info("Telegram refused %s as a photo (%s); sending a document", file.name, e)
        sent.append(await _send_file(bot, chat_id, file.path, file.name, caption, False))
    return sent


async def file_retrying(send: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
    """``send(*args, **kwargs)`` (a file upload) retried with backoff on network errors."""
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(FILE_ATTEMPTS),
        wait=wait_exponential(multiplier=0.5, max=8),
        reraise=True,
    ):
        with attempt:
            return await send(*args, **kwargs)
    raise AssertionError("unreachable: tenacity re-raises the last error")


async def send_document(bot: Bot, chat_id: int, name: str, content: Any, **kwargs: Any) -> None:
    """A document (bytes, or a file's path), retried on network errors."""
    await file_retrying(bot.send_document, chat_id, content, filename=name, **kwargs)


async def _send_file(
    bot: Bot, chat_id: int, path: Path, name: str, caption: str | None, photo: bool
) -> int:
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(FILE_ATTEMPTS),
        wait=wait_exponential(multiplier=0.5, max=8),
        reraise=True,
    ):
        with attempt:
            data = await asyncio.to_thread(path.read_bytes)
            if photo:
                message = await bot.send_photo(chat_id, data, caption=caption, filename=name)
            else:
                message = await bot.send_document(chat_id, data, caption=caption, filename=name)
            return message.message_id
    raise AssertionError("unreachable: tenacity re-raises the last error")


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


async def send_markdown(
    bot: Bot, chat_id: int, markdown: str, reply_to: int | None = None
) -> list[int]:
    """Send an answer: rendered Markdown, split; plain text if Telegram refuses a part.
    The messages' ids (a reply to any of them points at the answer)."""
    sent: list[int] = []
    for index, (text, entities) in enumerate(render(markdown)):
        reply = (
            ReplyParameters(reply_to, allow_sending_without_reply=True)
            if reply_to and index == 0
            else None
        )
        try:
            message = await send_with_retries(
                bot, chat_id, text, entities=entities or None, reply_parameters=reply
            )
            mark("sendMessage returned")
        except BadRequest as e:
            logger.warning("Telegram refused a formatted message (%s); sending it as plain text", e)
            message = await send_with_retries(bot, chat_id, text, reply_parameters=reply)
        sent.append(message.message_id)
    return sent


SHORT_DOCUMENT = 3000  # a text document this short is shown in the chat too


DocumentHook = Callable[[Bot, int, str, bytes], Awaitable[None]]  # (bot, chat, name, content)


async def send_pages(
    bot: Bot,
    chat_id: int,
    pages: list[str],
    before: DocumentHook | None = None,
    after: DocumentHook | None = None,
) -> None:
    """An admin command's answer: its pages as plain text, then its documents (``/diff``'s
    ``.diff``), a short one also shown preformatted in the chat; ``before`` and ``after``
    run around each document (``/diff``'s pictures, its page)."""
    for page in pages:
        for piece in plain_pages(page):
            await send_with_retries(bot, chat_id, piece)
    for name, content in getattr(pages, "documents", ()):
        if before is not None and not isinstance(content, Path):
            await before(bot, chat_id, name, content)
        text = "" if isinstance(content, Path) else visible(content.decode(errors="replace"))
        if len(text) <= SHORT_DOCUMENT and text.strip():  # the file itself stays exact
            language = name.rsplit(".", 1)[-1]
            entity = MessageEntity(MessageEntity.PRE, 0, _utf16(text), language=language)
            await send_with_retries(bot, chat_id, text, entities=[entity])
        await send_document(bot, chat_id, name, content)
        if after is not None and not isinstance(content, Path):
            await after(bot, chat_id, name, content)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2
