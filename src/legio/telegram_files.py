"""Telegram's side of attachments: take files from Caesar's messages, send agents' files.

Incoming (only for Caesar: the bot's gate runs before any of this, so a stranger's
file is never downloaded):

1. ``describe`` picks the file of a message: the largest photo size, a document, audio,
   a voice note, a video (note). Telegram lets a bot download at most 20 MB, so a
   larger ``file_size`` is refused before anything is stored or fetched.
2. ``receive`` records the file as pending (``attachments_pending``, keyed by the
   message's origin) *before* downloading it, downloads it into a temp file in
   ``castra/attachments/``, checks an image with Pillow, and stores it content-addressed.
   The caller then hands it to ``Legatus.handle_message``, which stores the nuntius; a
   trigger moves the pending row into ``attachments`` in that same INSERT.
3. A restart mid-way (a crash, or a shutdown that cancels the download) leaves the
   pending row: ``resume_pending`` at the next start downloads it again (its file_id
   stays valid), stores the nuntius, and Caesar is told about the unanswered request
   like any other interrupted one (``/retry``). A message delivered twice is found by
   its origin and neither downloaded nor stored again.

Outgoing: ``send_files`` sends an agent's files after its answer text, images as photos
(falling back to a document if Telegram refuses the photo), the rest as documents,
captioned like answers (``⚔️ name`` for centuriones).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from telegram import Bot, Message
from telegram.error import BadRequest, NetworkError, TelegramError, TimedOut
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from legio.attachments import (
    DOWNLOAD_LIMIT,
    IMAGE_KINDS,
    AttachmentError,
    FileStore,
    SentFile,
    check_image,
    guess_mime,
    kind_of,
    safe_name,
    too_big,
)
from legio.legatus import CAESAR, LEGATUS, Legatus, parse_mentions
from legio.praetorium import BROADCAST, DuplicateOrigin
from legio.store.attachments import AttachmentStore, PendingFile

logger = logging.getLogger(__name__)

UNSUPPORTED = (
    "I can take text, photos, documents, audio, voice notes and videos; "
    "not stickers, locations, contacts or polls."
)
SEND_ATTEMPTS = 4
CAPTION_LIMIT = 1024


@dataclass(frozen=True)
class TelegramFile:
    """The file a message carries, as Telegram describes it."""

    kind: str
    file_id: str
    file_unique_id: str
    name: str
    mime_type: str
    size: int


def describe(message: Message) -> TelegramFile | None:
    """The file of ``message`` (the largest size of a photo), or None."""
    if message.photo:
        photo = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        name = f"photo-{photo.file_unique_id}.jpg"
        return TelegramFile(
            "photo", photo.file_id, photo.file_unique_id, name, "image/jpeg", photo.file_size or 0
        )
    doc = message.document
    if doc is not None:
        name = safe_name(doc.file_name, f"document-{doc.file_unique_id}")
        mime = doc.mime_type or guess_mime(name)
        kind = kind_of(mime)
        return TelegramFile(kind, doc.file_id, doc.file_unique_id, name, mime, doc.file_size or 0)
    if message.audio is not None:
        audio = message.audio
        mime = audio.mime_type or "audio/mpeg"
        name = safe_name(audio.file_name, f"audio-{audio.file_unique_id}.mp3")
        return TelegramFile(
            "audio", audio.file_id, audio.file_unique_id, name, mime, audio.file_size or 0
        )
    if message.voice is not None:
        voice = message.voice
        name = f"voice-{voice.file_unique_id}.ogg"
        mime = voice.mime_type or "audio/ogg"
        return TelegramFile(
            "voice", voice.file_id, voice.file_unique_id, name, mime, voice.file_size or 0
        )
    video = message.video or message.video_note
    if video is not None:
        default = f"video-{video.file_unique_id}.mp4"
        name = safe_name(getattr(video, "file_name", None), default)
        mime = getattr(video, "mime_type", None) or "video/mp4"
        return TelegramFile(
            "video", video.file_id, video.file_unique_id, name, mime, video.file_size or 0
        )
    return None


def _stores(legatus: Legatus) -> tuple[AttachmentStore, FileStore]:
    return legatus.sessions.attachments, legatus.sessions.files


async def receive(
    bot: Bot, message: Message, origin: str, legatus: Legatus
) -> PendingFile | str | None:
    """Take the file of Caesar's ``message``: complete in the castra (a ``PendingFile``
    for ``handle_message``), a one-line refusal, or None if it is already stored."""
    found = describe(message)
    if found is None:
        return UNSUPPORTED
    if found.size > DOWNLOAD_LIMIT:
        refusal = too_big(found.name, found.size, DOWNLOAD_LIMIT)
        return f"⚠️ {refusal}: send a link or a smaller file."
    if await legatus.praetorium.get_by_origin(origin) is not None:
        logger.info("message %s was already received; not downloading it again", origin)
        return None
    pending = PendingFile(
        origin=origin,
        text=message.caption or "",
        kind=found.kind,
        mime_type=found.mime_type,
        name=found.name,
        size=found.size,
        file_id=found.file_id,
        file_unique_id=found.file_unique_id,
    )
    store, _ = _stores(legatus)
    await store.stage(pending)  # before the download: a restart finishes it
    try:
        return await download(bot, pending, legatus)
    except AttachmentError as e:
        await store.drop_pending(origin)
        return f"⚠️ {e}"


async def download(bot: Bot, pending: PendingFile, legatus: Legatus) -> PendingFile:
    """Download a pending file into the castra and mark it complete."""
    store, files = _stores(legatus)
    if pending.file_id is None:
        raise AttachmentError(f"{pending.name} cannot be fetched again: no Telegram file id")
    temp = await asyncio.to_thread(files.temp_path)
    try:
        try:
            remote = await bot.get_file(pending.file_id)
            await remote.download_to_drive(temp)
        except TelegramError as e:
            raise AttachmentError(
                f"Telegram would not hand over {pending.name} ({e}); send it again"
            ) from e
        if pending.kind in IMAGE_KINDS:
            await asyncio.to_thread(check_image, temp, pending.name)
        stored = await asyncio.to_thread(files.adopt, temp, pending.name, pending.mime_type)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    await store.downloaded(pending.origin, stored.sha256, stored.size)
    return dataclasses.replace(pending, sha256=stored.sha256, size=stored.size)


async def resume_pending(bot: Bot, legatus: Legatus) -> int:
    """Finish incoming files a restart interrupted: download, store their nuntius.

    Their requests are then unanswered, so Caesar is told about them (``/retry``) like
    any request a restart interrupted. Returns how many were stored.
    """
    store, files = _stores(legatus)
    await asyncio.to_thread(files.clean_temp)
    stored = 0
    for pending in await store.pending():
        if await legatus.praetorium.get_by_origin(pending.origin) is not None:
            await store.drop_pending(pending.origin)
            continue
        try:
            if pending.sha256 is None or not files.find(
                pending.sha256, pending.name, pending.mime_type
            ):
                await download(bot, pending, legatus)
        except (AttachmentError, NetworkError) as e:
            logger.warning("could not finish the download of %s: %s", pending.name, e)
            continue
        mentions = parse_mentions(pending.text, legatus.castra.roster())
        audience = ([BROADCAST] if mentions.broadcast else mentions.names) or [LEGATUS]
        with contextlib.suppress(DuplicateOrigin):
            await legatus.praetorium.post(CAESAR, pending.text, audience, origin=pending.origin)
            stored += 1
    if stored:
        logger.info("finished %d download(s) a restart interrupted", stored)
    return stored


# ------------------------------------------------------------------ outgoing


def _transient(error: BaseException) -> bool:
    return isinstance(error, (NetworkError, TimedOut)) and not isinstance(error, BadRequest)


def caption_for(agent: str, file: SentFile) -> str:
    """An agent's file is attributed like its answers."""
    head = "" if agent == LEGATUS else f"⚔️ {agent}"
    text = "\n".join(part for part in (head, file.caption) if part)
    return text[:CAPTION_LIMIT]


async def send_files(bot: Bot, chat_id: int, agent: str, files: tuple[SentFile, ...]) -> None:
    """Send an agent's files: images as photos, the rest as documents."""
    for file in files:
        caption = caption_for(agent, file) or None
        if file.is_photo:
            try:
                await _send(bot, chat_id, file.path, file.name, caption, photo=True)
                continue
            except BadRequest as e:  # e.g. PHOTO_INVALID_DIMENSIONS: a document always goes
                logger.info("Telegram refused %s as a photo (%s); sending a document", file.name, e)
        await _send(bot, chat_id, file.path, file.name, caption, photo=False)


async def _send(
    bot: Bot, chat_id: int, path: Path, name: str, caption: str | None, *, photo: bool
) -> None:
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(_transient),
        stop=stop_after_attempt(SEND_ATTEMPTS),
        wait=wait_exponential(multiplier=0.5, max=8),
        reraise=True,
    ):
        with attempt:
            data = await asyncio.to_thread(path.read_bytes)
            if photo:
                await bot.send_photo(chat_id, data, caption=caption, filename=name)
            else:
                await bot.send_document(chat_id, data, caption=caption, filename=name)
