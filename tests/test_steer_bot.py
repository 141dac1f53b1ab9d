"""Steering through the real Telegram front-end (python-telegram-bot on the fake Bot API,
agents on the fake CLI): a message to a working agent is marked ➕ and joins its turn;
⏭ on the mark and /queue keep the message for after the turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli
from tests.legion import processes_of
from tests.test_steer import TOOL
from tests.test_stop import hold_at
from tests.test_watch_bot import tap


def mark(text: str) -> bool:
    return text == "➕ added to vorenus's turn"


async def test_a_message_to_a_working_agent_joins_its_turn_with_a_mark(
    castra_dir: Path, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hold = hold_at(monkeypatch, tmp_path, "pause")
    async with running_bot(castra_dir, fake_cli) as bot:
        bot.app.engine.sessions.steerer.hold_s = 0
        start = await bot.ask(f"@vorenus PAUSE\n{TOOL}")
        await hold.reached("pause")
        second = await bot.ask("@vorenus REPLY the Via Appia, then")
        added = await bot.answer(second, mark)
        assert str(added.params["disable_notification"]).lower() == "true"  # silent
        replied = added.params["reply_parameters"]
        replied = json.loads(replied) if isinstance(replied, str) else replied
        assert replied["message_id"] > 0  # a reply to his message
        for _ in range(6000):  # a bound for a broken test, not a timing: 60 s
            errand = bot.app.engine.sessions.errands.running("vorenus")
            if errand is not None and errand.joined and errand.joined[0].uid:
                break
            await asyncio.sleep(0.01)
        hold.go("pause")
        await bot.answer(start, lambda t: t.endswith("the Via Appia, then"))
        labels = [label for label, _ in bot.api.buttons(CAESAR, int(added.result["message_id"]))]
        assert labels == ["⏭ after this turn"]
        [(_, data)] = bot.api.buttons(CAESAR, int(added.result["message_id"]))
        said = await tap(bot, data, int(added.result["message_id"]))
        assert said == "vorenus has it already: it is part of this turn."
        answers = [t for t in bot.answers() if "the Via Appia" in t]
        assert len(answers) == 1  # answered once, by the turn's answer
        [process] = processes_of(fake_cli, "vorenus")
        assert process.folded == ["@vorenus REPLY the Via Appia, then"]


async def test_after_this_turn_and_queue_wait_behind_the_turn(
    castra_dir: Path, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hold = hold_at(monkeypatch, tmp_path, "pause")
    async with running_bot(castra_dir, fake_cli) as bot:
        bot.app.engine.sessions.steerer.hold_s = 3600  # ⏭ comes first
        start = await bot.ask(f"@vorenus PAUSE\n{TOOL}")
        await hold.reached("pause")
        second = await bot.ask("@vorenus REPLY later one")
        added = await bot.answer(second, mark)
        message_id = int(added.result["message_id"])
        [(_, data)] = bot.api.buttons(CAESAR, message_id)
        assert await tap(bot, data, message_id) == "⏭ vorenus takes it after this turn"
        third = await bot.ask("/queue @vorenus REPLY later two")
        hold.go("pause")
        await bot.answer(start, lambda t: "TOOL_RESULT" in t)
        await bot.answer(second, lambda t: t.endswith("later one"))
        await bot.answer(third, lambda t: t.endswith("later two"))
        assert not any(mark(t) for t in bot.answers()[-3:])  # /queue: no mark
        [process] = processes_of(fake_cli, "vorenus")
        assert process.folded == [] and len(process.prompts) == 3


async def test_a_private_message_never_joins_a_turn_that_answers_in_a_group(
    castra_dir: Path, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """vorenus works on a request from an allowed group; Caesar's word to vorenus in his
    private chat waits for its own turn and is answered there: a steer's answer is the
    turn's, said where the turn was asked, so it would reach the group's members."""
    group = -100500
    hold = hold_at(monkeypatch, tmp_path, "pause")
    async with running_bot(castra_dir, fake_cli, telegram=f"allowed_chats = [{group}]\n") as bot:
        bot.app.engine.sessions.steerer.hold_s = 0
        start = len(bot.api.calls)
        bot.api.add_message(f"@vorenus PAUSE\n{TOOL}", chat_id=group, chat_type="supergroup")
        await hold.reached("pause")
        private = await bot.ask("@vorenus REPLY between us")
        errands = bot.app.engine.sessions.errands
        for _ in range(6000):  # a bound for a broken test, not a timing: 60 s
            running = errands.running("vorenus")
            if errands.waiting("vorenus") or (running is not None and running.joined):
                break
            await asyncio.sleep(0.01)
        hold.go("pause")
        answer = await bot.answer(private, lambda t: t.endswith("between us"))
        assert int(answer.params["chat_id"]) == CAESAR
        await bot.api.wait_for_call(
            "sendMessage", lambda c: "TOOL_RESULT" in str(c.params.get("text", "")), start=start
        )
        said_in_group = [
            str(c.params.get("text", ""))
            for c in bot.api.calls_of("sendMessage")
            if int(c.params["chat_id"]) == group
        ]
        assert said_in_group and not [t for t in said_in_group if "between us" in t]
        assert "➕ added to vorenus's turn" not in bot.api.sent_texts(CAESAR)
