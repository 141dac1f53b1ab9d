"""The legio command as a user runs it: init, check, and the not-yet-built run/console."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from legio.cli import check_config, default_castra_source, startup_problems
from legio.config import load_config

REPO = Path(__file__).parents[1]


def legio(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("TELEGRAM_BOT_TOKEN", "LEGIO_CONFIG")}
    return subprocess.run(
        [sys.executable, "-m", "legio", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_init_writes_config_and_castra_and_says_so(tmp_path: Path) -> None:
    result = legio("init", "demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    demo = tmp_path / "demo"
    assert f"created  {Path('demo') / 'legio.toml'}" in result.stdout
    assert (demo / "castra" / "legatus" / "prompt.md").read_text() == (
        REPO / "castra" / "legatus" / "prompt.md"
    ).read_text()
    for name in ("vorenus", "pullo"):
        assert (demo / "castra" / "centuriones" / name / "prompt.md").is_file()
    config = load_config(demo / "legio.toml")
    assert config.castra == demo / "castra"
    assert config.history_window == 50


def test_init_never_overwrites(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    mine = tmp_path / "demo" / "castra" / "legatus" / "prompt.md"
    mine.write_text("# My own Legatus\n")
    (tmp_path / "demo" / "legio.toml").write_text("history_window = 9\n")
    result = legio("init", "demo", cwd=tmp_path)
    assert result.returncode == 0
    assert "not overwritten" in result.stdout
    assert mine.read_text() == "# My own Legatus\n"
    assert (tmp_path / "demo" / "legio.toml").read_text() == "history_window = 9\n"


def test_check_on_a_fresh_init_reports_the_missing_token_and_fails(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    result = legio("check", "-c", "demo/legio.toml", cwd=tmp_path, env={"IS_SANDBOX": "1"})
    assert result.returncode == 1
    assert "✗ Telegram token: $TELEGRAM_BOT_TOKEN is not set" in result.stdout
    assert "@BotFather" in result.stdout
    assert "✗ Caesar: telegram.caesar_ids is empty" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_check_passes_with_token_and_caesar(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    config = tmp_path / "demo" / "legio.toml"
    config.write_text(config.read_text().replace("caesar_ids = []", "caesar_ids = [123456789]"))
    result = legio(
        "check",
        "-c",
        str(config),
        cwd=tmp_path,
        env={"TELEGRAM_BOT_TOKEN": "123:abc", "IS_SANDBOX": "1"},
    )
    assert result.returncode == 0, result.stdout
    assert "✓ Telegram token: $TELEGRAM_BOT_TOKEN is set" in result.stdout
    assert "✓ Caesar: Telegram user id(s) 123456789" in result.stdout
    assert "✓ Claude CLI: bundled with claude-agent-sdk" in result.stdout
    assert "✓ approvals: agents ask Caesar before Bash(git push:*), Bash(npm publish:*)" in (
        result.stdout
    )
    assert "Claude login: " in result.stdout
    assert "[approvals]" in config.read_text() and "[budget]" in config.read_text()
    assert "✓ centuriones: pullo (Researcher" in result.stdout
    assert result.stdout.rstrip().endswith("legio check: all good")


def test_check_warns_when_the_cli_would_compact_before_legio(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    path = tmp_path / "demo" / "legio.toml"
    quiet = check_config(load_config(path), is_root=False)
    assert not [line for line in quiet.lines if "max_input_tokens" in line]
    path.write_text(
        path.read_text().replace("max_input_tokens = 150000", "max_input_tokens = 180000")
    )
    [warning] = [
        line
        for line in check_config(load_config(path), is_root=False).lines
        if "max_input_tokens" in line
    ]
    assert "max_input_tokens is 180,000: the Claude CLI compacts a session itself" in warning


def test_check_finds_the_config_through_legio_config(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    result = legio("check", cwd=tmp_path, env={"LEGIO_CONFIG": "demo/legio.toml"})
    assert f"✓ config {tmp_path / 'demo' / 'legio.toml'}" in result.stdout


def test_check_without_any_config_says_how_to_make_one(tmp_path: Path) -> None:
    result = legio("check", cwd=tmp_path)
    assert result.returncode == 1
    assert "legio check:" in result.stderr
    assert "file not found: create one with `legio init`" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_of_a_bad_config_prints_the_problem_without_traceback(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    (tmp_path / "demo" / "legio.toml").write_text("history_window = -1\nfoo = 1\n")
    result = legio("check", "-c", "demo/legio.toml", cwd=tmp_path)
    assert result.returncode == 1
    assert "history_window: Input should be greater than or equal to 1 (got -1)" in result.stderr
    assert "foo: unknown key" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_reports_an_invalid_centurio_folder(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    bad = tmp_path / "demo" / "castra" / "centuriones" / "Bad Name"
    bad.mkdir()
    (bad / "prompt.md").write_text("# x\n")
    result = legio("check", "-c", "demo/legio.toml", cwd=tmp_path)
    assert result.returncode == 1
    assert (
        "✗ centuriones/Bad Name: ignored, 'Bad Name' is not a valid centurio name" in result.stdout
    )


def test_check_reports_a_missing_claude_cli(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    config = tmp_path / "demo" / "legio.toml"
    config.write_text(config.read_text().replace('cli_path = ""', 'cli_path = "/no/such/claude"'))
    result = legio("check", "-c", str(config), cwd=tmp_path)
    assert (
        "✗ Claude CLI: claude.cli_path = '/no/such/claude' is not an executable file"
        in result.stdout
    )


def test_root_with_bypass_permissions_needs_is_sandbox(
    castra_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "legio.toml"
    path.write_text("")
    config = load_config(path)
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    lines = "\n".join(check_config(config, is_root=True).lines)
    assert "running as root with bypassPermissions: the Claude CLI refuses this" in lines
    assert "IS_SANDBOX=1" in lines
    assert "running as root" not in "\n".join(check_config(config, is_root=False).lines)
    monkeypatch.setenv("IS_SANDBOX", "1")
    assert "running as root" not in "\n".join(check_config(config, is_root=True).lines)


def test_run_refuses_to_start_without_token_or_caesar(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    result = legio("run", "-c", "demo/legio.toml", cwd=tmp_path, env={"IS_SANDBOX": "1"})
    assert result.returncode == 1
    assert "legio run: cannot start:" in result.stderr
    assert "$TELEGRAM_BOT_TOKEN is empty: export the bot token from @BotFather" in result.stderr
    assert "telegram.caesar_ids is empty" in result.stderr
    assert "Traceback" not in result.stderr


def test_startup_refuses_root_with_bypass_permissions_unless_sandboxed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    legio("init", "demo", cwd=tmp_path)
    config = load_config(tmp_path / "demo" / "legio.toml")
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    [problem] = startup_problems(config, telegram=False, is_root=True)
    assert problem.startswith("running as root with bypassPermissions: the Claude CLI refuses")
    assert startup_problems(config, telegram=False, is_root=False) == []
    monkeypatch.setenv("IS_SANDBOX", "1")
    assert startup_problems(config, telegram=False, is_root=True) == []


def test_console_refuses_without_a_legatus_prompt(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    (tmp_path / "demo" / "castra" / "legatus" / "prompt.md").unlink()
    result = legio("console", "-c", "demo/legio.toml", cwd=tmp_path, env={"IS_SANDBOX": "1"})
    assert result.returncode == 1
    assert "the Legatus has no usable prompt:" in result.stderr
    assert "prompt file not found" in result.stderr


def test_console_script_is_installed(tmp_path: Path) -> None:
    script = shutil.which("legio", path=str(Path(sys.executable).parent))
    assert script is not None
    result = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == "legio 0.1.0"


def test_packaged_default_castra_is_the_repository_castra() -> None:
    source = default_castra_source()
    packaged = sorted(p.relative_to(source) for p in source.rglob("prompt.md"))
    assert [str(p) for p in packaged] == [
        "centuriones/pullo/prompt.md",
        "centuriones/vorenus/prompt.md",
        "legatus/prompt.md",
    ]


def test_check_prints_each_agents_policy_and_warns_about_bash_outside(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    prompt = tmp_path / "demo" / "castra" / "centuriones" / "pullo" / "prompt.md"
    outside = tmp_path / "projects"
    prompt.write_text(
        prompt.read_text().replace(
            "---\ndescription", f"---\ntools: [Read, Bash]\ncwd: {outside}\ndescription", 1
        )
    )
    result = legio(
        "check", "-c", "demo/legio.toml", cwd=tmp_path, env={"IS_SANDBOX": "1", "X_BOT_TOKEN": "s"}
    )
    out = result.stdout
    assert "Agent policy:" in out
    assert "hidden from agents: X_BOT_TOKEN" in out
    assert f"pullo: tools Read, Bash; workspace {outside}" in out
    assert "! pullo may run Bash with a workspace outside the castra" in out
    assert "vorenus: tools Read, Glob, Grep, WebSearch, WebFetch; workspace" in out
    assert "praetorium.db* (no access)" in out
    assert not (tmp_path / "demo" / "castra" / "centuriones" / "vorenus" / "workspace").exists()
