"""Caesar's voice notes as text, transcribed on this machine (faster-whisper, CTranslate2).

No audio leaves the machine. The speech model is a faster-whisper size ("base"), a Hugging
Face id, or a local model folder; a name is fetched once into ``models_dir`` on first use
and loaded lazily, once. Transcription runs on one worker thread, one note at a time (an
``asyncio.Lock``), so the event loop never waits on it; its progress (the fraction of the
audio done) reaches ``on_progress`` on the loop, at most once every ``PROGRESS_EVERY``
seconds, and never after the transcript is returned. A note is refused with a one-line
``VoiceError`` when it is empty, cannot be decoded (PyAV), or is longer than
``max_seconds`` — read from the container's metadata before any decoding — and when the
model cannot be fetched or loaded. An empty transcript is not an error. PyAV and
faster-whisper are imported with the first voice note, not at start (~19 MiB and more).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legio.errors import VoiceError

logger = logging.getLogger(__name__)

PROGRESS_EVERY = 2.0  # seconds between two progress reports
SAMPLE_RATE = 16_000  # what faster-whisper decodes to

Progress = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Transcript:
    """A voice note's text (stripped; "" when nothing was heard), the audio's length, the
    language spoken (given or detected), and the seconds the transcription took."""

    text: str
    duration_s: float
    language: str
    seconds: float


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}".removesuffix(".0")


def _is_folder(model: str) -> bool:
    """A model written as a path ("/…", "./…", "~/…") or an existing folder; "org/name" is
    a Hugging Face id."""
    return model.startswith(("/", "./", "../", "~")) or Path(model).is_dir()


def _cached(model: str, models_dir: Path) -> str | None:
    """The folder of a named model already in ``models_dir``, without any network."""
    from faster_whisper.utils import download_model

    try:
        return str(download_model(model, local_files_only=True, cache_dir=str(models_dir)))
    except (OSError, ValueError):  # not cached (LocalEntryNotFoundError), or no such name
        return None


def model_status(model: str, models_dir: Path) -> str:
    """One line for ``legio check``: is the speech model here? Never downloads."""
    if _is_folder(model):
        folder = Path(model).expanduser()
        if (folder / "model.bin").is_file():
            return f"present: {folder}"
        return f"missing: {folder} is not a faster-whisper model folder (no model.bin)"
    from faster_whisper.utils import available_models

    if "/" not in model and model not in available_models():
        return f"unknown: {model!r} is not a faster-whisper model ({', '.join(available_models())})"
    if _cached(model, models_dir):
        return f"present: {model} in {models_dir}"
    return f"fetched on first use into {models_dir}"


def _probe(path: Path) -> float | None:
    """The note's length in seconds from its container's metadata (no decoding), or None
    when the container does not say; ``VoiceError`` for an empty or unreadable file."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise VoiceError(f"the voice note could not be read ({e.strerror or e})") from e
    if size == 0:
        raise VoiceError("the voice note is empty (0 bytes)")
    import av  # with the first voice note: ~19 MiB

    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise VoiceError("the audio could not be decoded (no audio track)")
            stream = container.streams.audio[0]
            if container.duration is not None:
                return float(container.duration) / av.time_base
            if stream.duration is not None and stream.time_base is not None:
                return float(stream.duration * stream.time_base)
            return None
    except (av.FFmpegError, OSError, ValueError) as e:
        raise VoiceError(f"the audio could not be decoded ({e})") from e


