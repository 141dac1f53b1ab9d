"""Centurio sessions: history given exactly once, resume, rebuilds, reaping, failures."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from claude_agent_sdk import ResultMessage

from legio.frontends.statusview import status_text
from legio.request import Callbacks, Status
from legio.sessions.history import CONTEXT_NOTICE
from legio.sessions.turn import SessionTokenTracker
from tests.conftest import FakeCli
from tests.legion import Legion, history_ids

NOTICE = "<context_notice>"


async def until_asked(legion: Legion, name: str) -> None:
    """Wait until agent ``name``'s CLI has received a prompt."""
    for _ in range(200):
        if legion.prompts(name):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} was never asked")


@pytest.fixture
async def legion(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Legion]:
    legion = await Legion(castra_dir, fake_cli).start()
    yield legion
    await legion.stop()


async def test_first_dispatch_gets_the_window_and_notice_but_not_itself(legion: Legion) -> None:
    older = await legion.post("@vorenus old question", ["vorenus"])
    answer = await legion.post("old answer", ["caesar"], sender="vorenus")
    broadcast = await legion.post("@all muster at dawn", ["all"])
    await legion.post("@pullo for pullo only", ["pullo"])
    await legion.post("to the legatus", ["legatus"])
    replies = await legion.say(["vorenus"], "@vorenus what now?")
    [prompt] = legion.prompts("vorenus")
    assert history_ids(prompt) == [older.id, answer.id, broadcast.id]
    assert f"{NOTICE}{CONTEXT_NOTICE}</context_notice>" in prompt  # seed 001's wording
    assert prompt.endswith("</context_notice>\n\n@vorenus what now?")
    assert prompt.index("</praetorium>") < prompt.index(NOTICE)
    assert "for pullo only" not in prompt
    assert "to the legatus" not in prompt
    assert replies == {"vorenus": "ECHO: @vorenus what now?"}


async def test_first_dispatch_with_no_history_is_just_the_text(legion: Legion) -> None:
    await legion.say(["vorenus"], "hello")
    assert legion.prompts("vorenus") == ["hello"]


