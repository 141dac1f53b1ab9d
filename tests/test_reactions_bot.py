"""Reactions (real python-telegram-bot on the fake Bot API, agents on the fake CLI): 👀 when
a request is taken and 👌 once answered, two marks per request whatever it asks; Caesar's
reaction on an answer reaches that agent with its next request; 👎 on a work card offers
Undo; ``[telegram] reactions = false`` turns it all off."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from legio.frontends.telegram.reactions import ALLOWED, ANSWERED, TAKEN
from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import REACTION_EMOJI, Call
from tests.gitrepo import make_project


def marks(bot: Running, message_id: int) -> list[list[str]]:
    """The bot's reactions set on Caesar's message ``message_id``, in order."""
    return [
        [r["emoji"] for r in c.params.get("reaction") or []]
        for c in bot.api.calls_of("setMessageReaction")
        if int(c.params["message_id"]) == message_id and c.status == 200
    ]


async def ask(bot: Running, text: str) -> tuple[int, int]:
    """Send Caesar's message: (its message id, where the call log stood)."""
    start = len(bot.api.calls)
    update = bot.api.add_message(text, user_id=CAESAR)
    return int(update["message"]["message_id"]), start


async def marked_answered(bot: Running, message_id: int, start: int) -> Call:
    return await bot.api.wait_for_call(
        "setMessageReaction",
        lambda c: (
            int(c.params["message_id"]) == message_id
            and bool(c.params.get("reaction"))
            and c.params["reaction"][0]["emoji"] == ANSWERED
        ),
        start=start,
    )


async def until(condition: Any, seconds: float = 30) -> None:
    """Wait for ``condition()`` (a handler running as a task)."""
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the condition never held")


def prompts_of(fake_cli: FakeCli) -> list[str]:
    return [p for proc in fake_cli.processes() for p in proc.prompts]


def test_legios_marks_are_reactions_telegram_allows() -> None:
    assert {TAKEN, ANSWERED} <= ALLOWED <= REACTION_EMOJI
    assert "✅" not in ALLOWED


async def test_taken_then_answered_two_marks_per_request(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        message_id, start = await ask(bot, "@vorenus REPLY salve")
        answer = await bot.answer(start, lambda t: t.endswith("salve"))
        await marked_answered(bot, message_id, start)
        assert marks(bot, message_id) == [[TAKEN], [ANSWERED]]
        calls = bot.api.calls[start:]
        first_mark = next(i for i, c in enumerate(calls) if c.method == "setMessageReaction")
        assert first_mark < calls.index(answer)  # 👀 is the first sign, before the answer

        # two agents, two answers: still the two marks on Caesar's one message
        message_id, start = await ask(bot, "@vorenus @pullo REPLY both")
        await marked_answered(bot, message_id, start)
        assert marks(bot, message_id) == [[TAKEN], [ANSWERED]]
        assert sum(t.endswith("both") for t in bot.answers()) == 2
        # the Bot API was asked for message_reaction updates (else none would come)
        assert bot.api.allowed_updates and "message_reaction" in bot.api.allowed_updates


async def test_caesars_reaction_reaches_the_agent_with_its_next_request(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        message_id, start = await ask(bot, "@vorenus REPLY the plan is ready")
        answer = await bot.answer(start, lambda t: t.endswith("the plan is ready"))
        await marked_answered(bot, message_id, start)
        request_seq = (await bot.app.history(10))[-1].seq  # Caesar's request: the oldest
        bot.api.add_reaction(int(answer.result["message_id"]), "👍", user_id=CAESAR)
        asides = bot.app.engine.sessions.asides
        await until(lambda: asides.pending("vorenus"))

        _, start = await ask(bot, "@vorenus REPLY next")
        await bot.answer(start, lambda t: t.endswith("next"))
        _, start = await ask(bot, "@vorenus REPLY and again")
        await bot.answer(start, lambda t: t.endswith("and again"))
        note = f"Caesar reacted 👍 to your answer to #{request_seq}."
        prompts = prompts_of(bot.fake_cli)
        assert [note in p for p in prompts] == [False, True, False]  # read once, in the next


async def test_a_thumbs_down_on_a_work_card_offers_undo(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n'
    change = "printf 'x = 1\\n' > new.py && git add new.py && git commit -qm 'add new'"
    command = "TOOL Bash " + json.dumps({"command": change})
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        _, start = await ask(bot, f"@vorenus #app add a file\n{command}")
        card = await bot.answer(start, lambda t: t.startswith("🗂 vorenus #app"))
        card_id = next(
            b["callback_data"].split(":")[2]
            for row in card.params["reply_markup"]["inline_keyboard"]
            for b in row
        )
        start = len(bot.api.calls)
        bot.api.add_reaction(int(card.result["message_id"]), "👎", user_id=CAESAR)
        offer = await bot.answer(start, lambda t: "↩️ Undo" in t)
        [[button]] = offer.params["reply_markup"]["inline_keyboard"]
        assert button["callback_data"] == f"card:undo:{card_id}"
        assert not bot.app.engine.sessions.asides.pending("vorenus")  # a card, not an answer


async def test_reactions_off(castra_dir: Path, fake_cli: FakeCli) -> None:
    async with running_bot(castra_dir, fake_cli, telegram="reactions = false") as bot:
        _, start = await ask(bot, "@vorenus REPLY salve")
        answer = await bot.answer(start, lambda t: t.endswith("salve"))
        bot.api.add_reaction(int(answer.result["message_id"]), "🔥", user_id=CAESAR)
        _, start = await ask(bot, "@vorenus REPLY later")
        await bot.answer(start, lambda t: t.endswith("later"))
        assert bot.api.calls_of("setMessageReaction") == []
        assert not any("Caesar reacted" in p for p in prompts_of(bot.fake_cli))


async def test_marks_in_a_group_leave_its_twenty_messages_a_minute_to_the_answers() -> None:
    """Telegram allows a bot some 20 messages a minute in a group (python-telegram-bot's
    limiter keeps to it); a mark is no message: it never waits for the group's budget, so
    marking a forum's requests does not hold up their answers."""
    from legio.frontends.telegram.serving import FloodLimits

    limits = FloodLimits(group_max_rate=1, group_time_period=3600)  # one a hour, per group
    await limits.initialize()
    sent: list[str] = []

    async def post(endpoint: str, data: dict[str, Any]) -> bool:
        sent.append(endpoint)
        return True

    async def call(endpoint: str) -> object:
        data = {"chat_id": -100123, "message_id": 7}
        return await limits.process_request(
            callback=post,
            args=(endpoint, data),
            kwargs={},
            endpoint=endpoint,
            data=data,
            rate_limit_args=None,
        )

    await asyncio.wait_for(call("sendMessage"), 30)  # the group's one message this hour
    for _ in range(3):  # 👀, 👌 and more: not held for an hour behind it
        await asyncio.wait_for(call("setMessageReaction"), 30)
    assert sent == ["sendMessage"] + ["setMessageReaction"] * 3
    second = asyncio.ensure_future(call("sendMessage"))  # a second message does wait
    await asyncio.sleep(0.2)
    assert not second.done()
    second.cancel()
    await limits.shutdown()
