"""Operations through the real Telegram front-end (python-telegram-bot on the fake Bot
API): a turn whose CLI goes silent is said once in the chat with Stop and Keep waiting
(each button does what it says); a CLI that dies mid-turn offers /retry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import Call

STUCK = "[sessions]\nstuck_minutes = 0.01\n"  # 0.6 s of silence: stuck


def stuck_notice(call: Call) -> bool:
    return "has sent nothing for" in str(call.params.get("text", ""))


async def tap(bot: Running, data: str, message_id: int) -> str:
    start = len(bot.api.calls)
    bot.api.add_callback(data, message_id, user_id=CAESAR)
    call = await bot.api.wait_for_call("answerCallbackQuery", start=start, timeout=30)
    return str(call.params.get("text", ""))


async def test_a_silent_turn_is_said_once_and_stop_ends_it(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli, STUCK) as bot:
        start = await bot.ask("SLEEP 120")
        notice = await bot.api.wait_for_call("sendMessage", stuck_notice, start=start, timeout=30)
        text = str(notice.params["text"])
        assert text.startswith("⚠️ legatus has sent nothing for") and "#" in text
        message_id = int(notice.result["message_id"])
        labels = [label for label, _ in bot.api.buttons(CAESAR, message_id)]
        assert labels == ["⏹ Stop", "⏳ Keep waiting"]
        status = await bot.app.operations.status_report()
        [legatus] = [a for a in status["agents"] if a["name"] == "legatus"]
        assert legatus["stuck"] and legatus["working_s"] is not None and legatus["seq"]
        assert await tap(bot, "stk:stop:legatus", message_id) == "Stopping legatus."
        await bot.answer(start, lambda t: "Interrupted" in t, wait_s=60)
        assert bot.api.buttons(CAESAR, message_id) == []  # the buttons went
        said = [c for c in bot.api.calls_of("sendMessage")[0:] if stuck_notice(c)]
        assert len(said) == 1  # once


async def test_keep_waiting_says_it_again_only_after_another_period(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli, STUCK) as bot:
        start = await bot.ask("SLEEP 120")
        first = await bot.api.wait_for_call("sendMessage", stuck_notice, start=start, timeout=30)
        tapped = len(bot.api.calls)
        assert await tap(bot, "stk:wait:legatus", int(first.result["message_id"])) == (
            "Waiting on for legatus."
        )
        second = await bot.api.wait_for_call("sendMessage", stuck_notice, start=tapped, timeout=30)
        assert second.at - first.at >= 0.6  # a whole period after the tap, not at once
        await bot.ask("/stop")
        await bot.answer(start, lambda t: "Interrupted" in t, wait_s=60)


async def test_a_cli_that_dies_mid_turn_offers_retry_and_retry_answers(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        start = await bot.ask("SLEEP_FIRST 0 once\nEXIT 3")
        failed = await bot.answer(start, lambda t: "/retry" in t, wait_s=60)
        assert "legatus" in str(failed.params["text"]).lower()
        start = len(bot.api.calls)
        bot.api.add_message("/retry", user_id=CAESAR)
        # the CLI is started again; this time the fake exits again unless told otherwise,
        # so the retried request is answered by a new CLI process all the same
        await bot.api.wait_for_call("sendMessage", start=start, timeout=60)
        assert len(fake_cli.processes()) >= 2  # a new CLI for the retry


async def test_restart_wait_lets_the_running_turn_finish_and_refuses_new_requests(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/restart while a turn runs asks first; /restart wait refuses new requests (said in
    the chat), lets the running one answer, then starts again."""
    hold = tmp_path / "hold"
    hold.mkdir()
    monkeypatch.setenv("FAKE_CLAUDE_HOLD", str(hold))
    monkeypatch.setenv("FAKE_CLAUDE_HOLD_AT", "turn")
    async with running_bot(castra_dir, fake_cli) as bot:
        restarted = asyncio.Event()
        bot.app.engine.operations.on_restart = restarted.set
        start = await bot.ask("REPLY first is done")
        for _ in range(2400):  # the CLI holds the turn: it is running
            if any(hold.glob("at-turn-*")):
                break
            await asyncio.sleep(0.05)
        asked = await bot.ask("/restart")
        question = await bot.answer(asked, lambda t: "request(s) are running" in t)
        assert "/restart wait" in str(question.params["text"])
        asked = await bot.ask("/restart wait")
        await bot.answer(asked, lambda t: "Restarting once the 1 running request(s)" in t)
        asked = await bot.ask("REPLY too late")
        await bot.answer(asked, lambda t: "Legio is restarting" in t)
        assert not restarted.is_set()
        (hold / "go-turn").touch()
        await bot.answer(start, lambda t: "first is done" in t, wait_s=60)
        await asyncio.wait_for(restarted.wait(), 30)
        prompts = "".join(p for proc in fake_cli.processes() for p in proc.prompts)
        assert "too late" not in prompts