async def test_the_window_is_the_newest_history_window_nuntii(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    legion = await Legion(castra_dir, fake_cli, history_window=3).start()
    try:
        posted = [await legion.post(f"m{i}", ["vorenus"]) for i in range(6)]
        await legion.say(["vorenus"], "now")
        [prompt] = legion.prompts("vorenus")
        assert history_ids(prompt) == [n.id for n in posted[3:]]
    finally:
        await legion.stop()


async def test_frontmatter_history_window_overrides_config(
    legion: Legion, castra_dir: Path
) -> None:
    prompt = castra_dir / "centuriones" / "pullo" / "prompt.md"
    prompt.write_text(
        prompt.read_text().replace("---\ndescription", "---\nhistory_window: 2\ndescription")
    )
    posted = [await legion.post(f"m{i}", ["pullo"]) for i in range(4)]
    await legion.say(["pullo"], "now")
    assert history_ids(legion.prompts("pullo")[0]) == [n.id for n in posted[2:]]


async def test_later_dispatches_get_only_the_unseen_delta(legion: Legion) -> None:
    await legion.say(["vorenus"], "first")
    broadcast = await legion.post("@all news", ["all"])
    await legion.post("not for vorenus", ["pullo"])
    await legion.say(["vorenus"], "second")
    await legion.say(["vorenus"], "third")
    _first, second, third = legion.prompts("vorenus")
    assert history_ids(second) == [broadcast.id]
    assert NOTICE not in second
    assert second.endswith("\n\nsecond")
    assert third == "third"
    assert len(legion.processes("vorenus")) == 1


async def test_restart_resumes_the_session_with_the_delta_only(legion: Legion) -> None:
    await legion.say(["vorenus"], "before the restart")
    [before] = legion.processes("vorenus")
    await legion.restart()
    broadcast = await legion.post("@all while down", ["all"])
    await legion.say(["vorenus"], "after the restart")
    _first, resumed = legion.processes("vorenus")
    assert resumed.resumed
    assert f"--resume={before.session_id}" in resumed.argv
    [prompt] = resumed.prompts
    assert history_ids(prompt) == [broadcast.id]
    assert NOTICE not in prompt
    assert "before the restart" not in prompt


async def test_failed_resume_falls_back_to_a_fresh_session_with_window_and_notice(
    legion: Legion, fake_cli: FakeCli
) -> None:
    first = await legion.post("remember the eagle", ["vorenus"])
    await legion.manager.answer("vorenus", first)
    await legion.restart()
    shutil.rmtree(fake_cli.state_dir)  # the CLI's transcripts are gone
    replies = await legion.say(["vorenus"], "what did I say?")
    assert replies == {"vorenus": "ECHO: what did I say?"}
    processes = legion.processes("vorenus")
    failed, fresh = processes[-2:]
    assert failed.resumed and not fresh.resumed
    assert fresh.session_id != failed.session_id
    [prompt] = fresh.prompts
    assert history_ids(prompt) == [first.id]
    assert NOTICE in prompt
    checkpoint = await legion.praetorium.records.get_checkpoint("vorenus")
    assert checkpoint is not None
    assert checkpoint.session_id == fresh.session_id


async def test_prompt_edit_rebuilds_a_new_session(legion: Legion, castra_dir: Path) -> None:
    await legion.say(["vorenus"], "one")
    prompt = castra_dir / "centuriones" / "vorenus" / "prompt.md"
    prompt.write_text(prompt.read_text() + "\nAlways answer in Latin.\n")
    await legion.say(["vorenus"], "two")
    old, new = legion.processes("vorenus")
    assert not new.resumed
    assert new.session_id != old.session_id
    assert new.system_prompt is not None
    assert new.system_prompt.endswith("Always answer in Latin.")
    [prompt_two] = new.prompts
    assert NOTICE in prompt_two
    assert "one" in prompt_two  # the window brings back what was said


async def test_token_ceiling_rebuilds_a_new_session(castra_dir: Path, fake_cli: FakeCli) -> None:
    legion = await Legion(castra_dir, fake_cli, max_input_tokens=1000).start()
    try:
        await legion.say(["vorenus"], "USAGE 10 5000 0")
        [status] = legion.manager.status(["vorenus"])
        assert status.context_tokens == 5010
        await legion.say(["vorenus"], "next")
        old, new = legion.processes("vorenus")
        assert new.session_id != old.session_id
        assert not new.resumed
        assert NOTICE in new.prompts[0]
    finally:
        await legion.stop()


async def test_idle_reap_then_resume(castra_dir: Path, fake_cli: FakeCli) -> None:
    legion = await Legion(
        castra_dir, fake_cli, session_idle_timeout_minutes=0.0005, reap_interval_s=0.05
    ).start()
    try:
        await legion.say(["vorenus"], "before the reap")
        legion.manager.start()
        for _ in range(100):
            if not legion.manager.status(["vorenus"])[0].live:
                break
            await asyncio.sleep(0.05)
        assert not legion.manager.status(["vorenus"])[0].live
        await legion.say(["vorenus"], "after the reap")
        first, resumed = legion.processes("vorenus")
        assert resumed.resumed
        assert resumed.session_id == first.session_id
        assert resumed.prompts == ["after the reap"]
    finally:
        await legion.stop()


async def test_reset_starts_fresh(legion: Legion) -> None:
    await legion.say(["vorenus"], "one")
    assert await legion.manager.reset("vorenus")
    assert await legion.praetorium.records.get_checkpoint("vorenus") is None
    await legion.say(["vorenus"], "two")
    old, new = legion.processes("vorenus")
    assert not new.resumed
    assert new.session_id != old.session_id
    assert NOTICE in new.prompts[0]
    assert not await legion.manager.reset("pullo")


async def test_parallel_dispatch_one_failing_never_blocks_the_others(
    legion: Legion, castra_dir: Path
) -> None:
    folder = castra_dir / "centuriones" / "brutus"
    folder.mkdir()
    (folder / "prompt.md").write_text("# Brutus\n")
    names = ["vorenus", "pullo", "brutus"]
    replies = await legion.say(names, "SLEEP 0.5\nFOR memoria_pullo EXIT 3\nreport")
    assert replies["pullo"] == (
        "[pullo] An error occurred during processing. (the Claude CLI exited with code 3) "
        "Send /retry to run it again."
    )
    assert (
        replies["vorenus"]
        == replies["brutus"]
        == "ECHO: SLEEP 0.5\nFOR memoria_pullo EXIT 3\nreport"
    )
    [vorenus] = legion.processes("vorenus")
    [brutus] = legion.processes("brutus")
    # the two queries overlapped in time: each started before the other finished
    assert vorenus.prompt_times[0] < brutus.result_times[0]
    assert brutus.prompt_times[0] < vorenus.result_times[0]
    assert legion.manager.state("pullo") == "error"
    again = await legion.say(["pullo"], "are you back?")
    assert again == {"pullo": "ECHO: are you back?"}
    assert legion.manager.state("pullo") == "idle"


async def test_two_dispatches_to_one_centurio_run_in_arrival_order(legion: Legion) -> None:
    first = await legion.post("SLEEP 0.3\nfirst", ["vorenus"])
    second = await legion.post("second", ["vorenus"])
    statuses: list[str] = []

    async def on_status(status: Status) -> None:
        statuses.append(f"{status.agent}: {status_text(status)}")

    a = asyncio.create_task(legion.manager.answer("vorenus", first))
    await asyncio.sleep(0)
    b = asyncio.create_task(legion.manager.answer("vorenus", second, Callbacks(on_status)))
    assert (await a).text == "ECHO: SLEEP 0.3\nfirst"
    assert (await b).text == "ECHO: second"
    assert legion.prompts("vorenus")[0] == "SLEEP 0.3\nfirst"
    assert legion.prompts("vorenus")[1] == "second"
    assert statuses[0] == "vorenus: ⏳ Queued: vorenus is finishing an earlier request..."


async def test_cli_crash_mid_answer_then_the_next_dispatch_works(legion: Legion) -> None:
    crash = await legion.post("STDERR out of memory\nEXIT 3", ["vorenus"])
    outcome = await legion.manager.answer("vorenus", crash)
    assert outcome.kind == "error"
    assert re.search(r"the Claude CLI failed: .*out of memory", outcome.text)
    replies = await legion.say(["vorenus"], "still there?")
    assert replies == {"vorenus": "ECHO: still there?"}
    crashed, resumed = legion.processes("vorenus")
    assert resumed.resumed and resumed.session_id == crashed.session_id
    assert resumed.prompts == ["still there?"]


async def test_broken_json_marks_the_session_broken(legion: Legion) -> None:
    bad = await legion.post("BROKEN_JSON", ["vorenus"])
    outcome = await legion.manager.answer("vorenus", bad)
    assert outcome.kind == "error"
    assert "the Claude CLI sent output that is not JSON" in outcome.text
    assert await legion.say(["vorenus"], "ok?") == {"vorenus": "ECHO: ok?"}
    assert len(legion.processes("vorenus")) == 2


async def test_error_result_is_an_agent_error_and_is_recorded(legion: Legion) -> None:
    failing = await legion.post("ERROR overloaded", ["vorenus"])
    outcome = await legion.manager.answer("vorenus", failing)
    assert (outcome.kind, outcome.text) == (
        "error",
        "[vorenus] An error occurred during processing. (API Error: overloaded) "
        "Send /retry to run it again.",
    )
    await legion.say(["vorenus"], "fine now")
    assert len(legion.processes("vorenus")) == 1
    totals = (await legion.praetorium.records.usage_totals())["vorenus"]
    assert (totals.turns, totals.errors) == (2, 1)
    assert totals.input_tokens > 0
    assert totals.cost_usd > 0


async def test_status_lines_and_unparseable_messages(legion: Legion) -> None:
    lines: list[str] = []

    async def on_status(status: Status) -> None:
        assert status.agent == "vorenus"
        lines.append(status_text(status))

    nuntius = await legion.post(
        "THINK hmm\nMALFORMED\nCALL_TOOL memoria_vorenus list_acta {}\nREPLY " + "x" * 100,
        ["vorenus"],
    )
    outcome = await legion.manager.answer("vorenus", nuntius, Callbacks(on_status))
    assert outcome.text == "x" * 100
    assert lines == [
        "⏳ Thinking...",
        "⏳ Calling list_acta.",
        "⏳ Reading acta...",
        "⏳ TOOL_RESULT: No acta yet.",
        "⏳ " + "x" * 80 + "…",
    ]


async def test_interrupt_answers_as_interrupted_and_the_agent_goes_on(legion: Legion) -> None:
    slow = await legion.post("SLEEP 30\nslow", ["vorenus"])
    task = asyncio.create_task(legion.manager.answer("vorenus", slow))
    await until_asked(legion, "vorenus")
    assert legion.manager.state("vorenus") == "working"
    assert await legion.manager.interrupt("vorenus")
    outcome = await asyncio.wait_for(task, 10)
    assert (outcome.kind, outcome.text) == ("interrupted", "[vorenus] Interrupted.")
    assert legion.manager.state("vorenus") == "idle"
    assert not await legion.manager.interrupt("vorenus")
    replies = await legion.say(["vorenus"], "after")
    assert replies["vorenus"].endswith("[Request interrupted by user]\n\nafter")


async def test_reset_during_a_query_interrupts_it(legion: Legion) -> None:
    slow = await legion.post("SLEEP 30", ["vorenus"])
    task = asyncio.create_task(legion.manager.answer("vorenus", slow))
    await until_asked(legion, "vorenus")
    await legion.manager.reset("vorenus")
    outcome = await asyncio.wait_for(task, 10)
    assert (outcome.kind, outcome.text) == ("interrupted", "[vorenus] Interrupted.")
    assert legion.manager.state("vorenus") == "idle"


async def test_a_deleted_centurio_is_a_clear_error(legion: Legion, castra_dir: Path) -> None:
    shutil.rmtree(castra_dir / "centuriones" / "pullo")
    nuntius = await legion.post("@pullo hello", ["pullo"])
    [outcome] = (await legion.manager.dispatch_many(["pullo"], nuntius)).values()
    assert outcome.kind == "error"
    assert outcome.text.startswith("[pullo] cannot answer: ")
    assert "prompt file not found" in outcome.text


async def test_shutdown_leaves_no_cli_running(legion: Legion) -> None:
    await legion.say(["vorenus", "pullo"], "hello")
    pids = [p.pid for p in legion.fake_cli.processes()]
    assert len(pids) == 2
    await legion.manager.shutdown()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_agents_get_their_memoria_server_and_an_explicit_tool_list(
    legion: Legion, castra_dir: Path
) -> None:
    await legion.say(["vorenus"], "hi")
    [process] = legion.processes("vorenus")
    assert process.mcp_servers == ["memoria_vorenus"]
    assert process.option("--tools") == "Read,Write,Edit,Glob,Grep,Bash,WebSearch,WebFetch"
    settings = json.loads(process.option("--settings") or "{}")
    assert settings["sandbox"]["enabled"] is True  # Bash only ever sandboxed
    assert settings["sandbox"]["allowUnsandboxedCommands"] is False
    root = "/" + str(castra_dir.resolve())
    assert f"Read({root}/praetorium.db)" in settings["permissions"]["deny"]
    allowed = (process.option("--allowedTools") or "").split(",")
    assert "mcp__memoria_vorenus__write_commentarium" in allowed
    assert process.option("--setting-sources") == ""
    assert process.option("--permission-mode") == "bypassPermissions"
    assert Path(process.cwd) == (castra_dir / "centuriones" / "vorenus" / "workspace").resolve()
    assert process.system_prompt is not None
    assert process.system_prompt.startswith("# Vorenus")


def test_tracker_counts_cached_context_from_the_latest_call() -> None:
    tracker = SessionTokenTracker(max_input_tokens=150_000)
    tracker.observe_call(
        {"input_tokens": 10, "cache_read_input_tokens": 90_000, "cache_creation_input_tokens": 500}
    )
    tracker.observe_call(
        {"input_tokens": 40, "cache_read_input_tokens": 140_000, "cache_creation_input_tokens": 20}
    )
    result = ResultMessage(
        subtype="success",
        duration_ms=1,
        duration_api_ms=1,
        is_error=False,
        num_turns=2,
        session_id="s",
        usage={"input_tokens": 50, "cache_read_input_tokens": 230_000},
    )
    tracker.update(result)
    assert tracker.context_tokens == 140_060
    assert not tracker.should_reset()
    tracker.observe_call({"input_tokens": 1, "cache_read_input_tokens": 150_000})
    tracker.update(result)
    assert tracker.should_reset()
    assert tracker.turns == 2


def test_tracker_falls_back_on_the_result_usage() -> None:
    tracker = SessionTokenTracker(max_input_tokens=1000)
    tracker.update(
        ResultMessage(
            subtype="success",
            duration_ms=1,
            duration_api_ms=1,
            is_error=False,
            num_turns=1,
            session_id="s",
            usage={"input_tokens": 7, "cache_read_input_tokens": 1200},
        )
    )
    assert tracker.context_tokens == 1207
    assert tracker.should_reset()


async def test_a_new_centurio_is_hidden_from_the_others_shells_at_once(
    legion: Legion, castra_dir: Path
) -> None:
    await legion.say(["vorenus"], "hi")
    brutus = castra_dir / "centuriones" / "brutus"
    brutus.mkdir()
    (brutus / "prompt.md").write_text("# Brutus\nA new centurio.\n")
    assert await legion.say(["vorenus"], "and now?") == {"vorenus": "ECHO: and now?"}
    before, after = legion.processes("vorenus")
    rule = f"Read(/{brutus.resolve()}/**)"
    assert rule not in json.loads(before.option("--settings") or "{}")["permissions"]["deny"]
    assert rule in json.loads(after.option("--settings") or "{}")["permissions"]["deny"]
    assert not after.resumed  # a new session, given the conversation as history
    assert "hi" in after.prompts[0]


async def test_a_cli_one_result_ahead_never_shifts_the_answers(legion: Legion) -> None:
    # a stray result in the stream would give each request the answer of the one before
    replies = await legion.say(["vorenus"], "REPLY one\nEXTRA_RESULT stray")
    assert replies == {"vorenus": "one"}
    for word in ("two", "three"):
        assert await legion.say(["vorenus"], f"REPLY {word}") == {"vorenus": word}
    assert len(legion.fake_cli.processes()) == 2  # its CLI was started again, once