class Transcriber:
    """Voice notes to text with one faster-whisper model, one note at a time."""

    def __init__(
        self, model: str, models_dir: Path, *, max_seconds: float, language: str = ""
    ) -> None:
        self.model = model
        self.models_dir = models_dir
        self.max_seconds = max_seconds
        self.language = language or None  # None: detected per note
        self._lock = asyncio.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="legio-voice")
        self._whisper: Any = None  # faster_whisper.WhisperModel, loaded on first use

    def close(self) -> None:
        """Stop the worker thread (a transcription under way finishes on its own)."""
        self._worker.shutdown(wait=False, cancel_futures=True)

    def _refuse_long(self, seconds: float) -> None:
        if seconds > self.max_seconds:
            raise VoiceError(
                f"the voice note is {_minutes(seconds)} min long; Legio transcribes up to "
                f"{_minutes(self.max_seconds)} min ([voice] max_minutes)"
            )

    async def transcribe(self, path: Path, on_progress: Progress | None = None) -> Transcript:
        """The note's text; ``VoiceError`` with a reason for Caesar when it cannot be had."""
        duration = await asyncio.to_thread(_probe, path)  # refused at once, even while busy
        if duration is not None:
            self._refuse_long(duration)
        loop = asyncio.get_running_loop()
        reports: set[asyncio.Task[None]] = set()
        returned = False

        async def deliver(callback: Progress, fraction: float) -> None:
            try:
                await callback(fraction)
            except Exception:
                logger.exception("voice: the progress report failed")

        def start(callback: Progress, fraction: float) -> None:  # on the loop
            if not (reports or returned):  # a slow report is skipped over, never queued
                task = loop.create_task(deliver(callback, fraction))
                reports.add(task)
                task.add_done_callback(reports.discard)

        def report(fraction: float) -> None:  # on the worker thread
            if on_progress is not None:
                loop.call_soon_threadsafe(start, on_progress, min(max(fraction, 0.0), 1.0))

        stop = threading.Event()
        async with self._lock:
            try:
                return await loop.run_in_executor(self._worker, self._run, path, report, stop)
            except asyncio.CancelledError:
                stop.set()  # the worker ends at the next segment
                raise
            finally:
                returned = True
                if reports:
                    await asyncio.gather(*reports, return_exceptions=True)

    def _load(self) -> Any:
        """The model, loaded once; a name is fetched into ``models_dir`` the first time."""
        if self._whisper is not None:
            return self._whisper
        from faster_whisper import WhisperModel

        if _is_folder(self.model):
            folder = Path(self.model).expanduser()
            if not folder.is_dir():
                raise VoiceError(f"the speech model folder {folder} does not exist ([voice] model)")
            try:
                self._whisper = WhisperModel(str(folder), device="cpu", compute_type="default")
            except (RuntimeError, OSError, ValueError) as e:
                raise VoiceError(f"the speech model {folder} could not be loaded ({e})") from e
            return self._whisper
        source = _cached(self.model, self.models_dir) or self.model
        try:
            self._whisper = WhisperModel(
                source, device="cpu", compute_type="int8", download_root=str(self.models_dir)
            )
        except Exception as e:
            if "Invalid model size" in str(e):
                raise VoiceError(
                    f"{self.model!r} is not a faster-whisper model; set [voice] model to a "
                    "size such as base or small, or to a local folder"
                ) from e
            raise VoiceError(
                f"the speech model {self.model} could not be fetched ({e}); check the network "
                "or set [voice] model to a local folder"
            ) from e
        return self._whisper

    def _run(
        self, path: Path, report: Callable[[float], None], stop: threading.Event
    ) -> Transcript:
        """On the worker thread: load, decode, check the length, transcribe."""
        import av
        from faster_whisper import decode_audio

        started = time.perf_counter()
        whisper = self._load()
        try:
            audio = decode_audio(str(path), sampling_rate=SAMPLE_RATE)
        except (av.FFmpegError, OSError, ValueError, IndexError, TypeError) as e:
            raise VoiceError(f"the audio could not be decoded ({e})") from e
        duration = len(audio) / SAMPLE_RATE
        self._refuse_long(duration)  # when the container did not say
        try:
            segments, info = whisper.transcribe(
                audio,
                language=self.language,
                beam_size=1,
                without_timestamps=True,
                vad_filter=False,
            )
        except ValueError as e:  # a language code Whisper does not know
            raise VoiceError(f"the voice note could not be transcribed ({e})") from e
        parts: list[str] = []
        last = time.monotonic()
        try:
            for segment in segments:
                parts.append(segment.text)
                if stop.is_set():
                    break
                now = time.monotonic()
                if info.duration and now - last >= PROGRESS_EVERY:
                    last = now
                    report(segment.end / info.duration)
        except (RuntimeError, ValueError) as e:  # CTranslate2 failing mid-way (memory…)
            raise VoiceError(f"the voice note could not be transcribed ({e})") from e
        return Transcript(
            text="".join(parts).strip(),
            duration_s=duration,
            language=str(info.language),
            seconds=time.perf_counter() - started,
        )
