"""Replies, quotes, edits and topics in Telegram: the real python-telegram-bot on the fake
Bot API, agents on the fake CLI (which records what each agent was sent)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

from legio.store.jobstore import NewJob
from tests.botbench import CAESAR, Running, is_status, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import Call, FakeBotApi
from tests.legion import processes_of
from tests.test_approvals_bot import APPROVALS, approval_message, tap, with_bash


def last_prompt(fake_cli: FakeCli, agent: str) -> str:
    return processes_of(fake_cli, agent)[-1].raw_prompts[-1]


def thread(call: Call) -> int | None:
    value = call.params.get("message_thread_id")
    return None if value is None else int(value)


def message_id(call: Call) -> int:
    return int(call.result["message_id"])


async def reply_with(bot: Running, text: str, **more: object) -> int:
    start = len(bot.api.calls)
    bot.api.add_message(text, **more)  # type: ignore[arg-type]
    return start


async def test_replies_route_and_carry_what_they_point_at(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        start = await bot.ask("@vorenus REPLY the bridge needs 40 beams\nand some rope")
        vorenus = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
        start = await bot.ask("@pullo REPLY Rome has seven hills")
        pullo = await bot.answer(start, lambda t: t.startswith("⚔️ pullo"))

        # a reply naming nobody goes to the agent replied to
        start = await reply_with(bot, "REPLY how many nails?", reply_to=message_id(vorenus))
        call = await bot.answer(start)
        assert str(call.params["text"]).startswith("⚔️ vorenus")
        assert "<in_reply_to " not in last_prompt(fake_cli, "vorenus")  # its own words
        assert 'in_reply_to="' in last_prompt(fake_cli, "vorenus")

        # a reply to pullo's answer addressed to @vorenus shares the quoted words with it
        start = await reply_with(
            bot, "@vorenus is this right?", reply_to=message_id(pullo), quote="seven hills"
        )
        call = await bot.answer(start)
        assert str(call.params["text"]).startswith("⚔️ vorenus")
        prompt = last_prompt(fake_cli, "vorenus")
        assert 'sender="pullo" part="quote" source="praetorium">seven hills</in_reply_to>' in prompt

        # a reply to a message Legio never stored: Telegram's words, marked as such
        stranger = {
            "message_id": 77,
            "date": 0,
            "chat": {"id": CAESAR, "type": "private"},
            "from": {"id": 5, "is_bot": False, "first_name": "Brutus"},
            "text": "meet at the forum",
        }
        start = await reply_with(bot, "still on?", reply_to=stranger)
        await bot.answer(start)
        prompt = last_prompt(fake_cli, "legatus")
        assert '<in_reply_to sender="Brutus" part="whole" source="telegram">meet at the forum' in (
            prompt
        )


async def test_edits_correct_queued_requests_and_answered_ones_get_a_correction(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        api = bot.api
        busy = await bot.ask("@vorenus SLEEP 1.5\nREPLY done")
        await asyncio.sleep(0.3)
        queued = api.add_message("@vorenus REPLY fix teh bridge")["message"]
        origin = f"telegram:{CAESAR}:{queued['message_id']}"
        for _ in range(250):  # until it is stored and in line
            if await bot.app.engine.praetorium.get_by_origin(origin) is not None:
                break
            await asyncio.sleep(0.02)
        api.edit_message(CAESAR, queued["message_id"], text="@vorenus REPLY fix the bridge")
        await bot.answer(busy, lambda t: t.endswith("fix the bridge"))
        prompts = "\n".join(processes_of(fake_cli, "vorenus")[-1].raw_prompts)
        assert "teh" not in prompts  # it only ever saw the corrected words
        assert not [t for t in bot.answers() if "teh" in t]

        first = api.add_message("@pullo REPLY 40 beams")["message"]
        await bot.answer(0, lambda t: t.endswith("40 beams"))
        start = len(api.calls)
        api.edit_message(CAESAR, first["message_id"], text="@pullo REPLY 50 beams")
        call = await bot.answer(start, lambda t: t.endswith("50 beams"))
        assert call.params["reply_parameters"]["message_id"] == first["message_id"]
        assert "edit_of=" in last_prompt(fake_cli, "pullo")
        start = len(api.calls)
        api.edit_message(CAESAR, first["message_id"], text="@pullo REPLY 50 beams")  # the same
        await api.wait_for_call("getUpdates", start=start + 1)
        await asyncio.sleep(0.3)
        assert [t for t in bot.answers() if t.endswith("50 beams")] == [call.params["text"]]

        stranger = api.add_message("@pullo REPLY hi", user_id=666)["message"]
        api.edit_message(666, stranger["message_id"], text="@pullo REPLY pwned")
        before = len(bot.answers())
        history = await bot.answer(await bot.ask("/history 8"))
        assert "pwned" not in history.params["text"] and len(bot.answers()) == before + 1
        assert "(edited; it first said: @vorenus REPLY fix teh bridge)" in history.params["text"]
        assert "(a correction of #" in history.params["text"]


async def test_the_status_message_is_silent_and_answers_ring(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli, telegram="stream = false") as bot:
        start = await bot.ask("@vorenus THINK about it\nSLEEP 1.5\nREPLY done")
        answer = await bot.answer(start, lambda t: t.endswith("done"))
        statuses = [c for c in bot.api.calls[start:] if c.method == "sendMessage" and is_status(c)]
        assert statuses and all(c.params.get("disable_notification") == "true" for c in statuses)
        assert not answer.params.get("disable_notification")


async def test_a_topic_per_agent_made_once_and_answers_in_their_topic(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    api = FakeBotApi()
    api.has_topics_enabled = True
    async with running_bot(castra_dir, fake_cli, api=api) as bot:
        made = {
            c.params["name"]: c.result["message_thread_id"]
            for c in api.calls_of("createForumTopic")
        }
        assert sorted(made) == ["pullo", "vorenus"]
        assert api.sent_in(CAESAR, made["vorenus"])[0].startswith("⚔️ vorenus — ")

        # in vorenus's topic: vorenus answers, there, with no @
        start = await reply_with(bot, "REPLY in my lane", thread_id=made["vorenus"])
        call = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
        assert thread(call) == made["vorenus"]
        assert 'topic="vorenus"' in last_prompt(fake_cli, "vorenus")  # it knows its lane
        # an @mention in it still reaches another agent, answered in that topic
        start = await reply_with(bot, "@pullo REPLY visiting", thread_id=made["vorenus"])
        call = await bot.answer(start, lambda t: t.startswith("⚔️ pullo"))
        assert thread(call) == made["vorenus"]
        # a topic Caesar made himself: the Legatus answers there
        api.topics[CAESAR][4242] = "ideas"
        start = await reply_with(bot, "REPLY legatus here", thread_id=4242)
        call = await bot.answer(start, lambda t: t.endswith("legatus here"))
        assert thread(call) == 4242
        assert 'topic="ideas"' in last_prompt(fake_cli, "legatus")
        # the Legatus's dispatch: pullo's answer shows, silently, in pullo's topic too
        ask = '{"centuriones": ["pullo"], "text": "REPLY from the dispatch"}'
        start = await bot.ask(f"CALL_TOOL legatus_tools dispatch {ask}")
        await bot.answer(start, lambda t: "## pullo" in t)
        shown = [t for t in api.sent_in(CAESAR, made["pullo"]) if "for the Legatus" in t]
        assert shown and shown[0].endswith("from the dispatch")
        # a scheduled job for vorenus: answered in vorenus's topic
        now = datetime.now(UTC)
        job = NewJob("ping", "vorenus", "REPLY pong", "once", "UTC", now, "legatus", run_at=now)
        await bot.app.engine.scheduler.jobs.add(job, 50, now)
        bot.app.engine.scheduler.changed()
        call = await bot.answer(0, lambda t: t.startswith("⏰ ping"))
        assert thread(call) == made["vorenus"]
        # the main chat stays the main chat
        call = await bot.answer(await bot.ask("REPLY main"), lambda t: t.endswith("main"))
        assert thread(call) is None

        # Caesar deletes vorenus's topic while it works: the answer comes in the main chat,
        # he is told once, and the topic is made again when next needed (his next message)
        start = await reply_with(
            bot, "SLEEP 1\nREPLY after the deletion", thread_id=made["vorenus"]
        )
        await asyncio.sleep(0.4)  # vorenus is at work
        api.delete_topic(CAESAR, made["vorenus"])
        call = await bot.answer(start, lambda t: t.endswith("after the deletion"))
        assert thread(call) is None
        gone = [t for t in bot.answers() if "vorenus's topic is gone" in t]
        assert len(gone) == 1
        await bot.answer(await bot.ask("REPLY again"), lambda t: t.endswith("again"))
        names = [c.params["name"] for c in api.calls_of("createForumTopic")]
        assert names == ["pullo", "vorenus", "vorenus"]

    async with running_bot(castra_dir, fake_cli, api=api):  # a restart: no new topic
        assert len(api.calls_of("createForumTopic")) == 3


async def test_an_approval_is_asked_in_the_topic_of_the_request(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    with_bash(castra_dir, "vorenus")
    api = FakeBotApi()
    api.has_topics_enabled = True
    async with running_bot(castra_dir, fake_cli, APPROVALS, api=api) as bot:
        made = {
            c.params["name"]: c.result["message_thread_id"]
            for c in api.calls_of("createForumTopic")
        }
        command = json.dumps({"command": "touch topic.txt"})
        start = await reply_with(bot, f"TOOL Bash {command}", thread_id=made["vorenus"])
        message_id, prefix = await approval_message(bot, start)
        asked = [
            c
            for c in api.calls_of("sendMessage")
            if c.result and c.result.get("message_id") == message_id
        ]
        assert thread(asked[0]) == made["vorenus"]
        await tap(bot, f"{prefix}:o", message_id)
        call = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus") and "TOOL_RESULT" in t)
        assert thread(call) == made["vorenus"]
        assert (castra_dir / "centuriones" / "vorenus" / "workspace" / "topic.txt").exists()
