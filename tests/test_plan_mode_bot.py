"""/plan in Telegram (real python-telegram-bot on the fake Bot API, the fake CLI, real git):
the plan arrives as its own message with ✅ Go, ✏️ Change and ✖ Drop; words written after
it, or a reply to it, are the changes; a reply once it is decided goes to the agent as a
request. ``/plan vorenus on`` plans every request to vorenus first, across a restart; a
turn on a project that carried out an agreed plan gets a card with 📋 Plan."""

from __future__ import annotations

import json
from pathlib import Path

from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli
from tests.gitrepo import make_project
from tests.test_approvals_bot import tap
from tests.test_cards_bot import bash, buttons, is_card, position
from tests.test_plan_mode import modes

PLAN = "1. Read main.py\n2. Add the flag"
EXIT = f"/plan @vorenus TOOL ExitPlanMode {json.dumps({'plan': PLAN})}"
PLAIN_EXIT = f"@vorenus TOOL ExitPlanMode {json.dumps({'plan': PLAN})}"


async def plan_message(bot: Running, start: int) -> tuple[int, list[tuple[str, str]]]:
    call = await bot.api.wait_for_call(
        "sendMessage", lambda c: "📋 vorenus's plan:" in str(c.params.get("text")), start=start
    )
    assert PLAN in str(call.params["text"])
    message_id = int(call.result["message_id"])
    return message_id, bot.api.buttons(CAESAR, message_id)


async def said(bot: Running, text: str) -> str:
    """An admin-like answer to ``text``."""
    start = await bot.ask(text)
    return str((await bot.answer(start)).params["text"])


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
        assert "✅ Go: it carries the plan out." in bot.api.messages[(CAESAR, message_id)]["text"]
        assert bot.api.buttons(CAESAR, message_id) == []

        start = await bot.ask(EXIT)
        await plan_message(bot, start)
        await bot.ask("read tests.py first")
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "Caesar wants this plan changed: read tests.py first" in str(answer.params["text"])


async def test_a_reply_to_the_plan_is_the_change_and_once_decided_a_request_to_its_agent(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        start = await bot.ask(EXIT)
        message_id, _ = await plan_message(bot, start)
        bot.api.add_message("read tests.py first", user_id=CAESAR, reply_to=message_id)
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "Caesar wants this plan changed: read tests.py first" in str(answer.params["text"])
        shown = bot.api.messages[(CAESAR, message_id)]["text"]
        assert "✏️ Change: read tests.py first" in shown
        history = await bot.app.engine.praetorium.get_history(10)
        assert [n.text for n in history if n.sender == "caesar"] == [EXIT.split(maxsplit=1)[1]]
        [plan] = [n for n in history if n.text.startswith("📋 vorenus's plan:")]
        assert plan.sender == "vorenus" and PLAN in plan.text  # kept in the praetorium

        start = len(bot.api.calls)  # decided: a reply to the plan is a request to vorenus
        bot.api.add_message("REPLY noted, planning again", user_id=CAESAR, reply_to=message_id)
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "noted, planning again" in str(answer.params["text"])


async def test_plan_vorenus_on_plans_every_request_first_across_a_restart(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        refused = await said(bot, "/plan nobody on")
        assert refused.startswith("No centurio named 'nobody'.") and "vorenus" in refused
        assert "does not plan first" in await said(bot, "/plan vorenus")
        assert "now plans every request of yours first" in await said(bot, "/plan vorenus on")
        assert "📋 plan first (/plan vorenus off ends it)" in await said(bot, "/status")
        start = await bot.ask(PLAIN_EXIT)  # no /plan: planned all the same
        message_id, buttons = await plan_message(bot, start)
        await tap(bot, buttons[0][1], message_id)
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "User has approved your plan" in str(answer.params["text"])
        assert modes(fake_cli).count("plan") == 1
    async with running_bot(castra_dir, fake_cli) as bot:  # a restart keeps it
        assert (await said(bot, "/plan")).startswith("Planning first: vorenus.")
        assert "vorenus plans every request first" in await said(bot, "/plan @vorenus")
        assert "no longer plans first" in await said(bot, "/plan vorenus off")
        start = await bot.ask("@vorenus salve")
        await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert modes(fake_cli).count("plan") == 1  # its request ran at once
        assert "plan first" not in await said(bot, "/status")


async def test_a_card_after_an_agreed_plan_shows_the_plan_also_after_a_restart(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n'
    fix = "printf 'def add(a, b):\\n    return a + b\\n' > app.py && git commit -qam 'fix add'"
    exit_plan = EXIT.removeprefix("/plan @vorenus ")
    request = f"/plan @vorenus #app fix the failing test\n{exit_plan}\n{bash(fix)}"
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        start = await bot.ask(request)
        message_id, choices = await plan_message(bot, start)
        await tap(bot, choices[0][1], message_id)
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus #app"))
        card = await bot.answer(position(bot, answer), is_card)
        history = await bot.app.engine.praetorium.get_history(10)
        [plan] = [n for n in history if n.text.startswith("📋 vorenus's plan:")]
        assert f"📋 after the plan you agreed to (#{plan.seq})" in str(card.params["text"])
        keys = buttons(card)
        assert "📋 Plan" in keys
        card_id = int(card.result["message_id"])
    async with running_bot(castra_dir, fake_cli, extra) as bot:  # stored: a restart keeps it
        start = len(bot.api.calls)
        await tap(bot, keys["📋 Plan"], card_id)
        shown = await bot.answer(start, lambda t: PLAN.splitlines()[1] in t)
        assert "📋 vorenus's plan:" in str(shown.params["text"])
        assert shown.params["reply_parameters"]["message_id"] == card_id


async def test_a_stop_while_the_plan_waits_says_so_on_the_plan(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        start = await bot.ask(EXIT)
        message_id, _ = await plan_message(bot, start)
        await bot.ask("/stop vorenus")
        await bot.api.wait_for_call(
            "editMessageText",
            lambda c: "✖ The turn was stopped: nothing was changed." in str(c.params["text"]),
            start=start,
        )
        assert bot.api.buttons(CAESAR, message_id) == []
        assert PLAN in bot.api.messages[(CAESAR, message_id)]["text"]


HIDING = (
    '1. Fix the typo\n\n<!-- hidden -->\n[r]: http://x "t"\n<div>x</div>\nstep 2\n'
    "zero\u200bwidth \u202eevil\u202c ||spoiler|| [docs](https://evil.example/steal)"
)


async def test_every_character_of_the_plan_is_shown_as_written(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        start = await bot.ask(f"/plan @vorenus TOOL ExitPlanMode {json.dumps({'plan': HIDING})}")
        call = await bot.api.wait_for_call(
            "sendMessage", lambda c: "Fix the typo" in str(c.params.get("text")), start=start
        )
        message_id = int(call.result["message_id"])
        await tap(bot, bot.api.buttons(CAESAR, message_id)[2][1], message_id)  # ✖ Drop
    text = str(call.params["text"])
    for part in (
        "<!-- hidden -->",
        '[r]: http://x "t"',
        "<div>x</div>\nstep 2",
        "zero⟨U+200B⟩width",
        "⟨U+202E⟩evil⟨U+202C⟩",
        "||spoiler||",
        "[docs](https://evil.example/steal)",
    ):
        assert part in text, (part, text)
    assert not call.params.get("entities")  # no link, spoiler or hidden text: plain
