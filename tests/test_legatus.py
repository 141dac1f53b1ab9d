"""The Legatus: routing, bookkeeping, its own session, bootstrap, continuity and tools."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from legio.castra import Castra
from legio.legatus import Legatus, parse_mentions
from tests.conftest import FakeCli
from tests.legion import fake_cli_config, history_ids, processes_of

HEADER_VORENUS = "⚔️ vorenus — Code reviewer and software engineer\n━━━━━━━━━━━━\n"


@pytest.fixture
async def legatus(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Legatus]:
    legatus = await Legatus.open(fake_cli_config(castra_dir, fake_cli))
    yield legatus
    await legatus.close()


async def stored(legatus: Legatus) -> list[tuple[str, tuple[str, ...], str | None]]:
    """(sender, audience, reply_to) of every nuntius, oldest first."""
    return [
        (n.sender, n.audience, n.reply_to)
        for n in reversed(await legatus.praetorium.get_history(1000))
    ]


async def test_flow_a_the_legatus_answers(legatus: Legatus) -> None:
    [reply] = await legatus.handle_message("What's the status?")
    assert (reply.agent, reply.text, reply.kind) == (
        "legatus",
        "ECHO: What's the status?",
        "answer",
    )
    caesar, answer = reversed(await legatus.praetorium.get_history(10))
    assert (caesar.sender, caesar.audience, caesar.reply_to) == ("caesar", ("legatus",), None)
    assert (answer.sender, answer.audience, answer.reply_to) == ("legatus", ("caesar",), caesar.id)
    assert answer.text == reply.text


async def test_flow_b_a_centurio_answers_under_its_header(legatus: Legatus) -> None:
    [reply] = await legatus.handle_message("@vorenus review this code")
    assert reply.agent == "vorenus"
    assert reply.text == HEADER_VORENUS + "ECHO: @vorenus review this code"
    rows = await stored(legatus)
    caesar_id = (await legatus.praetorium.get_history(10))[-1].id
    assert rows == [("caesar", ("vorenus",), None), ("vorenus", ("caesar",), caesar_id)]


async def test_several_mentions_answer_in_parallel_each_stored(legatus: Legatus) -> None:
    replies = await legatus.handle_message("@vorenus @pullo compare")
    by_agent = {r.agent: r for r in replies}  # in the order they finished
    assert sorted(by_agent) == ["pullo", "vorenus"]
    assert by_agent["pullo"].text.startswith(
        "⚔️ pullo — Researcher who finds, checks and summarizes facts\n"
    )
    rows = await stored(legatus)
    assert rows[0] == ("caesar", ("vorenus", "pullo"), None)
    assert sorted(r[0] for r in rows[1:]) == ["pullo", "vorenus"]
    assert all(r[2] is not None for r in rows[1:])


async def test_at_all_reaches_every_centurio_with_audience_all(legatus: Legatus) -> None:
    replies = await legatus.handle_message("@all muster at dawn")
    assert sorted(r.agent for r in replies) == ["pullo", "vorenus"]
    rows = await stored(legatus)
    assert rows[0] == ("caesar", ("all",), None)


def test_mentions_are_whole_roster_names_case_insensitive(castra_dir: Path) -> None:
    roster = Castra(castra_dir).roster()
    assert parse_mentions("@Vorenus and @vorenus again", roster).names == ["vorenus"]
    assert parse_mentions("mail a@vorenus.com or @vorenus.com", roster).names == []
    assert parse_mentions("@vorenusx @pul @brutus", roster).names == []
    assert parse_mentions("(@pullo), then @vorenus.", roster).names == ["pullo", "vorenus"]
    everyone = parse_mentions("@ALL listen", roster)
    assert everyone.broadcast
    assert everyone.names == ["pullo", "vorenus"]


async def test_roster_in_system_prompt_and_status_in_each_message(
    legatus: Legatus, fake_cli: FakeCli
) -> None:
    await legatus.handle_message("hello")
    [process] = processes_of(fake_cli, "legatus")
    system = process.system_prompt or ""
    assert not system.startswith("---")  # frontmatter is not part of the prompt
    assert "# Legatus" in system
    assert (
        '<centurio name="pullo">Researcher who finds, checks and summarizes facts</centurio>'
        in system
    )
    assert "status" not in system.split("<centuriones>")[1]
    [prompt] = process.prompts
    assert prompt == (
        "<centurio_status>\n"
        '  <centurio name="pullo" status="idle"/>\n'
        '  <centurio name="vorenus" status="idle"/>\n'
        "</centurio_status>\n\nhello"
    )


async def until(condition: Callable[[], bool], seconds: float = 20) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the condition never held")


async def test_a_queued_request_carries_the_status_of_when_its_turn_comes(
    legatus: Legatus, fake_cli: FakeCli
) -> None:
    busy = asyncio.create_task(legatus.handle_message("SLEEP 30"))
    centurio = asyncio.create_task(legatus.handle_message("@vorenus SLEEP 0.5"))
    await until(lambda: legatus.sessions.state("vorenus") == "working")
    queued = asyncio.create_task(legatus.handle_message("and now?"))  # vorenus still works
    await centurio
    await until(lambda: any(p.prompts for p in processes_of(fake_cli, "legatus")))
    assert await legatus.sessions.interrupt("legatus")  # its turn ends; the queued one runs
    await asyncio.gather(busy, queued)
    prompts = [p for proc in processes_of(fake_cli, "legatus") for p in proc.prompts]
    [last] = [p for p in prompts if p.endswith("and now?")]
    assert '<centurio name="vorenus" status="idle"/>' in last  # not "working"


async def test_roster_and_prompt_changes_rebuild_the_legatus(
    legatus: Legatus, castra_dir: Path, fake_cli: FakeCli
) -> None:
    await legatus.handle_message("one")
    await legatus.handle_message("two")
    assert len(processes_of(fake_cli, "legatus")) == 1
    brutus = castra_dir / "centuriones" / "brutus"
    brutus.mkdir()
    (brutus / "prompt.md").write_text("# Brutus — planner\n")
    await legatus.handle_message("three")
    assert len(processes_of(fake_cli, "legatus")) == 2
    assert '<centurio name="brutus">' in (processes_of(fake_cli, "legatus")[-1].system_prompt or "")
    (brutus / "prompt.md").write_text("# Brutus — strategist\n")
    await legatus.handle_message("four")
    assert "strategist" in (processes_of(fake_cli, "legatus")[-1].system_prompt or "")
    shutil.rmtree(brutus)
    await legatus.handle_message("five")
    assert "brutus" not in (processes_of(fake_cli, "legatus")[-1].system_prompt or "")
    prompt = castra_dir / "legatus" / "prompt.md"
    prompt.write_text(prompt.read_text() + "\nSpeak Latin.\n")
    await legatus.handle_message("six")
    last = processes_of(fake_cli, "legatus")[-1]
    assert "Speak Latin." in (last.system_prompt or "")
    assert len(processes_of(fake_cli, "legatus")) == 5
    assert "<context_notice>" in last.prompts[0]
    stat = prompt.stat()
    os.utime(prompt, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    await legatus.handle_message("seven")
    assert len(processes_of(fake_cli, "legatus")) == 6


async def test_startup_with_history_bootstraps_the_first_query_only(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    config = fake_cli_config(castra_dir, fake_cli)
    legatus = await Legatus.open(config)
    earlier = await legatus.praetorium.post("caesar", "we spoke of the bridge", ["legatus"])
    await legatus.close()
    legatus = await Legatus.open(config)
    try:
        await legatus.handle_message("continue where we left off")
        await legatus.handle_message("and then?")
        first, second = processes_of(fake_cli, "legatus")[0].prompts
        assert history_ids(first) == [earlier.id]
        order = [
            first.index(tag) for tag in ("<praetorium", "<context_notice>", "<centurio_status>")
        ]
        assert order == sorted(order)
        assert first.endswith("\n\ncontinue where we left off")
        assert "<context_notice>" not in second
        assert "<praetorium" not in second
    finally:
        await legatus.close()


async def test_restart_resumes_or_bootstraps_when_resume_fails(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    config = fake_cli_config(castra_dir, fake_cli)
    legatus = await Legatus.open(config)
    await legatus.handle_message("remember the bridge")
    await legatus.close()
    legatus = await Legatus.open(config)
    await legatus.handle_message("resumed?")
    resumed = processes_of(fake_cli, "legatus")[-1]
    assert resumed.resumed
    assert "<context_notice>" not in resumed.prompts[0]
    await legatus.close()
    shutil.rmtree(fake_cli.state_dir)
    legatus = await Legatus.open(config)
    try:
        await legatus.handle_message("after the loss")
        fresh = processes_of(fake_cli, "legatus")[-1]
        assert not fresh.resumed
        assert "<context_notice>" in fresh.prompts[0]
        assert "remember the bridge" in fresh.prompts[0]
    finally:
        await legatus.close()


async def test_the_legatus_learns_of_a_caesar_vorenus_exchange_once(
    legatus: Legatus, fake_cli: FakeCli
) -> None:
    await legatus.handle_message("hello legatus")
    await legatus.handle_message("@vorenus the bridge is down")
    await legatus.handle_message("what did vorenus say?")
    await legatus.handle_message("and now?")
    _, second, third = processes_of(fake_cli, "legatus")[0].prompts
    ids = history_ids(second)
    assert len(ids) == 2
    assert "@vorenus the bridge is down" in second
    assert "ECHO: @vorenus the bridge is down" in second
    assert history_ids(third) == []


async def test_the_dispatch_tool_reaches_a_centurio_and_returns_its_answer(
    legatus: Legatus, fake_cli: FakeCli
) -> None:
    lines: list[str] = []

    async def on_status(agent: str, line: str) -> None:
        lines.append(f"{agent}: {line}")

    call = json.dumps({"centuriones": ["vorenus"], "text": "check the walls"})
    [reply] = await legatus.handle_message(f"CALL_TOOL legatus_tools dispatch {call}", on_status)
    assert reply.text == "TOOL_RESULT: ## vorenus\nECHO: check the walls"
    assert "legatus: ⏳ Dispatching to vorenus..." in lines
    assert "vorenus: ⏳ ECHO: check the walls" in lines
    [vorenus] = processes_of(fake_cli, "vorenus")
    assert vorenus.prompts == ["check the walls"]
    history = list(reversed(await legatus.praetorium.get_history(10)))
    asked, answered = history[1], history[2]
    assert (asked.sender, asked.audience) == ("legatus", ("vorenus",))
    assert (answered.sender, answered.audience, answered.reply_to) == (
        "vorenus",
        ("legatus",),
        asked.id,
    )
    await legatus.handle_message("next")
    assert processes_of(fake_cli, "legatus")[0].prompts[-1].endswith("</centurio_status>\n\nnext")
    bad = json.dumps({"centuriones": ["brutus"], "text": "x"})
    [reply] = await legatus.handle_message(f"CALL_TOOL legatus_tools dispatch {bad}")
    assert (
        reply.text
        == "TOOL_RESULT: Error: no centurio named ['brutus']; the centuriones are: pullo, vorenus"
    )


async def test_history_tools_return_what_the_praetorium_holds(legatus: Legatus) -> None:
    await legatus.handle_message("@pullo the aqueduct leaks")
    [reply] = await legatus.handle_message('CALL_TOOL legatus_tools get_history {"limit": 5}')
    assert "caesar → pullo: @pullo the aqueduct leaks" in reply.text
    assert "pullo → caesar: ECHO: @pullo the aqueduct leaks" in reply.text
    [reply] = await legatus.handle_message(
        'CALL_TOOL legatus_tools search_history {"query": "aqueduct"}'
    )
    assert "«aqueduct»" in reply.text
    [reply] = await legatus.handle_message(
        'CALL_TOOL legatus_tools search_history {"query": "\\"open"}'
    )
    assert reply.text.startswith("TOOL_RESULT: Error: cannot search for")


async def test_post_nuntius_reaches_the_centurio_with_its_next_request(
    legatus: Legatus, fake_cli: FakeCli
) -> None:
    args = json.dumps({"text": "Caesar prefers short answers", "audience": ["vorenus"]})
    [reply] = await legatus.handle_message(f"CALL_TOOL legatus_tools post_nuntius {args}")
    assert reply.text.startswith("TOOL_RESULT: Posted nuntius #")
    await legatus.handle_message("@vorenus hello")
    [prompt] = processes_of(fake_cli, "vorenus")[0].prompts
    assert "Caesar prefers short answers" in prompt


async def test_list_and_reset_tools_and_the_full_tool_set(
    legatus: Legatus, fake_cli: FakeCli
) -> None:
    await legatus.handle_message("@vorenus hi")
    [reply] = await legatus.handle_message("CALL_TOOL legatus_tools list_centuriones {}")
    assert "- vorenus: Code reviewer and software engineer (idle, 1 turns" in reply.text
    [reply] = await legatus.handle_message(
        'CALL_TOOL legatus_tools reset_centurio {"name": "vorenus"}'
    )
    assert reply.text == "TOOL_RESULT: Reset vorenus: its next request starts a fresh session."
    assert await legatus.praetorium.get_checkpoint("vorenus") is None
    tools = processes_of(fake_cli, "legatus")[0].listed_tools()["legatus_tools"]
    assert tools[:6] == [
        "get_history",
        "search_history",
        "post_nuntius",
        "dispatch",
        "list_centuriones",
        "reset_centurio",
    ]
    assert len(tools) == 18
    assert "publish_edictum" in tools and "search_memoria" in tools
    assert tools[-1] == "send_file"


@pytest.mark.parametrize("text", ["", "   \n\t "])
async def test_empty_message_gets_a_clear_reply_and_nothing_is_stored(
    legatus: Legatus, text: str
) -> None:
    [reply] = await legatus.handle_message(text)
    assert reply.kind == "notice"
    assert "Your message is empty" in reply.text
    assert await legatus.praetorium.count() == 0


async def test_only_mentions_asks_what_to_do(legatus: Legatus) -> None:
    [reply] = await legatus.handle_message("@vorenus @pullo")
    assert reply.text == "What should @vorenus, @pullo do? Write the request after the name."
    assert await legatus.praetorium.count() == 0


async def test_a_centurio_mentioned_twice_is_dispatched_once(
    legatus: Legatus, fake_cli: FakeCli
) -> None:
    replies = await legatus.handle_message("@vorenus look @Vorenus again")
    assert len(replies) == 1
    assert len(processes_of(fake_cli, "vorenus")[0].prompts) == 1


async def test_unknown_names_and_emails_are_plain_text_for_the_legatus(legatus: Legatus) -> None:
    [reply] = await legatus.handle_message("ask @brutus or mail a@vorenus.com")
    assert reply.agent == "legatus"
    assert reply.text == "ECHO: ask @brutus or mail a@vorenus.com"


async def test_a_centurio_whose_prompt_was_deleted_gets_a_clear_reply(
    legatus: Legatus, castra_dir: Path
) -> None:
    (castra_dir / "centuriones" / "pullo" / "prompt.md").unlink()
    [reply] = await legatus.handle_message("@pullo are you there?")
    assert reply.kind == "notice"
    assert reply.text.startswith("Cannot dispatch: centuriones/pullo: ignored, ")
    assert "prompt file not found" in reply.text
    replies = await legatus.handle_message("@vorenus @pullo both of you")
    assert [r.agent for r in replies] == ["vorenus", "legatus"]
    assert replies[1].text.startswith("Not dispatched: centuriones/pullo")


async def test_100kb_message_is_stored_and_answered(legatus: Legatus) -> None:
    text = "lorem ipsum " * 8600
    [reply] = await legatus.handle_message(text)
    assert reply.text == "ECHO: " + text.strip()
    assert (await legatus.praetorium.get_history(2))[1].text == text


async def test_a_failing_legatus_answers_with_an_error_and_keeps_the_books(
    legatus: Legatus,
) -> None:
    [reply] = await legatus.handle_message("EXIT 3")
    assert (
        reply.text
        == "[legatus] An error occurred during processing. (the Claude CLI exited with code 3)"
    )
    assert reply.kind == "error"
    assert [r[0] for r in await stored(legatus)] == ["caesar", "legatus"]
    [reply] = await legatus.handle_message("better now?")
    assert reply.text == "ECHO: better now?"
