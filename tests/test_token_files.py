"""Files holding Legio's own tokens are hidden from agents and checks (issue 44, deliver 9):
the usual places (``/etc/legio/secrets.env``, a ``.env`` beside ``legio.toml``, a unit's
``EnvironmentFile``) and any file, whatever its name, in the folders such files live in
whose bytes hold the bot token, the forge token or the Claude login."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from legio.castra import Castra
from legio.config import load_config
from legio.fence import jail, tokenfiles, vault
from legio.fence.guard import PathGuard
from legio.fence.jail import blank_file, borrowed, checks_dir, jail_argv, jail_support, pinned
from legio.fence.policy import deny_rules, protected_entries, scrub_environment
from legio.fence.sandbox import keys_report
from tests.test_checks import BenchFactory, bench  # noqa: F401 (the fixture)
from tests.test_sandbox_real_cli import BOT_TOKEN as SANDBOX_BOT
from tests.test_sandbox_real_cli import Sandboxed, sandboxed  # noqa: F401 (the fixture)

BOT = "123456:BOT-TOKEN-IN-A-FILE"
FORGE = "ghp_FORGE-TOKEN-IN-A-FILE"
LOGIN = "sk-ant-LOGIN-IN-A-FILE"


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The tokens in the daemon's environment, as systemd gives them; a home of its own."""
    monkeypatch.setattr(vault, "_KEPT", {})
    monkeypatch.setattr(tokenfiles, "_found", [])
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", BOT)
    monkeypatch.setenv("GITHUB_TOKEN", FORGE)
    monkeypatch.setenv("ANTHROPIC_API_KEY", LOGIN)
    return home


def test_files_holding_the_tokens_are_denied_to_agents(
    tokens: Path, castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    config = load_config(write_config(""))
    beside = config.path.parent  # type: ignore[union-attr]
    (beside / ".env").write_text(f"TELEGRAM_BOT_TOKEN={BOT}\n")
    (beside / "notes.txt").write_text(f"the forge: {FORGE}\n")  # a name that says nothing
    (beside / "plain.txt").write_text("nothing secret\n")
    (tokens / ".bashrc").write_text(f"export ANTHROPIC_API_KEY={LOGIN}\n")
    (tokens / ".bashrc-old").write_text(f"export ANTHROPIC_API_KEY={LOGIN}\n")
    scrub_environment(config)  # as LegioApp.open does before any CLI starts

    guard = PathGuard(Castra(castra_dir), "vorenus", config.path)
    for path in (beside / ".env", beside / "notes.txt", tokens / ".bashrc-old"):
        reason = guard.check("Read", {"file_path": str(path)})
        assert reason == tokenfiles.TOKEN_REASON, path
        assert guard.check("Bash", {"command": f"cat {path}"}), path
    assert guard.check("Read", {"file_path": str(beside / "plain.txt")}) is None
    rules = deny_rules(protected_entries(Castra(castra_dir), "vorenus", config.path))
    for path in (beside / "notes.txt", tokens / ".bashrc-old", Path("/etc/legio/secrets.env")):
        assert f"Read(/{path.resolve() if path.exists() else path})" in rules, path


def test_a_units_environment_file_is_a_token_file(
    tokens: Path, write_config: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    units = tokens / ".config" / "systemd" / "user"
    units.mkdir(parents=True)
    (units / "legio.service").write_text(
        "[Service]\nEnvironmentFile=-/srv/legio/private/tokens\nExecStart=legio run\n"
    )
    config = load_config(write_config(""))
    assert Path("/srv/legio/private/tokens") in tokenfiles.scan(config)


async def test_a_check_cannot_read_a_token_file_in_a_folder_it_sees(
    tokens: Path,
    bench: BenchFactory,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``/etc/legio/secrets.env`` is in ``/etc``, which a check's jail shows: a folder
    standing for it is made a system folder here; the file reads as empty in the jail."""
    b = await bench("true")
    etc_legio = tmp_path / "etc-legio"
    etc_legio.mkdir()
    (etc_legio / "secrets.env").write_text(f"TELEGRAM_BOT_TOKEN={BOT}\n")
    (etc_legio / "motd").write_text("hello from a system folder\n")
    monkeypatch.setattr(jail, "SYSTEM", (*jail.SYSTEM, str(etc_legio)))
    monkeypatch.setattr(tokenfiles, "FOLDERS", (etc_legio,))
    projects = b.checks.projects
    tokenfiles.remember(projects.config)
    copy = b.copy.resolve()
    base = checks_dir(b.root, "vorenus", "app")
    own = [base / "tmp", base / "cache", base / "home"]
    for folder in own:
        folder.mkdir(parents=True, exist_ok=True)
    look = f"cat {etc_legio}/motd {etc_legio}/secrets.env; echo ran"
    support = jail_support()
    fence = b.place.fence()
    with pinned(projects.castra.root, copy, fence) as pins:
        argv = jail_argv(
            *(support.detail, projects.castra, projects.config, "vorenus", copy, own, look),
            *(blank_file(base), fence, None, borrowed(copy, b.project), support.userns, pins),
        )
        done = await asyncio.to_thread(
            subprocess.run,
            argv,
            pass_fds=tuple(pins.values()),
            capture_output=True,
            text=True,
            timeout=60,
        )
    seen = done.stdout + done.stderr
    assert "hello from a system folder" in seen and "ran" in seen, seen
    assert BOT not in seen, seen


async def test_an_agents_sandboxed_shell_cannot_read_a_token_file(
    sandboxed: Sandboxed,  # noqa: F811
) -> None:
    """For real (the bundled CLI, sandboxed Bash): a file beside ``legio.toml`` holding the
    bot token, spelled so that no word names it, reads as nothing."""
    s = sandboxed
    beside = s.legion.config.path.parent  # type: ignore[union-attr]
    (beside / "notes.txt").write_text(f"remember: {SANDBOX_BOT}\n")
    (beside / "plain.txt").write_text("PLAIN-VISIBLE\n")
    found = tokenfiles.remember(s.legion.config)  # the fixture scrubbed before they existed
    assert (beside / "notes.txt") in found
    text = await s.bash(f"n=not; cat {beside}/${{n}}es.txt {beside}/plain.txt; echo RAN")
    assert "RAN" in text and "PLAIN-VISIBLE" in text, text
    assert SANDBOX_BOT not in text, text


def test_legio_check_names_the_token_files_it_hides(
    tokens: Path, castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    config = load_config(write_config(""))
    (config.path.parent / ".env").write_text(f"GITHUB_TOKEN={FORGE}\n")  # type: ignore[union-attr]
    lines = keys_report(config, Castra(castra_dir))
    said = [text for mark, text in lines if "Legio's tokens" in text]
    assert said == [
        f"hidden from agents and checks (they hold Legio's tokens): {config.path.parent / '.env'}"  # type: ignore[union-attr]
    ]
