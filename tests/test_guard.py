"""The path guard checks every path a file tool takes; what every agent may not read;
``env_deny`` over the keep-list; the Legatus's reach into the centuriones' folders;
warnings about unsandboxed Bash; the per-agent CLI config dir's login copy."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from legio.castra import Castra
from legio.cli import check_config
from legio.config import load_config
from legio.fence.cliconfig import adopt_transcript, copy_credentials, prepare_config_dir
from legio.fence.guard import PathGuard
from legio.fence.policy import case_insensitive, denied_env_names, deny_rules, protected_entries
from legio.fence.sandbox import SandboxSupport, announce_sandbox
from tests.conftest import FakeCli
from tests.legion import fake_cli_config

BUBBLEWRAP = SandboxSupport(True, "bubblewrap")


@pytest.fixture
def guard(castra_dir: Path) -> PathGuard:
    root = castra_dir.resolve()
    workspace = root / "centuriones" / "vorenus" / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    return PathGuard(Castra(castra_dir), "vorenus", None, workspace=workspace)


def test_glob_grep_and_notebook_paths_are_checked_wherever_they_are(guard: PathGuard) -> None:
    root = guard.root
    pullo = root / "centuriones" / "pullo"
    workspace = str(root / "centuriones" / "vorenus" / "workspace")
    refused = [
        ("Glob", {"pattern": f"{pullo}/**"}),  # absolute pattern, no path
        ("Glob", {"pattern": f"{pullo}/commentarii/*.xml", "path": workspace}),
        ("Glob", {"pattern": "../../pullo/**/*.xml"}),  # relative, out of the cwd
        ("Glob", {"pattern": f"{root}/**/praetorium.db"}),  # sweeps the castra
        ("Grep", {"pattern": "secret", "path": workspace, "glob": f"{pullo}/**"}),
        ("NotebookEdit", {"notebook_path": f"{pullo}/workspace/a.ipynb", "new_source": "x"}),
        ("NotebookRead", {"notebook_path": f"{pullo}/workspace/a.ipynb"}),
    ]
    for tool, args in refused:
        reason = guard.check(tool, args, workspace)
        assert reason, (tool, args)
    allowed = [
        ("Glob", {"pattern": "**/*.py"}),
        ("Glob", {"pattern": f"{workspace}/src/*.py"}),
        ("Grep", {"pattern": "/etc/passwd", "glob": "*.md"}),  # a regex, not a path
        ("Write", {"file_path": "notes.md", "content": "/etc/passwd is a file"}),
        ("Edit", {"file_path": "notes.md", "old_string": "/a", "new_string": "/b"}),
    ]
    for tool, args in allowed:
        assert guard.check(tool, args, workspace) is None, (tool, args)


def test_a_path_in_a_field_the_guard_does_not_know_is_refused(guard: PathGuard) -> None:
    workspace = str(guard.workspace)
    reason = guard.check("Read", {"file_path": "ok.md", "source_path": "/etc/shadow"}, workspace)
    assert reason and "'source_path' names a path Legio's guard does not check" in reason
    reason = guard.check("Glob", {"pattern": "*", "root": "../../pullo"}, workspace)
    assert reason and "'root'" in reason
    assert guard.check("Read", {"file_path": ["/etc/shadow"]}, workspace)  # not a string
    assert guard.check("Read", {"file_path": "ok.md", "limit": 10}, workspace) is None


def test_paths_are_compared_the_way_the_file_system_does(guard: PathGuard) -> None:
    root = guard.root
    db = root / "praetorium.db"
    db.write_bytes(b"SQLite format 3\x00 the praetorium")
    other = root / "Praetorium.DB"  # another name for the same file: a hard link
    os.link(db, other)
    assert guard.check_path(other, write=False), "the same inode is the same file"
    notes = root / "centuriones" / "pullo" / "commentarii"
    notes.mkdir(parents=True)
    (root / "pullo-notes").symlink_to(notes)
    assert guard.check_path(root / "pullo-notes" / "n.xml", write=False)

    # this volume tells case apart; on one that does not, names are casefolded
    assert case_insensitive(root) is False
    assert guard.check_path(root / "PRAETORIUM.DB-journal", write=False) is None  # another file
    guard.fold = True
    for spelled in ("PRAETORIUM.DB-journal", "Centuriones/PULLO/workspace/a.txt", "LEGIO.lock"):
        assert guard.check_path(root / spelled, write=False), spelled
    assert guard.check("Glob", {"pattern": f"{str(root).upper()}/**"}, str(guard.workspace))


def test_env_deny_wins_over_the_names_agents_would_keep(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    path = castra_dir.parent / "legio.toml"
    path.write_text(
        f'[claude]\ncli_path = "{fake_cli.path}"\n'
        'env_deny = ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_*", "PATH"]\n'
    )
    config = load_config(path)
    env = {
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": "u",
        "CLAUDE_CODE_OAUTH_TOKEN": "t",
        "PATH": "/bin",
        "TELEGRAM_BOT_TOKEN": "x",
    }
    assert denied_env_names(config, env) == [
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "PATH",
        "TELEGRAM_BOT_TOKEN",
    ]


def test_no_agent_may_read_cli_config_dirs_or_process_environments(
    castra_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, shared = tmp_path / "home", tmp_path / "elsewhere" / "claude-config"
    home.mkdir()
    shared.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(shared))
    castra = Castra(castra_dir)
    root = castra_dir.resolve()
    for agent in ("vorenus", "legatus"):
        rules = deny_rules(protected_entries(castra, agent, None))
        for target in (
            f"/{root}/state/**",
            f"/{home.resolve()}/.claude/**",
            f"/{home.resolve()}/.claude.json",
            f"/{shared.resolve()}/**",
        ):
            assert f"Read({target})" in rules, (agent, target)
            assert f"Edit({target})" in rules, (agent, target)
        # a glob in a rule breaks the sandbox (bubblewrap masks each file it matched,
        # pids its own /proc lacks): patterns are the hook's alone
        assert not any("*/" in rule or "*)" in rule.replace("/**)", "") for rule in rules)
        guard = PathGuard(castra, agent, None)
        for path in (
            root / "state" / "claude" / agent / "projects" / "-x" / "s.jsonl",
            root / "state" / "claude" / agent / ".credentials.json",
            home / ".claude" / ".credentials.json",
            home / ".claude.json",
            home / ".claude.json.backup",
            shared / "projects" / "-x" / "s.jsonl",
            Path(f"/proc/{os.getpid()}/environ"),
            Path("/proc/self/environ"),
        ):
            assert guard.check_path(path, write=False), (agent, path)


def test_the_legatus_reads_the_centuriones_folders_and_writes_none(castra_dir: Path) -> None:
    """As docs/security.md says: read only, its own workspace for writes, no CLI state."""
    castra = Castra(castra_dir)
    root = castra_dir.resolve()
    workspace = root / "legatus" / "workspace"
    guard = PathGuard(castra, "legatus", None, workspace=workspace)
    pullo = root / "centuriones" / "pullo"
    for path in ("workspace/report.md", "commentarii/n.xml", "prompt.md"):
        assert guard.check_path(pullo / path, write=False) is None, path
        assert guard.check_path(pullo / path, write=True), path
        assert guard.check_path(pullo / path, write=True, confine=False), path  # rules, too
    assert guard.check("Write", {"file_path": str(pullo / "workspace" / "x")}, str(workspace))
    assert guard.check_path(workspace / "plan.md", write=True) is None
    assert guard.check_path(root / "state" / "claude" / "pullo" / "a.jsonl", write=False)
    rules = deny_rules(protected_entries(castra, "legatus", None))
    assert f"Edit(/{root}/centuriones/**)" in rules
    assert f"Read(/{root}/state/**)" in rules


def test_check_and_start_up_name_the_agents_with_unsandboxed_bash(
    castra_dir: Path, fake_cli: FakeCli, caplog: pytest.LogCaptureFixture
) -> None:
    config = fake_cli_config(castra_dir, fake_cli, extra='[sandbox]\nmode = "off"')
    castra = Castra(castra_dir)
    lines = check_config(config, is_root=False).lines
    warning = 'Bash runs UNSANDBOXED ([sandbox] mode = "off") for pullo, vorenus'
    assert any(line.lstrip().startswith("!") and warning in line for line in lines), lines
    assert any("/state/ (every agent's Claude CLI config dir)" in line for line in lines)
    with caplog.at_level(logging.INFO, logger="legio.fence.sandbox"):
        announce_sandbox(config, castra)
    assert warning in caplog.text

    for name in ("pullo", "vorenus"):  # no agent has Bash: nothing to warn about
        prompt = castra_dir / "centuriones" / name / "prompt.md"
        prompt.write_text(prompt.read_text().replace("---\n", "---\ntools: [Read]\n", 1))
    caplog.clear()
    lines = check_config(load_config(config.path), is_root=False).lines
    assert not any("UNSANDBOXED" in line for line in lines), lines
    with caplog.at_level(logging.INFO, logger="legio.fence.sandbox"):
        announce_sandbox(config, castra, BUBBLEWRAP)
    assert "UNSANDBOXED" not in caplog.text
    assert "no agent has Bash" in caplog.text


def test_the_daemon_can_make_itself_non_dumpable() -> None:
    code = (
        "from legio.fence.handoff import non_dumpable; from legio.fence.launch import is_dumpable;"
        "print(is_dumpable(), non_dumpable(), is_dumpable())"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.split() == ["True", "True", "False"], out.stderr


def test_the_newest_login_is_copied_into_an_agents_config_dir(tmp_path: Path) -> None:
    castra_root, shared = tmp_path / "castra", tmp_path / "shared"
    shared.mkdir()
    (shared / ".credentials.json").write_text('{"v": "daemon"}')
    own = prepare_config_dir(castra_root, "vorenus", shared)
    assert (own / ".credentials.json").read_text() == '{"v": "daemon"}'
    assert (own / ".credentials.json").stat().st_mode & 0o777 == 0o600
    assert own.stat().st_mode & 0o777 == 0o700
    # pullo's CLI refreshed the login: vorenus's next start takes the newer one
    pullo = prepare_config_dir(castra_root, "pullo", shared)
    later = time.time() + 5
    (pullo / ".credentials.json").write_text('{"v": "refreshed"}')
    os.utime(pullo / ".credentials.json", (later, later))
    assert copy_credentials(shared, own, castra_root / "state" / "claude")
    assert (own / ".credentials.json").read_text() == '{"v": "refreshed"}'
    assert not copy_credentials(tmp_path / "none", tmp_path / "t", tmp_path / "no-root")


def test_a_transcript_and_its_side_folder_move_once(tmp_path: Path) -> None:
    shared, own = tmp_path / "shared", tmp_path / "own"
    project = shared / "projects" / "-srv-castra-centuriones-vorenus-workspace"
    (project / "s1" / "subagents").mkdir(parents=True)
    (project / "s1.jsonl").write_text("the thread")
    (project / "s2.jsonl").write_text("another agent's thread")
    assert adopt_transcript(shared, own, "s1")
    moved = own / "projects" / project.name
    assert (moved / "s1.jsonl").read_text() == "the thread"
    assert (moved / "s1" / "subagents").is_dir()
    assert (project / "s2.jsonl").exists()  # other sessions stay where they are
    assert adopt_transcript(shared, own, "s1")  # already there
    assert not adopt_transcript(shared, own, "unknown")


def test_every_claude_entry_and_other_agents_scratch_get_a_concrete_rule(
    castra_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox hides ``~/.claude.json.backup`` and the like one by one (a glob rule
    would break bubblewrap), and every other agent's ``TMPDIR``; a home Legio cannot
    list is an error, never an unprotected start."""
    from legio.errors import LegioError
    from legio.fence.policy import home_claude_entries, tmp_dir

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home / ".claude.json.backup").write_text("{}")
    (home / ".claude.json.backup.1764000000").write_text("{}")
    (home / ".claude-extra").mkdir()
    (home / ".bashrc").write_text("")
    castra = Castra(castra_dir)
    rules = deny_rules(protected_entries(castra, "vorenus", None))
    for name in (".claude.json.backup", ".claude.json.backup.1764000000"):
        assert f"Read(/{home.resolve() / name})" in rules
    assert f"Read(/{home.resolve() / '.claude-extra'}/**)" in rules
    assert not any(".bashrc" in rule for rule in rules)
    root = castra_dir.resolve()
    for other in ("pullo", "legatus"):
        assert f"Read(/{tmp_dir(root, other)}/**)" in rules
    assert f"Read(/{tmp_dir(root, 'vorenus')}/**)" not in rules  # its own
    assert len(str(tmp_dir(root, "vorenus"))) < 60  # the sandbox's sockets live under it

    not_a_folder = tmp_path / "home-file"
    not_a_folder.write_text("")
    with pytest.raises(LegioError, match="cannot list"):
        home_claude_entries(not_a_folder)


