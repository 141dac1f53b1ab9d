"""Telegram's side of incoming files: what a message carries, and fetching it.

Only Caesar's messages get here (the bot's gate runs before any handler, so a
stranger's file is never downloaded). ``describe`` picks the file of a message: the
largest photo size, a document, audio, a voice note, a video (note). ``receive`` hands
the files of a request to ``LegioApp.receive_files`` with ``fetch`` (getFile, then the
download); the app refuses what is over Telegram's 20 MB limit before anything is
fetched, stores the file, and survives a restart mid-way (``resume_pending`` at the next
start). ``Albums`` makes the messages of one Telegram album (photos or files sent
together) one request. Sending agents' files back is
``legio.frontends.sending.send_files``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from telegram import Bot, Message
from telegram.error import TelegramError

from legio.app import Fetch, LegioApp, PendingFile, guess_mime, kind_of, safe_name
from legio.errors import AttachmentError

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
            raise AttachmentError(
                f"Telegram would not hand over {pending.name} ({e}); send it again"
            ) from e

    return fetch


class Albums:
    """The messages of one Telegram album (one ``media_group_id``), as one request.

    Telegram sends an album as separate messages, normally in one batch of updates. The
    first of them to arrive waits until no other has come for ``wait_s`` and gets them
    all; the others get nothing to do. A part later than that is a request of its own.
    """

    def __init__(self, wait_s: float = ALBUM_WAIT_S) -> None:
        self.wait_s = wait_s
        self._open: dict[tuple[int, str], tuple[list[Message], asyncio.Event]] = {}

    async def collect(self, message: Message) -> list[Message]:
        """Every message of ``message``'s album in order (just ``[message]`` outside an
        album); ``[]`` for a part another call collects."""
        if message.media_group_id is None:
            return [message]
        key = (message.chat_id, message.media_group_id)
        if key in self._open:
            parts, arrived = self._open[key]
            parts.append(message)
            arrived.set()
            return []
        parts, arrived = [message], asyncio.Event()
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
        return sorted(parts, key=lambda m: m.message_id)


async def receive(
    bot: Bot, messages: list[Message], origin: str, app: LegioApp
) -> tuple[list[PendingFile], list[str]]:
    """Take the files of Caesar's ``messages`` (one message, or an album), as parts of
    one request from ``origin``: those complete in the castra (for ``handle_message``;
    none if the request is already stored) and a one-line refusal per file refused. The
    captions together are the request's text."""
    caption = "\n".join(m.caption for m in messages if m.caption)
    files: list[PendingFile] = []
    refusals: list[str] = []
    for part, message in enumerate(messages):
        found = describe(message)
        if found is None:
            refusals.append(UNSUPPORTED)
            continue
        files.append(
            PendingFile(
                origin=origin,
                text=caption,
                kind=found.kind,
                mime_type=found.mime_type,
                name=found.name,
                size=found.size,
                file_id=found.file_id,
                file_unique_id=found.file_unique_id,
                part=part,
            )
        )
    taken, refused = await app.receive_files(files, fetcher(bot))
    return taken, refusals + [f"⚠️ {line}" for line in refused]


async def resume_pending(bot: Bot, app: LegioApp) -> int:
    """Finish the downloads a restart cut off (their requests are then interrupted ones)."""
    return await app.resume_downloads(fetcher(bot))
