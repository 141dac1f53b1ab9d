"""Voice notes in Telegram: the real python-telegram-bot on the fake Bot API, the real
faster-whisper code path on a tiny random model the test builds, real OGG/Opus audio the
test encodes (no network, no download: ``tests/fixtures/whisper_tiny.py``). A random
model's words are noise, so the tests assert the path, what Caesar sees and what is
stored, not the words."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli
from tests.fixtures.whisper_tiny import build_tiny_model, encode_ogg_opus
from tests.legion import processes_of


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("whisper") / "tiny")


def voice(bot: Running, audio: bytes, caption: str | None = None, size: int | None = None) -> int:
    start = len(bot.api.calls)
    file = bot.api.add_file(audio, file_size=size)
    payload = {
        "file_id": file.file_id,
        "file_unique_id": file.file_unique_id,
        "duration": 2,
        "mime_type": "audio/ogg",
        "file_size": file.file_size,
    }
    bot.api.add_media("voice", payload, caption=caption)
    return start


async def test_a_voice_note_is_heard_shown_and_routed_by_its_caption(
    castra_dir: Path,
    fake_cli: FakeCli,
    tiny_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    audio = encode_ogg_opus(tmp_path / "note.ogg", 2.0).read_bytes()
    extra = f'[voice]\nmodel = "{tiny_model}"\n'
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        start = voice(bot, audio, caption="@vorenus")
        heard = await bot.answer(start, lambda t: t.startswith("🎤"))
        assert heard.params.get("disable_notification") == "true"  # it does not ring
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
        assert answer.at > heard.at  # Caesar sees what was understood first
        request = (await bot.app.engine.praetorium.get_history(2))[1]
        assert request.sender == "caesar" and request.audience == ("vorenus",)
        assert request.text.startswith("@vorenus")
        shown = heard.params["text"].removeprefix("🎤 ")
        if not shown.startswith("(no words heard"):
            assert request.text == f"@vorenus\n{shown}"  # the transcript is the request's text
        files = await bot.app.files_of([request.seq])
        assert [f.kind for f in files[request.seq]] == ["voice"]  # the audio stays attached
        assert "<attachment" in processes_of(fake_cli, "vorenus")[-1].raw_prompts[-1]


async def test_a_note_that_cannot_be_heard_is_delivered_as_a_file_with_the_reason(
    castra_dir: Path,
    fake_cli: FakeCli,
    tiny_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    audio = encode_ogg_opus(tmp_path / "note.ogg", 2.0).read_bytes()
    extra = f'[voice]\nmodel = "{tiny_model}"\nmax_minutes = 0.01\n'
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        start = voice(bot, b"\x00garbage, not audio" * 50, caption="@pullo")
        line = await bot.answer(start, lambda t: t.startswith("🎤"))
        assert "could not be decoded" in line.params["text"]
        assert line.params["text"].endswith("it is delivered as a file.")
        await bot.answer(start, lambda t: t.startswith("⚔️ pullo"))

        start = voice(bot, audio)  # 2 s, over a 0.6 s limit
        line = await bot.answer(start, lambda t: t.startswith("🎤"))
        assert "Legio transcribes up to" in line.params["text"], line.params["text"]
        answer = await bot.answer(start, lambda t: not t.startswith("🎤"))
        assert answer.params["chat_id"] == str(CAESAR)
        request = (await bot.app.engine.praetorium.get_history(2))[1]
        assert request.text == ""  # no words, no caption: the file itself is the request
