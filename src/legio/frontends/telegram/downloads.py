"""Telegram's side of incoming files: what a message carries, and fetching it.

Only Caesar's messages get here (the bot's gate runs before any handler, so a
stranger's file is never downloaded). ``describe`` picks the file of a message: the
largest photo size, a document, audio, a voice note, a video (note). ``accept`` records
it as it arrives (``LegioApp.accept_file``: what is over Telegram's 20 MB limit is
refused before anything is stored or fetched); ``fetch`` downloads a request's files
(``LegioApp.fetch_files``, with getFile), and a restart mid-way is finished at the next
start (``resume_pending``). ``Albums`` makes the messages of one Telegram album
(photos or files sent together) one request. Sending agents' files back is
``legio.frontends.telegram.sending.send_files``.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telegram import Bot, Message
from telegram.error import TelegramError

from legio.app import Fetch, guess_mime, kind_of, safe_name
from legio.doors.inboxdoor import InboxDoor
from legio.errors import AttachmentError, DownloadLater
from legio.frontends.telegram.admission import forwarded_from
from legio.frontends.telegram.sending import chat_of, is_transient, origin_of, send_with_retries
from legio.request import PendingFile

UNSUPPORTED = (
    "I can take text, photos, documents, audio, voice notes and videos; "
    "not stickers, locations, contacts or polls."
)
ALBUM_WAIT_S = 1.0  # an album's parts come together: wait this long after the last one


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


def fetcher(bot: Bot) -> Fetch:
    """Download a pending file with ``getFile``; Telegram's refusals as ``AttachmentError``."""

    async def fetch(pending: PendingFile, target: Path) -> None:
        assert pending.file_id is not None
        try:
            remote = await bot.get_file(pending.file_id)
            await remote.download_to_drive(target)
        except TelegramError as e:
            error = DownloadLater if is_transient(e) else AttachmentError
            raise error(f"Telegram would not hand over {pending.name} ({e}); send it again") from e

    return fetch


Part = tuple[Message, PendingFile | None]


class Albums:
    """The messages of one Telegram album (one ``media_group_id``), as one request.

    Telegram sends an album as separate messages, normally in one batch of updates. The
    first of them to arrive waits until no other has come for ``wait_s`` and gets them
    all; the others get nothing to do. A part later than that is a request of its own.
    """

    def __init__(self, wait_s: float = ALBUM_WAIT_S) -> None:
        self.wait_s = wait_s
        self._open: dict[tuple[int, str], tuple[list[Part], asyncio.Event]] = {}

    async def collect(self, message: Message, file: PendingFile | None) -> list[Part]:
        """Every message of ``message``'s album with its accepted file, in order (just
        this one outside an album); ``[]`` for a part another call collects."""
        if message.media_group_id is None:
            return [(message, file)]
        key = (message.chat_id, message.media_group_id)
        if key in self._open:
            parts, arrived = self._open[key]
            parts.append((message, file))
            arrived.set()
            return []
        parts, arrived = [(message, file)], asyncio.Event()
        self._open[key] = (parts, arrived)
        try:
            while True:
                arrived.clear()
                try:
                    await asyncio.wait_for(arrived.wait(), self.wait_s)
                except TimeoutError:
                    break
        finally:
            del self._open[key]
        return sorted(parts, key=lambda part: part[0].message_id)


def file_origin(message: Message) -> tuple[str, int]:
    """The origin and part of a message's file. An album's files share one origin, from
    its ``media_group_id`` (the same however Telegram splits or repeats its delivery),
    as parts numbered by message id."""
    if message.media_group_id is None:
        return origin_of(message.chat_id, message.message_id), 0
    return f"telegram:{message.chat_id}:album-{message.media_group_id}", message.message_id


async def accept(message: Message, inbox: InboxDoor) -> PendingFile | str | None:
    """Record the file of Caesar's ``message`` as it arrives, before its download (a
    restart finishes it): a ``PendingFile`` to fetch, a one-line refusal, or None if its
    request is already stored."""
    found = describe(message)
    if found is None:
        return UNSUPPORTED
    origin, part = file_origin(message)
    pending = PendingFile(
        origin=origin,
        text=message.caption or "",
        kind=found.kind,
        mime_type=found.mime_type,
        name=found.name,
        size=found.size,
        file_id=found.file_id,
        file_unique_id=found.file_unique_id,
        part=part,
        forwarded_from=forwarded_from(message),
    )
    try:
        return await inbox.accept_file(pending)
    except AttachmentError as e:
        return f"⚠️ {e}"


async def fetch(
    bot: Bot, files: list[PendingFile], inbox: InboxDoor, downloads: set[asyncio.Task[Any]]
) -> tuple[list[PendingFile], list[str]] | None:
    """Download the accepted files of one request, as a task in ``downloads`` (which a
    shutdown cancels): those complete in the castra (for ``handle_message``) and a line
    per file Telegram would not hand over; None if cancelled (resumed at the next start)."""
    task = asyncio.create_task(inbox.fetch_files(files, fetcher(bot)))
    downloads.add(task)
    try:
        await asyncio.wait([task])
    finally:
        downloads.discard(task)
    if task.cancelled():
        return None
    taken, refused = task.result()
    return taken, [f"⚠️ {line}" for line in refused]


async def resume_pending(bot: Bot, inbox: InboxDoor) -> None:
    """Finish the downloads a restart cut off (their requests are then interrupted ones);
    tell Caesar, in the chat it came from, of a file Telegram no longer hands over."""
    for origin, line in await inbox.resume_downloads(fetcher(bot)):
        chat = chat_of(origin)
        if chat is not None:
            with contextlib.suppress(TelegramError):
                await send_with_retries(bot, chat, f"⚠️ {line}")
