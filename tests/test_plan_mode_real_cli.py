"""/plan with the real bundled Claude CLI on the fake Messages API: the turn runs in plan
mode, its ExitPlanMode reaches Caesar through ``can_use_tool``, Go leaves plan mode (the
next turn is a normal one)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from legio.sessions.pointers import nuntius_at
from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.gitrepo import git
from tests.legion import Legion
from tests.test_approvals_real_cli import APPROVALS, ScriptedCaesar
from tests.test_projects_real_cli import OnProject, on_project  # noqa: F401  (a fixture)

WRITE = {"file_path": "$PLAN_FILE", "content": "1. Read main.py\n2. Add the flag"}


async def test_a_plan_turn_asks_caesar_and_go_leaves_plan_mode(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    caesar = ScriptedCaesar()
    with FakeMessagesApi() as api:
        legion = await Legion(
            castra_dir,
            fake_cli,
            cli_path="",
            model=PINNED_MODEL,
            env=api.safe_cli_env(tmp_path / "cli"),
            asker=caesar,
            toml=APPROVALS.format(timeout=10),
        ).start()

        async def plan(text: str) -> str:
            nuntius = await legion.post(text, ["vorenus"])
            planned = dataclasses.replace(nuntius, plan=True)
            return (await legion.manager.dispatch_many(["vorenus"], planned))["vorenus"].text

        try:
            written = await plan(f"CALL_TOOL Write {json.dumps(WRITE)}")
            caesar.answers = [{"?": "✅ Go"}]
            went = await plan("CALL_TOOL ExitPlanMode {}")
            after = await legion.say(["vorenus"], "REPLY salve")
        finally:
            await legion.stop()
    assert "File created successfully" in written, written
    [question] = caesar.questions
    shown = question.questions[0]["question"]
    assert shown.startswith("📋 vorenus's plan:") and "2. Add the flag" in shown, shown
    assert [o["label"] for o in question.questions[0]["options"]] == ["✅ Go", "✏️ Change", "✖ Drop"]
    assert "approved" in went, went
    assert after["vorenus"] == "salve"
    lasts = [json.dumps(r["messages"][-1]) for r in api.requests]
    assert "Plan mode is active" in lasts[0]
    assert "Exited Plan Mode" in lasts[3]  # Go: the CLI left plan mode in the same turn
    assert "Plan mode is active" not in lasts[-1]  # salve: a normal turn


async def test_a_plan_on_a_project_copy_arrives_with_its_text_and_stays_out_of_git(
    on_project: OnProject,  # noqa: F811
) -> None:
    s = on_project
    await s.legion.manager.planning.choose("vorenus", True)  # /plan vorenus on

    async def ask(text: str) -> str:  # a plain request: planned first all the same
        nuntius = await s.legion.post(text, ["vorenus"], project="app")
        answer = (await s.legion.manager.dispatch_many(["vorenus"], nuntius))["vorenus"].text
        assert await s.legion.praetorium.repliers(nuntius.id) == set()  # a plan is no answer
        return answer

    written = await ask(f"CALL_TOOL Write {json.dumps(WRITE)}")
    s.caesar.answers = [{"?": "✅ Go"}]
    went = await ask("CALL_TOOL ExitPlanMode {}")
    assert "File created successfully" in written, written
    assert "approved" in went, went
    [question] = s.caesar.questions
    shown = question.questions[0]["question"]
    assert shown.startswith("📋 vorenus's plan:") and "2. Add the flag" in shown, shown
    assert question.plan and question.seq is not None
    stored = await nuntius_at(s.legion.praetorium, question.seq)  # kept in the praetorium
    assert stored is not None and stored.sender == "vorenus" and stored.text == shown
    assert "Plan mode is active" in json.dumps(s.api.requests[0]["messages"][-1])
    [plan_file] = (s.copies / ".plans").glob("*.md")  # in the copy, not in castra/state
    assert plan_file.read_text().startswith("1. Read main.py")
    assert git(s.copies, "status", "--porcelain") == ""  # never committed, never in a diff
    assert await s.legion.praetorium.cards.recent(5) == []  # nor on a work card
    state = s.legion.castra_dir / "state"
    assert not list(state.rglob("plans/*.md"))  # nothing written into castra/state
