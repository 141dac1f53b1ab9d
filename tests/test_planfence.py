"""Plan mode as a fence, part by part: what a plan turn may run before Go (the shell's
read-only judge included), ``.plans/`` kept free of links, the plan file read by Legio
itself, and the plan's own ExitPlanMode refused when its file is not a plain file."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext

from legio.config import load_config
from legio.fence.safefs import UnsafePath
from legio.request import QuestionRequest
from legio.sessions.gatekeeper import Gatekeeper
from legio.sessions.planfence import PLAN_MAX, read_plan, refusal, scrub
from legio.sessions.spec import with_plans
from legio.shell.readonly import not_read_only

READ_ONLY_LINES = [
    "ls -la",
    "cat notes.txt | grep -n flag | head -5",
    "git status && git log --oneline -5 && git diff HEAD~1",
    "grep -rn TODO src 2>/dev/null",
    "find . -name '*.py' -newer setup.cfg",
    "wc -l $(ls *.py)",
    "git --version",
]
CHANGING_LINES = [
    "echo hi > f",
    "cat a >> b",
    "touch f",
    "rm -rf src",
    "sed -i s/a/b/ f",
    "find . -delete",
    "find . -exec rm {} +",
    "sort -o out.txt in.txt",
    "git commit -am wip",
    "git diff --output=patch.txt",
    "PATH=. ls",
    'python3 -c \'open("f","w")\'',
    "cat $(rm -f x)",
    "$CMD",
    "find . $OPTS",
    "ls | tee listing.txt",
]


@pytest.mark.parametrize("line", READ_ONLY_LINES)
def test_a_line_that_only_reads_may_run_in_a_plan_turn(line: str) -> None:
    assert not_read_only(line) == ""


@pytest.mark.parametrize("line", CHANGING_LINES)
def test_a_line_that_may_change_something_may_not(line: str) -> None:
    assert not_read_only(line) != ""


def test_a_plan_turn_may_read_ask_and_write_only_its_plan(tmp_path: Path) -> None:
    plans = tmp_path / ".plans"
    allowed = [
        ("Read", {"file_path": "main.py"}),
        ("Grep", {"pattern": "x"}),
        ("AskUserQuestion", {"questions": []}),
        ("ExitPlanMode", {}),
        ("Write", {"file_path": str(plans / "a-plan.md"), "content": "1."}),
        ("Edit", {"file_path": ".plans/a-plan.md", "old_string": "1", "new_string": "2"}),
        ("Bash", {"command": "git log -3"}),
    ]
    refused = [
        ("Write", {"file_path": "main.py", "content": "x"}),
        ("Write", {"file_path": str(plans / "a-plan.txt"), "content": "x"}),
        ("Write", {"file_path": ".plans/../main.md", "content": "x"}),
        ("Write", {"file_path": ".plans/sub/p.md", "content": "x"}),
        ("Edit", {"file_path": "main.py", "old_string": "a", "new_string": "b"}),
        ("NotebookEdit", {"notebook_path": "n.ipynb"}),
        ("Task", {"prompt": "write the code"}),
        ("mcp__legio__post", {"text": "hi"}),
        ("Bash", {"command": "echo hi > f"}),
    ]
    for tool, tool_input in allowed:
        assert refusal(plans, tool, tool_input) == "", (tool, tool_input)
    for tool, tool_input in refused:
        why = refusal(plans, tool, tool_input)
        assert "you are planning (plan mode), so you must not change anything" in why, tool


def test_scrub_removes_links_and_strays_never_what_they_point_at(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    plans = tmp_path / "ws" / ".plans"
    plans.mkdir(parents=True)
    (plans / "plan.md").write_text("1. read")
    (plans / "link.md").symlink_to(secret)
    (plans / "dangling.md").symlink_to(tmp_path / "nowhere" / "x.md")
    os.link(secret, plans / "hard.md")
    (plans / "dir.md").mkdir()
    (plans / "dir.md" / "inner").write_text("x")
    os.mkfifo(plans / "fifo.md")
    removed = scrub(tmp_path / "ws")
    assert sorted(removed) == ["dangling.md", "dir.md", "fifo.md", "hard.md", "link.md"]
    assert sorted(p.name for p in plans.iterdir()) == ["plan.md"]
    assert secret.read_text() == "s3cret" and not (tmp_path / "nowhere").exists()


def test_a_plans_link_is_replaced_by_a_folder_and_its_target_left_alone(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    elsewhere = tmp_path / "state"
    (workspace / ".plans").symlink_to(elsewhere)  # dangling: mkdir would fail on it
    settings = json.loads(with_plans(json.dumps({"permissions": {}}), workspace))
    assert settings["plansDirectory"] == ".plans"
    assert (workspace / ".plans").is_dir() and not (workspace / ".plans").is_symlink()
    assert not elsewhere.exists()  # not followed: nothing made where it pointed


def test_the_plan_is_read_only_from_a_plain_file_in_plans(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    plans = tmp_path / ".plans"
    plans.mkdir()
    (plans / "plan.md").write_text("1. Read main.py\n2. Add the flag")
    assert read_plan(plans, str(plans / "plan.md")) == "1. Read main.py\n2. Add the flag"
    (plans / "link.md").symlink_to(secret)
    os.link(secret, plans / "hard.md")
    (plans / "big.md").write_bytes(b"x" * (PLAN_MAX + 1))
    for name in ("link.md", "hard.md", "big.md", "../secret.txt", "/etc/hostname"):
        with pytest.raises(UnsafePath):
            read_plan(plans, name if name.startswith("/") else str(plans / name))


class Caesar:
    def __init__(self) -> None:
        self.questions: list[QuestionRequest] = []

    async def answer(self, request: QuestionRequest) -> dict[str, str]:
        self.questions.append(request)
        return {"?": "✅ Go"}


async def test_exit_plan_mode_with_a_linked_plan_file_is_refused_unasked(
    tmp_path: Path, write_config: Callable[[str], Path]
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    plans = tmp_path / "ws" / ".plans"
    plans.mkdir(parents=True)
    (plans / "plan.md").symlink_to(secret)
    gate = Gatekeeper(load_config(write_config("")))
    caesar = Caesar()
    gate.standing = lambda: caesar  # type: ignore[assignment,return-value]
    decide = gate.can_use_tool("vorenus", plans=plans)
    context = ToolPermissionContext(signal=None, suggestions=[])
    given = {"plan": "s3cret", "planFilePath": str(plans / "plan.md")}  # as the CLI read it
    result = await decide("ExitPlanMode", given, context)
    assert isinstance(result, PermissionResultDeny) and "refuses this plan" in result.message
    assert caesar.questions == [] and not (plans / "plan.md").is_symlink()

    (plans / "plan.md").write_text("1. Read main.py")  # the agent writes it again
    given = {"plan": "whatever the CLI read", "planFilePath": str(plans / "plan.md")}
    result = await decide("ExitPlanMode", given, context)
    assert isinstance(result, PermissionResultAllow)
    assert result.updated_input is not None and result.updated_input["plan"] == "1. Read main.py"
    [question] = caesar.questions
    assert question.questions[0]["question"] == "📋 vorenus's plan:\n\n1. Read main.py"
