"""/plan: a turn in the CLI's plan mode whose plan Caesar approves (✅ Go, ✏️ Change,
✖ Drop), through the console and the fake CLI; the path guard lets the plan be written."""

from __future__ import annotations

import json
import os
from pathlib import Path

from legio.castra import Castra
from legio.config import load_config
from legio.fence.cliconfig import cli_config_dir
from legio.fence.guard import PathGuard
from legio.projects.copies import Projects
from legio.projects.overview import diff
from tests.conftest import FakeCli
from tests.gitrepo import git, make_project
from tests.test_console import run_console

PLAN = "1. Read main.py\n2. Add the flag"
EXIT = f"/plan @vorenus TOOL ExitPlanMode {json.dumps({'plan': PLAN})}"


def modes(fake_cli: FakeCli) -> list[str]:
    """The permission modes Legio set on the agents' CLIs, in order."""
    return [
        str(m["request"].get("mode"))
        for p in fake_cli.processes()
        for m in p.received
        if m.get("type") == "control_request"
        and m["request"].get("subtype") == "set_permission_mode"
    ]


def test_go_carries_the_plan_out_and_the_next_turn_is_normal(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    result = run_console(castra_dir, fake_cli, f"{EXIT}\n1\n@vorenus salve\n")
    assert result.returncode == 0, result.stderr
    assert "📋 vorenus's plan:\n\n1. Read main.py\n2. Add the flag" in result.stdout
    assert "✅ Go" in result.stdout and "✏️ Change" in result.stdout and "✖ Drop" in result.stdout
    assert "TOOL_RESULT: User has approved your plan" in result.stdout
    assert "ECHO: @vorenus salve" in result.stdout
    [process] = [p for p in fake_cli.processes() if p.option("--permission-mode")]
    normal = str(process.option("--permission-mode"))
    assert modes(fake_cli) == ["plan", normal]  # plan for its turn, then back; salve: none


def test_change_sends_caesars_words_back_and_drop_stops(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    lines = f"{EXIT}\nread tests.py first\n{EXIT}\n3\n"
    result = run_console(castra_dir, fake_cli, lines)
    assert result.returncode == 0, result.stderr
    assert "Caesar wants this plan changed: read tests.py first" in result.stdout
    assert "User has approved your plan" not in result.stdout
    dropped = [m for p in fake_cli.processes() for m in p.sent if "dropped this plan" in str(m)]
    assert dropped  # the denial the CLI got, with interrupt: the turn ends
    assert modes(fake_cli).count("plan") == 2


def test_a_stop_while_the_plan_waits_ends_the_turn_and_plan_mode(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    result = run_console(castra_dir, fake_cli, f"{EXIT}\n/stop vorenus\n")
    assert result.returncode == 0, result.stderr
    assert "📋 vorenus's plan:" in result.stdout
    assert "User has approved your plan" not in result.stdout
    assert "plan changed" not in result.stdout  # /stop is a command, not Caesar's changes
    [process] = [p for p in fake_cli.processes() if p.option("--permission-mode")]
    assert modes(fake_cli) == ["plan", str(process.option("--permission-mode"))]


def test_a_plain_message_never_asks_for_a_plan(castra_dir: Path, fake_cli: FakeCli) -> None:
    result = run_console(castra_dir, fake_cli, "@vorenus salve\n")
    assert result.returncode == 0, result.stderr
    assert modes(fake_cli) == []


def test_the_guard_lets_the_cli_write_its_plan_and_nothing_else_there(castra_dir: Path) -> None:
    castra = Castra(castra_dir)
    workspace = castra.root.resolve() / "centuriones" / "vorenus" / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    guard = PathGuard(castra, "vorenus", None, workspace=workspace)
    plans = cli_config_dir(castra.root.resolve(), "vorenus") / "plans"
    plans.mkdir(parents=True)
    write = {"file_path": str(plans / "bold-plan.md"), "content": "1. go"}
    assert guard.check("Write", write) is None
    assert guard.check("Edit", {**write, "old_string": "a", "new_string": "b"}) is None
    refused = [
        {"file_path": str(plans / "x.sh"), "content": "1"},  # not a plan
        {"file_path": str(plans / ".." / "settings.md"), "content": "1"},  # the config dir
        {"file_path": str(plans / "sub" / "x.md"), "content": "1"},
        {"file_path": str(cli_config_dir(castra.root, "pullo") / "plans" / "x.md")},
    ]
    os.symlink(plans.parent / "CLAUDE.md", plans / "link.md")  # out of plans/
    refused.append({"file_path": str(plans / "link.md"), "content": "1"})
    for call in refused:
        assert guard.check("Write", call) is not None, call
    assert guard.check("Read", {"file_path": str(plans / "bold-plan.md")}) is not None


async def test_a_copys_plans_are_ignored_by_git_also_in_a_copy_made_before(
    castra_dir: Path, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    path = castra_dir.parent / "legio.toml"
    path.write_text(f'[projects.app]\npath = "{project}"\n')
    config = load_config(path)
    projects = Projects(config, Castra(config.castra))
    place = await projects.place("vorenus", "app")
    (place.copy / ".plans").mkdir()
    (place.copy / ".plans" / "bold.md").write_text("1. go\n")
    assert git(place.copy, "status", "--porcelain") == ""
    report = await diff(projects, place)  # /diff, through Legio's own git: nothing new
    assert report.copy.uncommitted == [] and report.copy.count == 0
    exclude = place.copy / ".git" / "info" / "exclude"
    exclude.write_text("/.idea")  # a copy of an older Legio: no line for plans, no newline
    assert ".plans/" in git(place.copy, "status", "--porcelain")
    await projects.place("vorenus", "app")  # its next request
    assert exclude.read_text() == "/.idea\n/.plans/\n"
    assert git(place.copy, "status", "--porcelain") == ""
    await projects.place("vorenus", "app")
    assert exclude.read_text().count(".plans") == 1
    outside = tmp_path / "outside"
    outside.write_text("keep\n")
    exclude.unlink()
    exclude.symlink_to(outside)  # never followed
    await projects.place("vorenus", "app")
    assert outside.read_text() == "keep\n"


def test_plan_vorenus_on_in_the_console_is_kept_and_plan_requests_still_run(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    plain = EXIT.removeprefix("/plan ")  # no /plan: vorenus plans first all the same
    lines = f"/plan vorenus on\n{plain}\n1\n/plan vorenus fix the bug\n/status\n"
    result = run_console(castra_dir, fake_cli, lines)
    assert result.returncode == 0, result.stderr
    assert "📋 vorenus now plans every request of yours first" in result.stdout
    assert "📋 vorenus's plan:" in result.stdout
    assert "User has approved your plan" in result.stdout
    assert "legatus: ECHO: vorenus fix the bug" in result.stdout  # a /plan request, as before
    assert "📋 plan first (/plan vorenus off ends it)" in result.stdout
    assert modes(fake_cli).count("plan") == 2
    result = run_console(castra_dir, fake_cli, "/plan\n/plan pullo\n/plan vorenus off\n")
    assert "Planning first: vorenus." in result.stdout  # kept across the restart
    assert "pullo does not plan first." in result.stdout
    assert "vorenus no longer plans first" in result.stdout


def test_the_console_shows_the_plan_with_its_hidden_characters_visible(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    plan = "1. Fix the typo\n<!-- hidden -->\nzero\u200bwidth \u202eevil\u202c"
    exit_plan = f"/plan @vorenus TOOL ExitPlanMode {json.dumps({'plan': plan})}"
    result = run_console(castra_dir, fake_cli, f"{exit_plan}\n3\n")
    assert result.returncode == 0, result.stderr
    shown = "📋 vorenus's plan:\n\n1. Fix the typo\n<!-- hidden -->\n"
    assert shown + "zero⟨U+200B⟩width ⟨U+202E⟩evil⟨U+202C⟩" in result.stdout, result.stdout
    assert "\u200b" not in result.stdout and "\u202e" not in result.stdout
