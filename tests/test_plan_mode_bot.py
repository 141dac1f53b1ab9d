"""/plan in Telegram (real python-telegram-bot on the fake Bot API, the fake CLI): the plan
arrives as a message with ✅ Go, ✏️ Change and ✖ Drop; words written after it are the changes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli
from tests.test_approvals_bot import tap

PLAN = "1. Read main.py\n2. Add the flag"
EXIT = f"/plan @vorenus TOOL ExitPlanMode {json.dumps({'plan': PLAN})}"


async def plan_message(bot: Running, start: int) -> tuple[int, list[tuple[str, str]]]:
    call = await bot.api.wait_for_call(
        "sendMessage", lambda c: "📋 vorenus's plan:" in str(c.params.get("text")), start=start
    )
    assert PLAN in str(call.params["text"])
    message_id = int(call.result["message_id"])
    return message_id, bot.api.buttons(CAESAR, message_id)


async def test_the_plan_as_buttons_go_and_change_in_words(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        start = await bot.ask(EXIT)
        message_id, buttons = await plan_message(bot, start)
        assert [label for label, _ in buttons] == ["✅ Go", "✏️ Change", "✖ Drop"]
        assert await tap(bot, buttons[0][1], message_id) == ""
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "User has approved your plan" in str(answer.params["text"])

        start = await bot.ask(EXIT)
        await plan_message(bot, start)
        await bot.ask("read tests.py first")
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "Caesar wants this plan changed: read tests.py first" in str(answer.params["text"])
