"""Agent policy: no secrets in agents' environment, per-agent tools, the path guard."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.app import LegioApp
from legio.castra import Castra
from legio.errors import LegioError
from legio.fence.folders import workspace_problem
from legio.fence.guard import PathGuard
from legio.fence.policy import (
    denied_env_names,
    deny_rules,
    protected_entries,
    working_dir,
)
from legio.fence.sandbox import SandboxSupport, agent_options, effective_tools, sandbox_status_lines
from legio.frontends.admin import Admin
from legio.memoria import MemoriaStore
from tests.conftest import FakeCli
from tests.legion import fake_cli_config, processes_of

DENIED = "PreToolUse:{tool} hook error: Legio's policy: "


def give_tools(castra_dir: Path, name: str, tools: str, more: str = "") -> None:
    """Set frontmatter ``tools`` (and ``more`` YAML lines) in a centurio's prompt."""
    prompt = castra_dir / "centuriones" / name / "prompt.md"
    prompt.write_text(
        prompt.read_text().replace(
            "---\ndescription", f"---\ntools: [{tools}]\n{more}description", 1
        )
    )


@pytest.fixture
async def app(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[LegioApp]:
    give_tools(castra_dir, "vorenus", "Read, Write, Bash, Glob, Grep")
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    yield app
    await app.close()


async def use(app: LegioApp, tool: str, args: dict[str, object], who: str = "vorenus") -> str:
    [reply] = await app.handle_message(f"@{who} TOOL {tool} {json.dumps(args)}")
    return reply.text.split("━━━━━━━━━━━━\n", 1)[-1]


async def test_agents_never_see_the_telegram_token_or_denied_variables(
    castra_dir: Path, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:SECRET")
    monkeypatch.setenv("OTHER_BOT_TOKEN", "456:SECRET")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-keep")
    path = castra_dir.parent / "legio.toml"
    path.write_text(
        f'[claude]\ncli_path = "{fake_cli.path}"\nenv_deny = ["*_BOT_TOKEN", "AWS_*"]\n'
    )
    from legio.config import load_config

    app = await LegioApp.open(load_config(path))
    try:
        await app.handle_message('@vorenus TOOL Bash {"command": "env"}')
    finally:
        await app.close()
    [process] = processes_of(fake_cli, "vorenus")
    assert "TELEGRAM_BOT_TOKEN" not in process.env
    assert "OTHER_BOT_TOKEN" not in process.env
    assert "AWS_SECRET_ACCESS_KEY" not in process.env
    assert process.env["ANTHROPIC_API_KEY"] == "sk-keep"
    assert "PATH" in process.env


def test_denied_names_follow_patterns_but_keep_claude_credentials(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    config = fake_cli_config(castra_dir, fake_cli)
    env = {
        "TELEGRAM_BOT_TOKEN": "x",
        "MY_BOT_TOKEN": "y",
        "TELEGRAM_CHAT": "z",
        "ANTHROPIC_API_KEY": "k",
    }
    assert denied_env_names(config, env) == ["MY_BOT_TOKEN", "TELEGRAM_BOT_TOKEN", "TELEGRAM_CHAT"]


async def test_reading_another_centurios_commentarium_is_denied(
    app: LegioApp, castra_dir: Path
) -> None:
    note = MemoriaStore(castra_dir).write_commentarium("pullo", "Secret", "pullo's secret", "pullo")
    path = castra_dir / "centuriones" / "pullo" / "commentarii" / f"{note.name}.xml"
    text = await use(app, "Read", {"file_path": str(path)})
    assert text.startswith(
        "TOOL_RESULT: " + DENIED.format(tool="Read") + "pullo's folder is not yours"
    )
    assert "pullo's secret" not in text
    relative = await use(app, "Read", {"file_path": f"../../pullo/commentarii/{note.name}.xml"})
    assert "pullo's folder is not yours" in relative


async def test_writes_go_to_the_workspace_and_granted_folders_only(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    project = castra_dir.parent / "project"
    project.mkdir()
    give_tools(castra_dir, "vorenus", "Read, Write", f"add_dirs: [{project}]\n")
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    try:
        text = await use(app, "Write", {"file_path": "review.md", "content": "LGTM"})
        assert text.startswith("TOOL_RESULT: File created successfully")
        workspace = castra_dir / "centuriones" / "vorenus" / "workspace"
        assert (workspace / "review.md").read_text() == "LGTM"
        await use(app, "Write", {"file_path": str(project / "notes.txt"), "content": "ok"})
        assert (project / "notes.txt").read_text() == "ok"
        elsewhere = castra_dir.parent / "elsewhere.txt"
        text = await use(app, "Write", {"file_path": str(elsewhere), "content": "no"})
        assert "writes go to your workspace or a folder granted with add_dirs" in text
        assert not elsewhere.exists()
        [process] = processes_of(fake_cli, "vorenus")
        assert process.option("--add-dir") == str(project.resolve())
    finally:
        await app.close()


async def test_bash_reading_the_praetorium_is_denied(app: LegioApp) -> None:
    text = await use(app, "Bash", {"command": "cat ../../../praetorium.db"})
    assert "the praetorium (Legio's message store) is not for agents" in text
    text = await use(app, "Bash", {"command": "cd ../../.. && sqlite3 praetorium.db .dump"})
    assert DENIED.format(tool="Bash") in text
    text = await use(app, "Bash", {"command": "echo hi > ../prompt.md"})
    assert "prompts are Caesar's to edit" in text
    text = await use(app, "Bash", {"command": "echo fine"})
    assert text == "TOOL_RESULT: fine"


async def test_protected_files_and_tricks(
    app: LegioApp, castra_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="legio.fence.policy")
    castra = castra_dir.resolve()
    cases = [
        ("Read", {"file_path": str(castra / "praetorium.db-wal")}, "the praetorium"),
        (
            "Write",
            {"file_path": str(castra / "centuriones" / "vorenus" / "prompt.md"), "content": "x"},
            "prompts are Caesar's",
        ),
        (
            "Write",
            {"file_path": str(castra / "edicta" / "x.xml"), "content": "x"},
            "edicta change only",
        ),
        (
            "Write",
            {
                "file_path": str(castra / "centuriones" / "vorenus" / "commentarii" / "x.xml"),
                "content": "x",
            },
            "append-only",
        ),
        ("Read", {"file_path": str(castra / "legatus" / "prompt.md")}, "the Legatus's folder"),
        (
            "Read",
            {"file_path": str(castra.parent / "legio.toml")},
            "configuration is not for agents",
        ),
        ("Grep", {"pattern": "caesar", "path": str(castra)}, "contains Legio's castra"),
        ("Glob", {"pattern": "**/*", "path": "/"}, "contains Legio's castra"),
    ]
    for tool, args, expected in cases:
        text = await use(app, tool, args)
        assert DENIED.format(tool=tool) in text, (tool, args, text)
        assert expected in text, (tool, args, text)
    link = castra / "centuriones" / "vorenus" / "workspace" / "innocent.txt"
    link.symlink_to(castra / "praetorium.db")
    text = await use(app, "Read", {"file_path": str(link)})
    assert "the praetorium" in text
    denials = [r.getMessage() for r in caplog.records if r.getMessage().startswith("denied ")]
    assert denials[0].startswith(f"denied Read for vorenus on {castra / 'praetorium.db-wal'}: ")


async def test_reading_its_own_notes_and_shared_memoria_is_allowed(
    app: LegioApp, castra_dir: Path
) -> None:
    store = MemoriaStore(castra_dir)
    store.publish_actum("stack", "Stack", "Python and SQLite", "pullo")
    mine = store.write_commentarium("vorenus", "Mine", "my own note", "vorenus")
    text = await use(app, "Read", {"file_path": str(castra_dir / "acta" / "stack.xml")})
    assert "Python and SQLite" in text
    text = await use(app, "Read", {"file_path": f"../commentarii/{mine.name}.xml"})
    assert "my own note" in text


async def test_tools_outside_the_agents_set_do_not_exist(app: LegioApp, castra_dir: Path) -> None:
    give_tools(castra_dir, "pullo", "Read, WebSearch")
    text = await use(app, "Bash", {"command": "echo hi"}, who="pullo")
    assert text == "TOOL_RESULT: No such tool available: Bash"


async def test_memoria_tools_stay_usable_beside_the_guard(app: LegioApp) -> None:
    [reply] = await app.handle_message("@vorenus CALL_TOOL memoria_vorenus list_acta {}")
    assert reply.text.endswith("TOOL_RESULT: No acta yet.")


@pytest.mark.parametrize(
    ("agent", "path", "write", "allowed"),
    [
        ("vorenus", "centuriones/vorenus/workspace/a.txt", True, True),
        ("vorenus", "centuriones/vorenus/commentarii/n.xml", False, True),
        ("vorenus", "centuriones/vorenus/commentarii/n.xml", True, False),
        ("vorenus", "centuriones/pullo/workspace/a.txt", False, False),
        ("vorenus", "acta/a.xml", False, True),
        ("vorenus", "acta/a.xml", True, False),
        ("vorenus", "praetorium.db-shm", False, False),
        ("legatus", "centuriones/pullo/commentarii/n.xml", False, True),
        ("legatus", "centuriones/pullo/commentarii/n.xml", True, False),
        ("legatus", "praetorium.db", False, False),
        ("legatus", "legatus/workspace/plan.md", True, True),
        ("legatus", "legio.lock", False, False),
        ("vorenus", "attachments/ab12.png", False, False),
        ("legatus", "attachments/ab12.png", False, True),
        ("legatus", "attachments/ab12.png", True, False),
        ("vorenus", "centuriones/vorenus/workspace/inbox/1-a.png", False, True),
    ],
)
def test_guard_rules(castra_dir: Path, agent: str, path: str, write: bool, allowed: bool) -> None:
    guard = PathGuard(Castra(castra_dir), agent, castra_dir.parent / "legio.toml")
    reason = guard.check_path(castra_dir / path, write=write)
    assert (reason is None) == allowed, reason


def test_guard_lists_what_is_protected(castra_dir: Path) -> None:
    items = PathGuard(Castra(castra_dir), "vorenus", None).protected()
    assert any("praetorium.db* (no access)" in i for i in items)
    assert any("<other centuriones>" in i for i in items)


def test_workspace_is_created_and_is_the_default_cwd(castra_dir: Path) -> None:
    castra = Castra(castra_dir)
    path = working_dir(castra, castra.read_centurio("pullo"))
    assert path == (castra_dir / "centuriones" / "pullo" / "workspace").resolve()
    assert path.is_dir()
    assert os.access(path, os.W_OK)


# ------------------------------------------------------------------ deny rules and sandbox

BUBBLEWRAP = SandboxSupport(True, "bubblewrap")
MISSING = SandboxSupport(False, "bubblewrap and socat not installed")


def test_deny_rules_of_a_centurio_cover_the_protected_set_and_not_its_workspace(
    castra_dir: Path,
) -> None:
    castra = Castra(castra_dir)
    config_path = castra_dir.parent / "legio.toml"
    root = "/" + str(castra_dir.resolve())
    rules = deny_rules(protected_entries(castra, "vorenus", config_path))
    for kind in ("Read", "Edit"):
        for path in ("praetorium.db", "praetorium.db-wal", "praetorium.db-shm", "legio.lock"):
            assert f"{kind}({root}/{path})" in rules
        assert f"{kind}(/{config_path.resolve()})" in rules
        assert f"{kind}({root}/legatus/**)" in rules
        assert f"{kind}({root}/centuriones/pullo/**)" in rules
    for path in ("centuriones/vorenus/prompt.md", "centuriones/vorenus/commentarii/**"):
        assert f"Edit({root}/{path})" in rules
        assert f"Read({root}/{path})" not in rules  # readable: its own
    assert f"Edit({root}/edicta/**)" in rules
    assert f"Edit({root}/acta/**)" in rules
    assert f"Read({root}/attachments/**)" in rules and f"Edit({root}/attachments/**)" in rules
    assert all(rule.startswith(("Read(//", "Edit(//")) for rule in rules)
    workspace = working_dir(castra, castra.read_centurio("vorenus"), create=False)
    covering = [e for e in protected_entries(castra, "vorenus", config_path) if e.covers(workspace)]
    assert covering == []  # an Edit rule over the workspace would make it read-only


def test_deny_rules_of_the_legatus_let_it_read_the_centuriones(castra_dir: Path) -> None:
    castra = Castra(castra_dir)
    root = "/" + str(castra_dir.resolve())
    rules = deny_rules(protected_entries(castra, "legatus", None))
    assert f"Edit({root}/centuriones/**)" in rules
    assert f"Edit({root}/legatus/prompt.md)" in rules
    assert f"Read({root}/praetorium.db)" in rules
    assert f"Edit({root}/attachments/**)" in rules  # Legio's file store: read only
    assert not any(r.startswith(f"Read({root}/attachments") for r in rules)
    assert not any(r.startswith(f"Read({root}/centuriones") for r in rules)
    assert not any(r.startswith(f"Read({root}/legatus") for r in rules)


def test_the_hook_refuses_everything_the_rules_protect(castra_dir: Path) -> None:
    castra = Castra(castra_dir)
    config_path = castra_dir.parent / "legio.toml"
    for agent in ("vorenus", "legatus"):
        guard = PathGuard(castra, agent, config_path, workspace=castra_dir / "ws")
        for entry in protected_entries(castra, agent, config_path):
            target = entry.path / "x" if entry.folder else entry.path
            assert guard.check_path(target, write=True) == entry.reason
            assert (guard.check_path(target, write=False) is None) == entry.read


def test_agent_options_sandbox_bash_with_the_allow_list(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    config = fake_cli_config(
        castra_dir, fake_cli, '[sandbox]\nallowed_domains = ["pypi.org", "*.example.com"]'
    )
    castra = Castra(castra_dir)
    granted = [castra_dir.parent / "myapp"]
    options = agent_options(castra, config, "vorenus", ["Read", "Bash"], granted, BUBBLEWRAP)
    assert options["sandbox"] == {
        "enabled": True,
        "autoAllowBashIfSandboxed": True,
        "allowUnsandboxedCommands": False,
        "failIfUnavailable": True,  # a sandbox that cannot start refuses, never runs bare
        "network": {"allowedDomains": ["pypi.org", "*.example.com"], "strictAllowlist": True},
    }
    assert options["add_dirs"] == [str(castra_dir.parent / "myapp")]
    settings = json.loads(options["settings"])
    assert settings == {
        "permissions": {
            "deny": deny_rules(protected_entries(castra, "vorenus", config.path)),
        }
    }
    without_bash = agent_options(castra, config, "vorenus", ["Read"], (), BUBBLEWRAP)
    assert "sandbox" not in without_bash
    assert without_bash["settings"] == options["settings"]


def test_no_sandbox_means_no_bash_unless_mode_is_off(castra_dir: Path, fake_cli: FakeCli) -> None:
    castra = Castra(castra_dir)
    config = fake_cli_config(castra_dir, fake_cli)
    vorenus = castra.read_centurio("vorenus")
    assert "Bash" in effective_tools(vorenus, config, BUBBLEWRAP)
    assert "Bash" not in effective_tools(vorenus, config, MISSING)
    with pytest.raises(LegioError, match="apt install bubblewrap socat"):
        agent_options(castra, config, "vorenus", ["Bash"], (), MISSING)
    [line] = sandbox_status_lines(config, MISSING)
    assert line.startswith("⚠️ Bash is off for every agent: no shell sandbox")
    assert sandbox_status_lines(config, BUBBLEWRAP) == []

    off = fake_cli_config(castra_dir, fake_cli, '[sandbox]\nmode = "off"')
    assert "Bash" in effective_tools(vorenus, off, MISSING)
    assert "sandbox" not in agent_options(castra, off, "vorenus", ["Bash"], (), MISSING)
    [line] = sandbox_status_lines(off, BUBBLEWRAP)
    assert "Bash runs UNSANDBOXED" in line


async def test_without_a_sandbox_agents_start_without_bash_and_status_says_so(
    castra_dir: Path, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    python_only = castra_dir.parent / "bin"
    python_only.mkdir()
    (python_only / "python3").symlink_to(sys.executable)  # the fake CLI's interpreter
    monkeypatch.setenv("PATH", str(python_only))  # no bwrap, no socat
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    try:
        text = await use(app, "Bash", {"command": "echo hi"})
        assert text == "TOOL_RESULT: No such tool available: Bash"
        status = "\n".join(await Admin(app).run("/status"))
    finally:
        await app.close()
    assert (
        "⚠️ Bash is off for every agent: no shell sandbox (bubblewrap and socat not "
        "installed); install it with `apt install bubblewrap socat` and restart Legio"
    ) in status
    [process] = processes_of(fake_cli, "vorenus")
    assert "Bash" not in (process.option("--tools") or "")
    assert "--sandbox" not in " ".join(process.argv)


@pytest.mark.parametrize(
    ("cwd", "problem"),
    [
        ("../../..", "contains Legio's castra"),
        ("/", "contains Legio's castra"),
        ("commentarii", "points into a protected place (commentarii are append-only"),
        ("../pullo", "points into a protected place (pullo's folder is not yours"),
        ("notes", None),
    ],
)
def test_a_workspace_must_not_hold_the_castra_nor_sit_in_protected_places(
    castra_dir: Path, cwd: str, problem: str | None
) -> None:
    give_tools(castra_dir, "vorenus", "Read", f"cwd: {cwd}\n")
    castra = Castra(castra_dir)
    found = workspace_problem(castra, castra.read_centurio("vorenus"), None)
    assert (found is None) if problem is None else (problem in str(found)), found


def test_a_workspace_checked_once_is_checked_again_when_it_changes(castra_dir: Path) -> None:
    """The verdict is remembered, but a workspace replaced by a link into a protected
    place is seen at the next message."""
    give_tools(castra_dir, "vorenus", "Read", "cwd: work\n")
    castra = Castra(castra_dir)
    prompt = castra.read_centurio("vorenus")
    work = castra_dir / "centuriones" / "vorenus" / "work"
    work.mkdir()
    assert workspace_problem(castra, prompt, None) is None
    assert workspace_problem(castra, prompt, None) is None  # remembered
    work.rmdir()
    work.symlink_to(castra_dir / "centuriones" / "pullo")
    found = workspace_problem(castra, prompt, None)
    assert "points into a protected place (pullo's folder is not yours" in str(found)
    work.unlink()
    (castra_dir / "centuriones" / "vorenus" / "commentarii").mkdir(exist_ok=True)
    work.symlink_to(castra_dir / "centuriones" / "vorenus" / "commentarii")
    found = workspace_problem(castra, prompt, None)
    assert "points into a protected place (commentarii are append-only" in str(found)
