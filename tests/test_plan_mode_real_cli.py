"""/plan with the real bundled Claude CLI on the fake Messages API: the turn runs in plan
mode, its ExitPlanMode reaches Caesar through ``can_use_tool``, Go leaves plan mode (the
next turn is a normal one)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
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


# ------------------------------------------------------------------ plan mode as a fence

SECRET = "ghp_SECRET-TOKEN-47"


@contextlib.asynccontextmanager
async def planning_legion(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> AsyncIterator[tuple[Legion, FakeMessagesApi, ScriptedCaesar]]:
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
        try:
            yield legion, api, caesar
        finally:
            await legion.stop()


async def plan_turn(legion: Legion, text: str) -> str:
    """One /plan request to vorenus; its answer."""
    nuntius = await legion.post(text, ["vorenus"])
    planned = dataclasses.replace(nuntius, plan=True)
    return (await legion.manager.dispatch_many(["vorenus"], planned))["vorenus"].text


def call(tool: str, **tool_input: str) -> str:
    return f"CALL_TOOL {tool} {json.dumps(tool_input)}"


async def test_before_go_a_plan_turn_changes_nothing(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    workspace = castra_dir / "centuriones" / "vorenus" / "workspace"
    async with planning_legion(castra_dir, fake_cli, tmp_path) as (legion, _, caesar):
        workspace.mkdir(parents=True, exist_ok=True)
        (workspace / "notes.txt").write_text("old\n")
        wrote = await plan_turn(legion, call("Write", file_path="evil.txt", content="pwned"))
        read = await plan_turn(legion, call("Read", file_path="notes.txt"))  # Edit needs it
        edited = await plan_turn(
            legion, call("Edit", file_path="notes.txt", old_string="old", new_string="new")
        )
        echoed = await plan_turn(legion, call("Bash", command="echo hi > bash.txt"))
        touched = await plan_turn(legion, call("Bash", command="touch touched.txt"))  # asked
        listed = await plan_turn(legion, call("Bash", command="ls; git --version 2>&1"))
        after = await legion.say(["vorenus"], call("Write", file_path="later.txt", content="ok"))
    for answer in (wrote, edited, echoed, touched):
        assert "you are planning (plan mode), so you must not change anything" in answer, answer
    assert not (workspace / "evil.txt").exists() and not (workspace / "bash.txt").exists()
    assert not (workspace / "touched.txt").exists()
    assert (workspace / "notes.txt").read_text() == "old\n"
    assert caesar.requests == []  # refused outright, never put to Caesar
    assert "notes.txt" in listed and "git version" in listed, listed  # reading is planning
    assert "old" in read, read
    assert "File created successfully" in after["vorenus"]  # a normal turn: no fence
    assert (workspace / "later.txt").read_text() == "ok"


async def test_a_plan_file_that_is_a_link_reaches_neither_caesar_nor_the_model(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    secret = castra_dir / "state" / "tok.md"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text(f"{SECRET}\n")
    async with planning_legion(castra_dir, fake_cli, tmp_path) as (legion, api, caesar):
        named = await plan_turn(legion, call("Bash", command="echo $PLAN_FILE"))
        plan_file = Path(named.removeprefix("TOOL_RESULT:").strip())
        assert plan_file.parent.name == ".plans", named
        plan_file.symlink_to(secret)  # as a shell outside the sandbox could plant it
        caesar.answers = [{"?": "✅ Go"}]
        went = await plan_turn(legion, "CALL_TOOL ExitPlanMode {}")
        history = await legion.praetorium.get_history(50)
        await legion.manager.reset("vorenus")
        await legion.say(["vorenus"], "REPLY salve")  # a fresh session reads the praetorium
    assert "Legio refuses this plan" in went and ".plans/" in went, went
    assert caesar.questions == []  # never shown to Caesar
    assert not plan_file.is_symlink() and not plan_file.exists()  # the link itself removed
    assert secret.read_text() == f"{SECRET}\n"  # what it pointed at untouched
    assert not [n for n in history if SECRET in n.text]
    assert not [r for r in api.requests if SECRET in json.dumps(r)]  # the model never saw it


async def test_the_shell_cannot_plant_a_link_in_the_plans_folder(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    workspace = castra_dir / "centuriones" / "vorenus" / "workspace"
    async with planning_legion(castra_dir, fake_cli, tmp_path) as (legion, _, _):
        line = "ln -s /etc/hostname .plans/planted.md; echo rc=$?; ls -a .plans"
        answer = (await legion.say(["vorenus"], call("Bash", command=line)))["vorenus"]
    assert "rc=" in answer and "rc=0" not in answer, answer  # its sandbox: .plans/ read-only
    assert not (workspace / ".plans" / "planted.md").is_symlink()
