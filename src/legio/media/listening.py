"""Caesar's voice notes and audio, heard: the stored file transcribed (``legio.media.voice``).

``Listener.hears(file)`` says whether a file is one to transcribe (a voice note or audio,
with ``[voice] enabled``); ``transcribe`` runs the transcriber on the file as stored in
the castra (off the event loop, one at a time) and raises ``VoiceError`` with a line for
Caesar when it cannot. The speech model lives in ``castra/state/voice/`` (out of every
agent's reach), fetched there on first use.
"""

from __future__ import annotations

from pathlib import Path

from legio.config import Config
from legio.media.voice import Progress, Transcriber, Transcript, model_status
from legio.request import PendingFile
from legio.store.files import FileStore

SPOKEN = ("voice", "audio")


def models_dir(config: Config) -> Path:
    return config.castra / "state" / "voice"


def voice_line(config: Config) -> tuple[str, str]:
    """``legio check``'s line: (mark, text)."""
    if not config.voice.enabled:
        return "ok", "voice notes: not transcribed ([voice] enabled = false): sent as files"
    status = model_status(config.voice.model, models_dir(config))
    mark = "warn" if status.startswith(("missing", "unknown")) else "ok"
    return mark, f"voice notes: transcribed here with faster-whisper, model {status}"


class Listener:
    """Transcribes Caesar's voice notes (see the module docstring)."""

    def __init__(self, config: Config, files: FileStore) -> None:
        self.files = files
        voice = config.voice
        self.transcriber = (
            Transcriber(
                voice.model,
                models_dir(config),
                max_seconds=voice.max_minutes * 60,
                language=voice.language,
            )
            if voice.enabled
            else None
        )

    def hears(self, file: PendingFile) -> bool:
        return self.transcriber is not None and file.kind in SPOKEN and file.sha256 is not None

    async def transcribe(
        self, file: PendingFile, on_progress: Progress | None = None
    ) -> Transcript:
        assert self.transcriber is not None and file.sha256 is not None
        path = self.files.path_of(file.sha256, file.name, file.mime_type)
        return await self.transcriber.transcribe(path, on_progress)

    def close(self) -> None:
        if self.transcriber is not None:
            self.transcriber.close()
