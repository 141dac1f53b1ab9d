"""Streamed answers: drafts on the fake Bot API (real PTB, fake CLI), and the console."""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

from legio.frontends.telegram.drafts import draft_chunk
from legio.frontends.telegram.sending import render
from legio.request import Callbacks
from legio.sessions.turn import collect_response
from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import utf16_len
from tests.test_console import run_console

WORDS = "alpha beta gamma delta epsilon zeta eta theta"
VORENUS = "⚔️ vorenus — Code reviewer and software engineer\n━━━━━━━━━━━━\n"
PULLO = "⚔️ pullo — Researcher who finds, checks and summarizes facts\n━━━━━━━━━━━━\n"


@pytest.fixture
async def bot(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Running]:
    async with running_bot(castra_dir, fake_cli) as running:
        yield running


def texts_of(bot: Running, draft_ids: set[int] | None = None) -> list[str]:
    return [
        text
        for draft_id, text in bot.api.drafts(CAESAR)
        if text and (draft_ids is None or draft_id in draft_ids)
    ]


async def test_an_answer_streams_into_a_growing_draft_then_one_message(bot: Running) -> None:
    start = await bot.ask(f"STREAM 4 0.6 {WORDS}")
    final = await bot.answer(start)
    assert final.params["text"] == WORDS
    drafts = bot.api.drafts(CAESAR)
    texts = [t for _, t in drafts if t]
    assert len(texts) >= 2
    assert texts[0] != WORDS  # the first draft came before the whole answer existed
    for shorter, longer in itertools.pairwise(texts):
        assert WORDS.startswith(shorter) and longer.startswith(shorter)
    assert len({draft_id for draft_id, _ in drafts}) == 1  # one draft, animated
    assert all(draft_id != 0 for draft_id, _ in drafts)
    last_draft = max(c.at for c in bot.api.calls_of("sendMessageDraft"))
    assert last_draft < final.at
    assert bot.answers() == [WORDS]


async def test_two_centuriones_stream_into_two_drafts(bot: Running) -> None:
    start = await bot.ask(f"@vorenus @pullo STREAM 3 3 {WORDS}")
    await bot.answer(start, lambda t: t.startswith(VORENUS))
    await bot.answer(start, lambda t: t.startswith(PULLO))
    by_id: dict[int, list[str]] = {}
    for draft_id, text in bot.api.drafts(CAESAR):
        by_id.setdefault(draft_id, []).append(text)
    vorenus = {i for i, texts in by_id.items() if any(t.startswith(VORENUS) for t in texts)}
    pullo = {i for i, texts in by_id.items() if any(t.startswith(PULLO) for t in texts)}
    assert len(vorenus) == 1 and len(pullo) == 1 and vorenus != pullo
    assert any(WORDS.startswith(t.removeprefix(VORENUS)) for t in texts_of(bot, vorenus))
    assert sorted(bot.answers()) == sorted([VORENUS + WORDS, PULLO + WORDS])


async def test_a_long_streamed_answer_has_its_stop_button_while_it_streams(bot: Running) -> None:
    start = await bot.ask(f"STREAM 4 0.8 {WORDS}")  # text only: no tool, no thinking
    status = await bot.api.wait_for_call(
        "sendMessage", lambda c: c.params["text"] == "⏳ legatus is working...", start=start
    )
    await bot.answer(start, lambda t: t == WORDS)
    later = [c.params["text"] for c in bot.api.calls_of("sendMessageDraft") if c.at > status.at]
    assert any(t != WORDS for t in later)  # it came while the text was still being written
    buttons = [b for row in status.params["reply_markup"]["inline_keyboard"] for b in row]
    assert [(b["text"], b["callback_data"]) for b in buttons] == [
        ("⏹ Stop legatus", "stop:legatus")
    ]
    await bot.api.wait_for_call(
        "deleteMessage", lambda c: int(c.params["message_id"]) == status.result["message_id"]
    )
    assert bot.answers() == [WORDS]


