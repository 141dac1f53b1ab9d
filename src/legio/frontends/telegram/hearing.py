"""Caesar's voice notes in Telegram: heard before they are routed.

``hear`` transcribes the voice notes and audio files of a request (``LegioApp.voice``) and
shows Caesar ``🎤 <transcript>`` at once, before any answer, so he knows what was
understood; the transcript becomes the request's text (after the caption, whose
``@names`` still route it), and the audio stays attached. A long note shows its
progress in that message first. A note that cannot be heard is still delivered as a
file, with one line saying why. These messages only show progress: they do not ring.
"""

from __future__ import annotations

import contextlib
import logging

from telegram import Bot, Message
from telegram.error import TelegramError

from legio.doors.inboxdoor import InboxDoor
from legio.errors import VoiceError
from legio.frontends.telegram.sending import send_with_retries
from legio.request import PendingFile

logger = logging.getLogger(__name__)

LONG_NOTE_BYTES = 160_000  # about 40 s of Telegram's Opus: worth a progress line
NOTHING_HEARD = "🎤 (no words heard; the note is delivered as a file)"


async def hear(
    bot: Bot, inbox: InboxDoor, chat_id: int, files: list[PendingFile], text: str
) -> str:
    """The request's text with the transcripts of its spoken files after it."""
    words: list[str] = []
    for file in files:
        if not inbox.hears(file):
            continue
        shown: Message | None = None
        if file.size >= LONG_NOTE_BYTES:
            with contextlib.suppress(TelegramError):
                shown = await send_with_retries(
                    bot, chat_id, "🎤 Transcribing your voice note...", disable_notification=True
                )

        async def progress(fraction: float, shown: Message | None = shown) -> None:
            if shown is not None:
                with contextlib.suppress(TelegramError):
                    await shown.edit_text(f"🎤 Transcribing your voice note... {fraction:.0%}")

        try:
            transcript = await inbox.transcribe(file, progress)
        except VoiceError as e:
            logger.warning("voice note %s not transcribed: %s", file.name, e)
            line = f"🎤 {e}; it is delivered as a file."
        else:
            line = f"🎤 {transcript.text}" if transcript.text else NOTHING_HEARD
            if transcript.text:
                words.append(transcript.text)
        await _show(bot, chat_id, shown, line)
    return "\n".join(part for part in (text, *words) if part)


async def _show(bot: Bot, chat_id: int, shown: Message | None, line: str) -> None:
    try:
        if shown is not None:
            await shown.edit_text(line[:4096])
        else:
            await send_with_retries(bot, chat_id, line[:4096], disable_notification=True)
    except TelegramError as e:
        logger.warning("could not show a transcript: %s", e)
