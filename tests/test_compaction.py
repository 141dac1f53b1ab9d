"""Compaction: summaries before a rebuild, /compact, overflow recovery, /context."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from legio.app import LegioApp
from legio.errors import AgentError, NothingToCompact
from legio.frontends.admin import Admin
from legio.frontends.views import context_lines
from legio.sessions.compaction import format_compaction_summary
from legio.sessions.turn import is_context_overflow
from legio.store.praetorium import Nuntius
from legio.store.records import Compaction
from tests.conftest import FakeCli
from tests.legion import Legion, fake_cli_config, history_ids, processes_of

REQUEST = "<compaction_request>"
SUMMARY = "<compaction_summary"
NOTICE = "<context_notice>"


async def everything(legion: Legion | LegioApp) -> list[Nuntius]:
    praetorium = legion.engine.praetorium if isinstance(legion, LegioApp) else legion.praetorium
    return list(reversed(await praetorium.get_history(10_000)))


def blocks_in_order(prompt: str, *markers: str) -> bool:
    positions = [prompt.index(m) for m in markers]
    return positions == sorted(positions)


LegionWith = Callable[..., AbstractAsyncContextManager[Legion]]


@pytest.fixture
def legion_with(castra_dir: Path, fake_cli: FakeCli) -> LegionWith:
    """``async with legion_with(**settings) as legion``: a Legion started and stopped."""

    @contextlib.asynccontextmanager
    async def start(**settings: Any) -> AsyncIterator[Legion]:
        legion = await Legion(castra_dir, fake_cli, **settings).start()
        try:
            yield legion
        finally:
            await legion.stop()

    return start


# ------------------------------------------------------------------ the token ceiling


async def test_ceiling_summary_is_stored_and_the_next_session_starts_from_it(
    legion_with: LegionWith,
) -> None:
    async with legion_with(max_input_tokens=1000, history_window=2) as legion:
        await legion.say(["vorenus"], "the bridge code is 4711")
        await legion.say(["vorenus"], "we ship on Friday")
        await legion.say(["vorenus"], "USAGE 10 5000 0")  # the session now holds 5,010 tokens
        report = await legion.manager.context_report("vorenus")
        assert report.session == "live" and report.compacts_first
        assert report.rebuild_reason == "its context passed 1,000 tokens"
        assert (
            "Session: live, but its context passed 1,000 tokens: it will first sum up its "
            "conversation, then start a new session" in context_lines(report)
        )
        before = await everything(legion)
        replies = await legion.say(["vorenus"], "what is the bridge code?")
        assert replies == {"vorenus": "ECHO: what is the bridge code?"}

        old, new = legion.processes("vorenus")
        assert REQUEST in old.prompts[-1]  # asked in its current session
        record = await legion.praetorium.records.latest_compaction("vorenus")
        assert record is not None
        assert (record.reason, record.tokens_before, record.session_id) == (
            "ceiling",
            5010,
            old.session_id,
        )
        assert "the bridge code is 4711" in record.summary

        # the new session: summary, then the kept tail, then the notice, then the text
        assert not new.resumed
        [first] = new.prompts
        assert first.startswith(SUMMARY)
        assert blocks_in_order(first, SUMMARY, "<praetorium", NOTICE, "what is the bridge code?")
        assert first.endswith("</context_notice>\n\nwhat is the bridge code?")
        kept = [n for n in before if n.seq >= record.first_kept_seq]
        assert history_ids(first) == [n.id for n in kept]
        assert [n.text for n in kept] == [
            "ECHO: we ship on Friday",  # the tail the old session had: its window of 2
            "USAGE 10 5000 0",
            "ECHO: USAGE 10 5000 0",  # and what came after
        ]
        # the fact older than the window reaches the new session only through the summary
        history = first[first.index("<praetorium") :]
        assert "code is 4711" not in history  # (its ids are random: "4711" may be in one)
        assert "code is 4711" in first[: first.index("</compaction_summary>")]

        # the durable history is untouched: the same nuntii, the same texts
        after = await everything(legion)
        assert after[: len(before)] == before
        assert [n.text for n in after[len(before) :]] == [
            "what is the bridge code?",
            "ECHO: what is the bridge code?",
        ]


async def test_a_failed_summary_falls_back_to_the_window_and_says_so(
    legion_with: LegionWith, caplog: pytest.LogCaptureFixture
) -> None:
    async with legion_with(max_input_tokens=1000) as legion:
        await legion.say(["vorenus"], "ON_COMPACT ERROR overloaded")
        await legion.say(["vorenus"], "USAGE 10 5000 0")
        with caplog.at_level(logging.WARNING, logger="legio.sessions"):
            replies = await legion.say(["vorenus"], "next")
        assert replies == {"vorenus": "ECHO: next"}
        assert await legion.praetorium.records.latest_compaction("vorenus") is None
        _old, new = legion.processes("vorenus")
        [first] = new.prompts
        assert SUMMARY not in first
        assert first.startswith("<praetorium")  # today's rebuild: the window and the notice
        assert NOTICE in first
        assert "ON_COMPACT ERROR overloaded" in first
        [status] = legion.manager.status(["vorenus"])
        assert status.compaction_failure is not None
        assert "overloaded" in status.compaction_failure
        assert any(
            "compaction failed" in r.getMessage() and "overloaded" in r.getMessage()
            for r in caplog.records
        )


async def test_a_cli_crash_while_summing_up_still_gives_a_new_session(
    legion_with: LegionWith,
) -> None:
    async with legion_with(max_input_tokens=1000) as legion:
        await legion.say(["vorenus"], "ON_COMPACT EXIT 3")
        await legion.say(["vorenus"], "USAGE 10 5000 0")
        replies = await legion.say(["vorenus"], "next")
        assert replies == {"vorenus": "ECHO: next"}
        old, new = legion.processes("vorenus")
        assert not new.resumed and new.session_id != old.session_id  # not the full one again
        assert NOTICE in new.prompts[0]
        [status] = legion.manager.status(["vorenus"])
        assert status.compaction_failure and "exited with code 3" in status.compaction_failure


# ------------------------------------------------------------------ /compact


async def test_compact_command_with_instructions_and_memoria(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    admin = Admin(app)
    await app.handle_message("@vorenus the bridge code is 4711")
    await app.handle_message(
        "@vorenus ON_COMPACT CALL_TOOL memoria_vorenus write_commentarium "
        '{"title": "bridge", "body": "code 4711"}'
    )
    before = await everything(app)

    pages = await admin.run("/compact vorenus keep the bridge code, drop the small talk")
    text = "\n".join(pages)
    assert text.startswith("Compacted vorenus: ")
    assert "its next message starts a new session" in text.lower()
    assert "the bridge code is 4711" in text  # Caesar sees the summary
    assert "INSTRUCTIONS: keep the bridge code, drop the small talk" in text

    [old] = processes_of(fake_cli, "vorenus")
    request = old.prompts[-1]
    assert request.startswith(REQUEST)
    assert (
        '<instructions source="caesar">keep the bridge code, drop the small talk</instructions>'
        in request
    )
    # it saved durable facts to its own memoria before answering
    [note] = app.engine.memoria.list_commentarii("vorenus").documents
    assert (note.title, note.body, note.author) == ("bridge", "code 4711", "vorenus")

    record = await app.engine.praetorium.records.latest_compaction("vorenus")
    assert record is not None
    assert (record.reason, record.instructions) == (
        "command",
        "keep the bridge code, drop the small talk",
    )
    assert await app.engine.praetorium.records.get_checkpoint("vorenus") is None
    assert await everything(app) == before  # /compact writes no nuntius

    await app.handle_message("@vorenus and now?")
    _old, new = processes_of(fake_cli, "vorenus")
    assert new.prompts[0].startswith(SUMMARY)
    assert "the bridge code is 4711" in new.prompts[0]


async def test_compact_answers_bad_requests_clearly(app: LegioApp) -> None:
    admin = Admin(app)
    [usage] = await admin.run("/compact")
    assert usage.startswith("Use /compact <name> [instructions], with one of: legatus, ")
    [unknown] = await admin.run("/compact brutus")
    assert unknown.startswith("No agent named 'brutus'. Use /compact <name>")
    [nothing] = await admin.run("/compact pullo")
    assert nothing == "Nothing to compact: pullo has no conversation to compact yet."
    await app.handle_message("@pullo ON_COMPACT ERROR overloaded")
    [failed] = await admin.run("/compact pullo")
    assert failed.startswith("Could not compact pullo: API Error: overloaded")
    assert failed.endswith("Its conversation is unchanged.")
    assert await app.engine.praetorium.records.get_checkpoint("pullo") is not None
    assert await app.engine.praetorium.records.latest_compaction("pullo") is None


async def test_compaction_survives_a_restart_and_reset_forgets_it(
    legion_with: LegionWith, castra_dir: Path
) -> None:
    async with legion_with() as legion:
        await legion.say(["vorenus"], "the eagle is in the north tower")
        await legion.restart()  # the session is resumed to write its summary
        record = await legion.manager.compact("vorenus")
        assert record.tokens_before > 0  # asked of the resumed CLI (no turn since the restart)
        first, resumed = legion.processes("vorenus")
        assert resumed.resumed and resumed.session_id == first.session_id
        assert REQUEST in resumed.prompts[-1]
        await legion.restart()
        await legion.say(["vorenus"], "where is the eagle?")
        third = legion.processes("vorenus")[-1]
        assert not third.resumed
        assert third.prompts[0].startswith(SUMMARY)
        assert "north tower" in third.prompts[0]

        assert await legion.manager.reset("vorenus")
        await legion.say(["vorenus"], "again")
        fourth = legion.processes("vorenus")[-1]
        assert SUMMARY not in fourth.prompts[0]
        assert await legion.praetorium.records.latest_compaction("vorenus") is None
        with sqlite3.connect(castra_dir / "praetorium.db") as db:
            kept = db.execute("SELECT id, summary FROM compactions").fetchall()
        assert kept == [(record.id, record.summary)]  # the record itself is kept


async def test_compact_on_an_agent_without_a_conversation_raises(legion_with: LegionWith) -> None:
    async with legion_with() as legion:
        with pytest.raises(NothingToCompact):
            await legion.manager.compact("vorenus")
        assert legion.processes("vorenus") == []


# ------------------------------------------------------------------ overflow


async def test_context_overflow_is_compacted_and_retried_once(legion_with: LegionWith) -> None:
    async with legion_with() as legion:
        await legion.say(["vorenus"], "the bridge code is 4711")
        # refused while the session holds more than 5 tokens: the old one does, a new one not
        replies = await legion.say(["vorenus"], "OVERFLOW 5\nwhat is the code?")
        assert replies == {"vorenus": "ECHO: OVERFLOW 5\nwhat is the code?"}
        old, new = legion.processes("vorenus")
        assert old.prompts[-1].startswith(REQUEST)
        record = await legion.praetorium.records.latest_compaction("vorenus")
        assert record is not None and record.reason == "overflow"
        assert "4711" in record.summary
        [retried] = new.prompts
        assert retried.startswith(SUMMARY)
        assert retried.endswith("OVERFLOW 5\nwhat is the code?")
        totals = (await legion.praetorium.records.usage_totals())["vorenus"]
        assert (totals.turns, totals.errors) == (4, 1)  # answer, refused, summary, retry


async def test_overflow_is_retried_only_once(legion_with: LegionWith) -> None:
    async with legion_with() as legion:
        replies = await legion.say(["vorenus"], "OVERFLOW")  # refused however short
        assert replies["vorenus"].startswith("[vorenus] An error occurred during processing.")
        assert "too long" in replies["vorenus"]
        assert len(legion.processes("vorenus")) == 2


async def test_overflow_with_a_failed_summary_still_answers(legion_with: LegionWith) -> None:
    async with legion_with() as legion:
        await legion.say(["vorenus"], "ON_COMPACT ERROR overloaded")
        replies = await legion.say(["vorenus"], "OVERFLOW 5\nstill there?")
        assert replies == {"vorenus": "ECHO: OVERFLOW 5\nstill there?"}
        _old, new = legion.processes("vorenus")
        assert SUMMARY not in new.prompts[0]
        assert "ON_COMPACT ERROR overloaded" in new.prompts[0]  # the window instead
        [status] = legion.manager.status(["vorenus"])
        assert status.compaction_failure and "overloaded" in status.compaction_failure


def test_what_counts_as_a_context_overflow() -> None:
    assert is_context_overflow("Prompt is too long", is_error=True)
    assert is_context_overflow("Prompt is too long", is_error=False)  # as the CLI reports it
    assert is_context_overflow(
        "API Error: 400 prompt is too long: 215000 tokens > 200000 maximum", is_error=True
    )
    assert not is_context_overflow("API Error: overloaded", is_error=True)
    assert not is_context_overflow(
        "Here is why your prompt is too long for the form: " + "x" * 400, is_error=False
    )
    assert not is_context_overflow(None, is_error=True)


def test_a_summary_longer_than_its_share_is_shortened_with_a_marker() -> None:
    summary = "Decisions: ship Friday. " + "fact " * 5000 + "Open: the auth review."
    record = Compaction(1, "vorenus", summary, 10, 90_000, None, "ceiling", None, datetime.now(UTC))
    block = format_compaction_summary(record, max_tokens=1000)
    assert block.startswith('<compaction_summary agent="vorenus" written="') and block.endswith(
        "Open: the auth review.</compaction_summary>"
    )
    assert 'tokens_before="90000"' in block
    assert "characters omitted: the whole summary is in the praetorium …]" in block
    assert "Decisions: ship Friday." in block
    assert len(block) < 1000 * 4 + 300
    whole = format_compaction_summary(record, max_tokens=100_000)
    assert "omitted" not in whole


# ------------------------------------------------------------------ /context


async def test_context_for_a_fresh_and_a_live_agent(app: LegioApp) -> None:
    admin = Admin(app)
    await app.handle_message("@all muster at dawn")
    await app.engine.sessions.reset("pullo")
    fresh = "\n".join(await admin.run("/context pullo"))
    assert fresh.startswith("🧭 Context of pullo: what its next message carries")
    assert "Session: none; the next message starts a new one" in fresh
    assert "Compaction summary: none" in fresh
    assert "History given: 2 nuntii" in fresh
    assert "Then a notice saying the session was restored" in fresh

    live = "\n".join(await admin.run("/context vorenus"))
    assert "Session: live, 1 turn, context " in live
    assert "New history since its last message: none" in live
    assert "Claude's own count: " in live and "of 200,000 tokens" in live
    assert "System prompt " in live and "Messages " in live

    await admin.run("/compact vorenus")
    compacted = "\n".join(await admin.run("/context vorenus"))
    assert "Session: none" in compacted
    assert "Compaction summary, given first: ~" in compacted
    assert "(command)" in compacted

    legatus_view = "\n".join(await admin.run("/context"))
    assert legatus_view.startswith("🧭 Context of legatus")
    assert "(of which the centuriones roster ~" in legatus_view
    assert "Status block with each message: ~" in legatus_view
    [unknown] = await admin.run("/context brutus")
    assert unknown.startswith("No agent named 'brutus'. Use /context <name>, one of: legatus")


async def test_status_shows_the_last_compaction(app: LegioApp) -> None:
    admin = Admin(app)
    await app.handle_message("@vorenus remember the eagle")
    await admin.run("/compact vorenus")
    status = "\n".join(await admin.run("/status"))
    assert "last compaction #1 of " in status
    assert "(command)" in status


async def test_the_summary_request_failing_on_the_cli_keeps_the_session_usable(
    legion_with: LegionWith,
) -> None:
    async with legion_with() as legion:
        await legion.say(["vorenus"], "ON_COMPACT EXIT 3")
        with pytest.raises(AgentError):
            await legion.manager.compact("vorenus")
        replies = await legion.say(["vorenus"], "after the crash")
        assert replies == {"vorenus": "ECHO: after the crash"}


async def test_context_after_a_restart_says_the_session_will_be_resumed(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    config = fake_cli_config(castra_dir, fake_cli)
    app = await LegioApp.open(config)
    try:
        await app.handle_message("@vorenus hello")
    finally:
        await app.close()
    app = await LegioApp.open(config)
    try:
        await app.engine.praetorium.post("caesar", "@all news", ["all"])
        view = "\n".join(await Admin(app).run("/context vorenus"))
        assert "Session: saved; the next message resumes it" in view
        assert "New history since its last message: 1 nuntius (#" in view
        assert "Claude's own count" not in view  # no CLI is running to ask
    finally:
        await app.close()


async def test_the_legatus_compacts_like_a_centurio(app: LegioApp, fake_cli: FakeCli) -> None:
    admin = Admin(app)
    await app.handle_message("the legion marches at dawn")
    [page] = (await admin.run("/compact legatus"))[:1]
    assert page.startswith("Compacted legatus: ")
    [reply] = await app.handle_message("when do we march?")
    assert reply.text == "ECHO: when do we march?"
    _old, new = processes_of(fake_cli, "legatus")
    [first] = new.prompts
    assert first.startswith('<compaction_summary agent="legatus"')
    assert "the legion marches at dawn" in first[: first.index("</compaction_summary>")]
    assert blocks_in_order(first, SUMMARY, "<praetorium", NOTICE, "<centurio_status>")
    assert first.endswith("</centurio_status>\n\nwhen do we march?")
    assert new.system_prompt is not None and "<centuriones>" in new.system_prompt