@pytest.mark.skipif(os.getuid() != 0, reason="taking a folder as another user needs root")
def test_another_user_taking_the_temp_folder_name_does_not_stop_the_agents(
    castra_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attacker's pass: another local user made ``/tmp/legio-<uid>-<digest>`` first (the
    sticky temporary folder: Legio cannot remove it), and no agent could start. The
    agents' temporary folders go to a fresh private folder instead, and the other agents'
    deny rules name that folder."""
    import hashlib
    import pwd
    import stat
    import tempfile

    from legio.fence.policy import tmp_dir
    from legio.sessions.opening import prepare_tmp_dir

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    root = castra_dir.resolve()
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:10]
    taken = temp.resolve() / f"legio-{os.getuid()}-{digest}"
    taken.mkdir(mode=0o755)
    nobody = pwd.getpwnam("nobody")
    os.chown(taken, nobody.pw_uid, nobody.pw_gid)

    folder = prepare_tmp_dir(root, "pullo")
    assert folder.parent != taken and folder.parent.parent == temp.resolve()
    for path in (folder, folder.parent):
        info = path.lstat()
        assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
    assert tmp_dir(root, "pullo") == folder and prepare_tmp_dir(root, "pullo") == folder
    rules = deny_rules(protected_entries(Castra(castra_dir), "vorenus", None))
    assert f"Read(/{folder}/**)" in rules
    assert len(folder.parent.name) <= len(taken.name) + 9  # short: sockets live under it
