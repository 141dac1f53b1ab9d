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
    assert "✓ time zone of scheduled jobs: " in result.stdout
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


def frontmatter(castra: Path, name: str, lines: str) -> None:
    prompt = castra / "centuriones" / name / "prompt.md"
    text = prompt.read_text().replace("---\ndescription", f"---\n{lines}\ndescription", 1)
    prompt.write_text(text)


def test_check_prints_each_agents_tools_sandbox_folders_and_network(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    castra = tmp_path / "demo" / "castra"
    myapp = tmp_path / "code" / "myapp"
    myapp.mkdir(parents=True)
    frontmatter(castra, "pullo", f"tools: [Read, Bash]\nadd_dirs: [{myapp}]")
    (tmp_path / "demo" / "legio.toml").write_text(
        '[sandbox]\nallowed_domains = ["pypi.org", "*.example.com"]\n'
    )
    result = legio(
        "check", "-c", "demo/legio.toml", cwd=tmp_path, env={"IS_SANDBOX": "1", "X_BOT_TOKEN": "s"}
    )
    out = result.stdout
    assert "Agent policy:" in out
    assert "hidden from agents: X_BOT_TOKEN" in out
    assert "✓ shell sandbox: bubblewrap" in out
    pullo = out[out.index("  pullo: ") :].splitlines()[:4]
    assert pullo == [
        "  pullo: tools Read, Bash",
        "      sandbox: on (bubblewrap)",
        f"      writable: {castra.resolve()}/centuriones/pullo/workspace, {myapp.resolve()}",
        "      network for shell commands: pypi.org, *.example.com",
    ]
    vorenus = "  vorenus: tools Read, Write, Edit, Glob, Grep, Bash, WebSearch, WebFetch"
    assert vorenus in out
    assert "  legatus: tools WebSearch, WebFetch\n      sandbox: not needed (no Bash)" in out
    assert "praetorium.db* (no access)" in out
    assert not (castra / "centuriones" / "vorenus" / "workspace").exists()


def test_check_without_bubblewrap_says_what_to_install_and_drops_bash(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    empty = tmp_path / "no-tools"
    empty.mkdir()
    result = legio(
        "check", "-c", "demo/legio.toml", cwd=tmp_path, env={"IS_SANDBOX": "1", "PATH": str(empty)}
    )
    out = result.stdout
    assert (
        "! Bash is off for every agent: no shell sandbox (bubblewrap and socat not installed); "
        "install it with `apt install bubblewrap socat` and restart Legio"
    ) in out
    assert "  vorenus: tools Read, Write, Edit, Glob, Grep, WebSearch, WebFetch\n" in out
    assert "      sandbox: Bash removed: no sandbox (bubblewrap and socat not installed)" in out


def test_check_with_sandbox_off_warns_that_bash_is_unsandboxed(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    config = tmp_path / "demo" / "legio.toml"
    config.write_text('[sandbox]\nmode = "off"\n')
    out = legio("check", "-c", str(config), cwd=tmp_path, env={"IS_SANDBOX": "1"}).stdout
    assert '! Bash runs UNSANDBOXED ([sandbox] mode = "off")' in out
    assert '      sandbox: OFF ([sandbox] mode = "off"): Bash runs unsandboxed' in out
    assert "      network for shell commands: anything (unsandboxed)" in out


@pytest.mark.parametrize("where", ["castra", "parent", "inside"])
def test_add_dirs_touching_the_castra_are_refused_by_check_and_start_up(
    tmp_path: Path, where: str
) -> None:
    legio("init", "demo", cwd=tmp_path)
    castra = tmp_path / "demo" / "castra"
    target = {"castra": castra, "parent": tmp_path, "inside": castra / "acta"}[where]
    target.mkdir(exist_ok=True)
    frontmatter(castra, "vorenus", f"add_dirs: [{target}]")
    result = legio("check", "-c", "demo/legio.toml", cwd=tmp_path, env={"IS_SANDBOX": "1"})
    assert result.returncode == 1
    word = "is inside" if where == "inside" else "contains"
    expected = f"add_dirs '{target}' {word} Legio's castra ({castra.resolve()}); grant a folder"
    assert f"✗ {castra / 'centuriones' / 'vorenus' / 'prompt.md'}: {expected}" in result.stdout
    config = load_config(tmp_path / "demo" / "legio.toml")
    problems = startup_problems(config, telegram=False, is_root=False)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("where", ["project", "parent", "inside"])
def test_add_dirs_touching_a_project_are_refused(tmp_path: Path, where: str) -> None:
    legio("init", "demo", cwd=tmp_path)
    castra = tmp_path / "demo" / "castra"
    repo = tmp_path / "code" / "app"
    (repo / ".git").mkdir(parents=True)
    config_file = tmp_path / "demo" / "legio.toml"
    config_file.write_text(config_file.read_text() + f'\n[projects.app]\npath = "{repo}"\n')
    target = {"project": repo, "parent": tmp_path / "code", "inside": repo / ".git"}[where]
    frontmatter(castra, "vorenus", f"add_dirs: [{target}]")
    config = load_config(config_file)
    problems = startup_problems(config, telegram=False, is_root=False)
    word = "is inside" if where == "inside" else "contains"
    expected = f"add_dirs '{target}' {word} project app's repository ({repo.resolve()})"
    assert any(expected in p for p in problems), problems


def test_add_dirs_must_exist_and_be_absolute(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    castra = tmp_path / "demo" / "castra"
    frontmatter(castra, "vorenus", f"add_dirs: [{tmp_path / 'missing'}, code/app]")
    config = load_config(tmp_path / "demo" / "legio.toml")
    [problem] = startup_problems(config, telegram=False, is_root=False)
    assert problem.endswith("is not an existing folder; create it or remove it")
    (tmp_path / "missing").mkdir()
    [problem] = startup_problems(config, telegram=False, is_root=False)
    assert problem.endswith("add_dirs 'code/app' is not an absolute path; write e.g. ~/code/myapp")


def test_a_workspace_containing_the_castra_is_refused(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    frontmatter(tmp_path / "demo" / "castra", "pullo", f"cwd: {tmp_path}")
    result = legio("check", "-c", "demo/legio.toml", cwd=tmp_path, env={"IS_SANDBOX": "1"})
    assert result.returncode == 1
    assert f"cwd '{tmp_path}' contains Legio's castra" in result.stdout


def test_console_keeps_no_secret_in_the_environment_it_shows(tmp_path: Path) -> None:
    """``/proc/<pid>/environ`` shows the environment a process started with: the console
    starts itself again without the token and the ``env_deny`` variables."""
    legio("init", "demo", cwd=tmp_path)
    base = {k: v for k, v in os.environ.items() if k != "LEGIO_CONFIG"}
    env = {**base, "IS_SANDBOX": "1", "TELEGRAM_BOT_TOKEN": "123:CONSOLE", "X_BOT_TOKEN": "x1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "legio", "console", "-c", "demo/legio.toml"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()  # written after the restart
        assert banner.startswith("Legio console"), banner
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
        assert b"PATH=" in environ
        for secret in (b"123:CONSOLE", b"TELEGRAM_BOT_TOKEN", b"X_BOT_TOKEN"):
            assert secret not in environ
    finally:
        process.communicate("", timeout=30)
    assert process.returncode == 0


def test_a_token_hand_over_that_cannot_be_read_is_a_clear_error(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    result = legio(
        "run",
        "-c",
        "demo/legio.toml",
        cwd=tmp_path,
        env={"IS_SANDBOX": "1", "LEGIO_TOKEN_FD": "97"},
    )
    assert result.returncode == 1
    assert "legio run: could not read the bot token handed over at start" in result.stderr
    assert "start Legio with `legio run`" in result.stderr
    assert "Traceback" not in result.stderr


def test_init_writes_the_annotated_config_and_names_both_first_steps(tmp_path: Path) -> None:
    from legio.config import Config

    result = legio("init", "demo", cwd=tmp_path)
    written = (tmp_path / "demo" / "legio.toml").read_text()
    assert written == (REPO / "legio.toml").read_text()  # the same comments as the repo's
    for section in ("timezone =", "[approvals]", "[budget]", "[scheduler]", "[sandbox]"):
        assert section in written
    config = load_config(tmp_path / "demo" / "legio.toml")
    default = Config()
    assert config.model_dump(exclude={"castra", "path"}) == default.model_dump(
        exclude={"castra", "path"}
    )  # the annotated file says exactly the defaults
    assert "legio console" in result.stdout and "legio run" in result.stdout


def test_check_for_the_console_does_not_fail_for_telegram(tmp_path: Path) -> None:
    legio("init", "demo", cwd=tmp_path)
    result = legio(
        "check", "--console", "-c", "demo/legio.toml", cwd=tmp_path, env={"IS_SANDBOX": "1"}
    )
    assert "needed by `legio run` only" in result.stdout
    assert "✗ Telegram token" not in result.stdout and "✗ Caesar" not in result.stdout
    assert "legio check for `legio console`:" in result.stdout
    for command in ("init", "check", "run", "console"):
        helped = legio(command, "--help", cwd=tmp_path)
        assert helped.returncode == 0
        for line in helped.stdout.splitlines():  # every argument says what it is
            stripped = line.strip()
            if stripped.startswith(("-", "DIR")) and "  " not in stripped:
                nxt = helped.stdout.splitlines()[helped.stdout.splitlines().index(line) + 1]
                assert nxt.startswith(" " * 20), (command, line)
