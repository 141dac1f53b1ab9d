"""Telegram's side of incoming files: what a message carries, and fetching it.

Only Caesar's messages get here (the bot's gate runs before any handler, so a
stranger's file is never downloaded). ``describe`` picks the file of a message: the
largest photo size, a document, audio, a voice note, a video (note). ``receive`` hands
it to ``LegioApp.receive_file`` with ``fetch`` (getFile, then the download); the app
refuses what is over Telegram's 20 MB limit before anything is fetched, stores the file,
and survives a restart mid-way (``resume_pending`` at the next start). Sending agents'
files back is ``legio.frontends.sending.send_files``.
"""

from __future__ import annotations

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


async def receive(
    bot: Bot, message: Message, origin: str, app: LegioApp
) -> PendingFile | str | None:
    """Take the file of Caesar's ``message``: complete in the castra (a ``PendingFile``
    for ``handle_message``), a one-line refusal, or None if it is already stored."""
    found = describe(message)
    if found is None:
        return UNSUPPORTED
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
    try:
        return await app.receive_file(pending, fetcher(bot))
    except AttachmentError as e:
        return f"⚠️ {e}"


async def resume_pending(bot: Bot, app: LegioApp) -> int:
    """Finish the downloads a restart cut off (their requests are then interrupted ones)."""
    return await app.resume_downloads(fetcher(bot))
