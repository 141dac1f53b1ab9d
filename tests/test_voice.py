"""Voice notes to text: the real faster-whisper path on a tiny random model, offline.

A random model's words are noise, so these tests assert the path (decode, transcribe,
duration, one note at a time, the loop never blocked), the refusals and their reasons,
never the words. Nothing is downloaded: the Hugging Face hub is switched off.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before huggingface_hub is imported: never any network

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from legio.config import load_config
from legio.errors import ConfigError, VoiceError
from legio.media import voice
from legio.media.voice import Transcriber, Transcript, model_status
from tests.fixtures.whisper_tiny import build_tiny_model, encode_ogg_opus


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("whisper") / "tiny")


@pytest.fixture(scope="module")
def note(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return encode_ogg_opus(tmp_path_factory.mktemp("notes") / "note.ogg", 2.0)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def transcriber(model: Path | str, tmp_path: Path, max_seconds: float = 600) -> Transcriber:
    return Transcriber(str(model), tmp_path / "models", max_seconds=max_seconds)


async def test_a_two_second_note_is_transcribed_off_the_loop(
    tiny_model: Path, note: Path, tmp_path: Path
) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    beat = asyncio.create_task(ticker())
    started = time.monotonic()
    try:
        result = await transcriber(tiny_model, tmp_path).transcribe(note)
    finally:
        beat.cancel()
    elapsed = time.monotonic() - started
    assert isinstance(result, Transcript)
    assert result.duration_s == pytest.approx(2.0, abs=0.05)
    assert result.language == "en"  # an English-only (small-vocabulary) model
    assert result.text == result.text.strip()
    assert 0 < result.seconds <= elapsed
    assert ticks >= elapsed / 0.01 * 0.5, (ticks, elapsed)  # the loop kept running


async def test_two_notes_are_transcribed_one_at_a_time(
    tiny_model: Path, note: Path, tmp_path: Path
) -> None:
    t = transcriber(tiny_model, tmp_path)
    await t.transcribe(note)  # the model loaded, so both calls below do the same work
    started = time.monotonic()
    first, second = await asyncio.gather(t.transcribe(note), t.transcribe(note))
    elapsed = time.monotonic() - started
    assert elapsed >= (first.seconds + second.seconds) * 0.98  # in turn, never overlapping


async def test_an_empty_file_is_refused(tiny_model: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.ogg"
    empty.write_bytes(b"")
    with pytest.raises(VoiceError, match=r"the voice note is empty \(0 bytes\)"):
        await transcriber(tiny_model, tmp_path).transcribe(empty)


async def test_random_bytes_are_refused_as_undecodable(tiny_model: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.ogg"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(VoiceError, match=r"the audio could not be decoded \("):
        await transcriber(tiny_model, tmp_path).transcribe(junk)


async def test_a_note_too_long_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    long_note = encode_ogg_opus(tmp_path / "long.ogg", 45.0)
    absent = tmp_path / "no-such-model"  # loading it would fail with another message
    with pytest.raises(VoiceError) as caught:
        await transcriber(absent, tmp_path, max_seconds=30).transcribe(long_note)
    assert str(caught.value) == (
        "the voice note is 0.8 min long; Legio transcribes up to 0.5 min ([voice] max_minutes)"
    )


async def test_a_model_that_cannot_be_fetched_says_what_to_do(note: Path, tmp_path: Path) -> None:
    with pytest.raises(VoiceError) as caught:
        await transcriber("tiny", tmp_path).transcribe(note)
    message = str(caught.value)
    assert message.startswith("the speech model tiny could not be fetched (")
    assert message.endswith("; check the network or set [voice] model to a local folder")
    assert not list((tmp_path / "models").rglob("*.bin"))


async def test_a_missing_model_folder_is_named(note: Path, tmp_path: Path) -> None:
    with pytest.raises(VoiceError, match=r"the speech model folder .* does not exist"):
        await transcriber(tmp_path / "gone", tmp_path).transcribe(note)


class _FakeWhisper:
    """Stands in for the model to drive progress: segments that take time, no words."""

    def __init__(self, steps: int, pause: float) -> None:
        self.steps, self.pause = steps, pause
        self.runs: list[int] = []  # how many segments each transcription was given

    def transcribe(self, audio: Any, **options: Any) -> tuple[Iterator[Any], Any]:
        duration = len(audio) / 16_000
        self.runs.append(0)
        run = len(self.runs) - 1

        def segments() -> Iterator[Any]:
            for i in range(1, self.steps + 1):
                time.sleep(self.pause)
                self.runs[run] += 1
                yield SimpleNamespace(text=" ", end=duration * i / self.steps)

        return segments(), SimpleNamespace(duration=duration, language="it")


async def test_progress_reaches_the_loop_throttled_and_never_after_the_result(
    note: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(voice, "PROGRESS_EVERY", 0.05)
    t = transcriber("unused", tmp_path)
    fake = _FakeWhisper(steps=40, pause=0.005)  # 0.2 s at least, slower on a busy machine
    t._whisper = fake
    seen: list[tuple[float, int]] = []

    async def on_progress(fraction: float) -> None:
        seen.append((fraction, threading.get_ident()))

    result = await t.transcribe(note, on_progress)
    count = len(seen)
    await asyncio.sleep(0.1)
    assert len(seen) == count  # nothing arrives after the transcript
    assert 2 <= count < fake.steps  # throttled: not once per segment
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and all(0 < f <= 1 for f in fractions)
    assert {ident for _, ident in seen} == {threading.get_ident()}  # on the loop's thread
    assert (result.text, result.language) == ("", "it")  # an empty transcript is fine


def test_model_status_never_downloads(tiny_model: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    assert model_status("base", models) == f"fetched on first use into {models}"
    assert model_status(str(tiny_model), models) == f"present: {tiny_model}"
    assert model_status(str(tmp_path), models).startswith("missing: ")
    assert model_status("huge-v9", models).startswith("unknown: 'huge-v9'")
    assert not models.exists()


def test_voice_settings_defaults_and_mistakes(tmp_path: Path) -> None:
    (tmp_path / "castra").mkdir()
    config = tmp_path / "legio.toml"
    config.write_text("")
    settings = load_config(config).voice
    assert (settings.enabled, settings.model, settings.max_minutes, settings.language) == (
        True,
        "base",
        20,
        "",
    )
    config.write_text('[voice]\nmodel = "./models/tiny"\n')
    assert load_config(config).voice.model == str(tmp_path / "models" / "tiny")
    config.write_text('[voice]\nmax_minutes = 0\nlanguage = "English"\nspeed = 2\n')
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    problems = str(caught.value)
    assert "voice.max_minutes: Input should be greater than 0" in problems
    assert "voice.language: must be" in problems
    assert "voice.speed: unknown key" in problems


async def test_a_cancelled_transcription_stops_and_the_next_one_runs(
    note: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(voice, "PROGRESS_EVERY", 0.0)
    t = transcriber("unused", tmp_path)
    fake = _FakeWhisper(steps=100, pause=0.02)
    t._whisper = fake
    seen: list[float] = []
    under_way = asyncio.Event()

    async def on_progress(fraction: float) -> None:
        seen.append(fraction)
        under_way.set()

    task = asyncio.create_task(t.transcribe(note, on_progress))
    await asyncio.wait_for(under_way.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    count = len(seen)
    fake.steps = 2
    await t.transcribe(note)  # one worker thread: it runs once the cancelled one stopped
    cancelled, after = fake.runs
    assert cancelled < 100  # stopped at its next segment, not run to its end
    assert after == 2
    assert len(seen) == count  # no report of the cancelled one after it was cancelled