async def test_a_refused_draft_falls_back_to_the_status_message(
    bot: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="legio.frontends.telegram.drafts")
    bot.api.fail("sendMessageDraft", 400, "Bad Request: method not available", times=100)
    start = await bot.ask("THINK about it\nSLEEP 1.5\nREPLY done")
    await bot.answer(start, lambda t: t == "done")
    status = await bot.api.wait_for_call(
        "sendMessage", lambda c: c.params["text"] == "⏳ Thinking...", start=start
    )
    await bot.api.wait_for_call(
        "deleteMessage", lambda c: int(c.params["message_id"]) == status.result["message_id"]
    )
    again = await bot.ask(f"STREAM 3 0.1 {WORDS}")
    await bot.answer(again, lambda t: t == WORDS)
    assert bot.answers() == ["done", WORDS]
    refusals = [r for r in caplog.records if "refused a draft" in r.getMessage()]
    assert len(refusals) == 1
    assert bot.api.calls_of("sendMessageDraft") == []


async def test_stream_false_sends_no_drafts(castra_dir: Path, fake_cli: FakeCli) -> None:
    async with running_bot(castra_dir, fake_cli, telegram="stream = false") as bot:
        start = await bot.ask(f"STREAM 3 0.4 {WORDS}")
        await bot.answer(start, lambda t: t == WORDS)
        assert [c for c in bot.api.calls if c.method == "sendMessageDraft"] == []
        assert bot.answers() == [WORDS]


async def test_a_group_chat_gets_no_drafts(castra_dir: Path, fake_cli: FakeCli) -> None:
    async with running_bot(castra_dir, fake_cli, telegram="allowed_chats = [-100]") as bot:
        start = len(bot.api.calls)
        bot.api.add_message(
            f"STREAM 3 0.4 {WORDS}", user_id=CAESAR, chat_id=-100, chat_type="group"
        )
        await bot.api.wait_for_call("sendMessage", lambda c: c.params["text"] == WORDS, start=start)
        assert [c for c in bot.api.calls if c.method == "sendMessageDraft"] == []


async def test_a_long_answer_streams_its_last_4096_units(bot: Running) -> None:
    lines = ["**A long answer**", *(f"line {i:04d} of a long answer in words" for i in range(200))]
    text = "\\n".join(lines)
    start = await bot.ask(f"STREAM 3 0.6 {text}")
    await bot.answer(start, lambda t: "line 0199" in t, wait_s=20)
    refused = [c for c in bot.api.calls if c.method == "sendMessageDraft" and c.status != 200]
    assert refused == []
    drafts = texts_of(bot)
    assert len(drafts) >= 2 and all(utf16_len(t) <= 4096 for t in drafts)
    assert "line 0000" in drafts[0]  # short enough to show whole
    assert "line 0000" not in drafts[-1]  # too long: its end is shown
    assert max(int(n) for n in re.findall(r"line (\d{4})", drafts[-1])) >= 100


def test_a_draft_keeps_the_header_and_the_end_of_a_long_text() -> None:
    body = "```\n" + "x = '💡 an emoji costs two units'\n" * 400
    text, entities = draft_chunk(VORENUS, body, render)
    assert text.startswith("⚔️ vorenus")
    assert text.rstrip().endswith("x = '💡 an emoji costs two units'")
    assert utf16_len(text) <= 4096
    assert any(e.type == "pre" for e in entities)  # the cut code block is still code


def test_the_console_prints_the_answer_as_it_streams(castra_dir: Path, fake_cli: FakeCli) -> None:
    result = run_console(castra_dir, fake_cli, f"STREAM 4 0.2 {WORDS}\n@vorenus REPLY short\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count(WORDS) == 1  # streamed, then not printed again
    assert f"legatus: {WORDS}\n" in out
    assert out.count("ECHO") == 0 and out.count("short") == 1
    assert "[legatus] ⏳" not in out  # no status preview of text already on the screen


async def test_streamed_text_starts_again_with_each_message(fake_cli: FakeCli) -> None:
    seen: list[str] = []

    async def on_text(agent: str, text: str) -> None:
        seen.append(text)

    options = ClaudeAgentOptions(cli_path=str(fake_cli.path), include_partial_messages=True)
    async with ClaudeSDKClient(options) as client:
        await client.query('TOOL Glob {"pattern": "*.none"}\nSTREAM 3 0 the final words')
        text, _ = await collect_response(client, None, Callbacks(on_text=on_text), agent="vorenus")
    assert text == "the final words" == seen[-1]
    earlier = [t for t in seen if t.startswith("TOOL_")]  # the tool result's message
    finals = [t for t in seen if t.startswith("the")]  # then the answer, from its start
    assert earlier and len(finals) == 3 and len(seen) == len(earlier) + len(finals)
    assert seen.index(finals[0]) > seen.index(earlier[-1])
    assert all(b.startswith(a) for a, b in itertools.pairwise(finals))
