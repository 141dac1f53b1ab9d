"""Private by default (issue 44, items 11 and 12): what Legio writes is its user's alone
(umask 077 from the start of every command), what an earlier Legio left readable is
tightened when the daemon starts (never through a link, never inside a git work tree),
and ``legio check`` warns about anything of Legio's other users can read: the castra,
``legio.toml``, and the secrets file systemd reads (``0600 root:root``)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from legio.app import LegioApp
from legio.cli import check_config
from legio.config import load_config
from tests.conftest import FakeCli
from tests.fakes.bot_api import FakeBotApi
from tests.legion import fake_cli_config
from tests.reliability.daemon import Daemon, write_daemon_config

SRC = str(Path(__file__).resolve().parents[1] / "src")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask (022) while the test makes its files, as an admin's shell has."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def leave_readable(castra: Path, outside: Path) -> dict[str, Path]:
    """A castra as an earlier Legio (umask 022) left it, with a script, a git work tree
    and a link out of the castra."""
    for folder, _, files in os.walk(castra):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(Path(folder) / name, 0o644)
    notes = castra / "centuriones" / "vorenus" / "commentarii"
    notes.mkdir(parents=True)
    os.chmod(notes, 0o755)
    (notes / "plan.md").write_text("the plan\n")
    script = castra / "edicta" / "deploy.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("#!/bin/sh\necho hi\n")
    os.chmod(script, 0o755)
    copy = castra / "centuriones" / "vorenus" / "projects" / "app"
    (copy / ".git").mkdir(parents=True)
    (copy / "src").mkdir()
    (copy / "src" / "served.html").write_text("<p>public</p>\n")
    os.chmod(copy, 0o755)
    outside.write_text("not Legio's\n")
    os.chmod(outside, 0o644)
    (castra / "edicta" / "link.md").symlink_to(outside)
    return {
        "notes": notes,
        "plan": notes / "plan.md",
        "script": script,
        "copy": copy,
        "inside_copy": copy / "src" / "served.html",
        "copy_src": copy / "src",
    }


async def test_the_daemon_starts_private_and_tightens_what_was_left_readable(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, open_umask: None
) -> None:
    outside = tmp_path / "outside.txt"
    made = leave_readable(castra_dir, outside)
    async with FakeBotApi() as api:
        config = write_daemon_config(castra_dir, api, str(fake_cli.path))
        os.chmod(config, 0o644)
        daemon = Daemon(config, api, fake_cli)
        try:
            await daemon.start()
            # what it made itself: the praetorium and its WAL, the log, the state folder
            for path in [
                castra_dir,
                castra_dir / "praetorium.db",
                castra_dir / "praetorium.db-wal",
                castra_dir / "state",
                castra_dir / "state" / "legio.log",
            ]:
                assert mode(path) & 0o077 == 0, f"{path} is {oct(mode(path))}"
            assert mode(castra_dir / "praetorium.db") == 0o600
            assert mode(castra_dir / "praetorium.db-wal") == 0o600
            # what an earlier Legio left readable
            assert mode(castra_dir) == 0o700
            assert mode(castra_dir / "legatus" / "prompt.md") == 0o600
            assert mode(made["notes"]) == 0o700
            assert mode(made["plan"]) == 0o600
            assert mode(made["script"]) == 0o700  # still runnable by its owner
            assert mode(config) == 0o600
            # a git work tree: its folder closed, its contents as the project has them
            assert mode(made["copy"]) == 0o700
            assert mode(made["copy_src"]) == 0o755
            assert mode(made["inside_copy"]) == 0o644
            # never through a link
            assert mode(outside) == 0o644
        finally:
            await daemon.terminate()


async def test_a_fresh_praetorium_is_private_even_under_an_open_umask(
    castra_dir: Path, fake_cli: FakeCli, open_umask: None
) -> None:
    castra = castra_dir
    assert not (castra / "praetorium.db").exists()
    app = await LegioApp.open(fake_cli_config(castra, fake_cli))
    try:
        [reply] = await app.handle_message("REPLY hello")
        assert reply.text == "hello"
        for suffix in ("", "-wal", "-shm"):
            path = castra / f"praetorium.db{suffix}"
            assert mode(path) == 0o600, f"{path} is {oct(mode(path))}"
        assert mode(castra) == 0o700
    finally:
        await app.close()


def test_legio_init_writes_private_files(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "legio", "init", "demo"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert done.returncode == 0, done.stderr
    demo = tmp_path / "demo"
    assert mode(demo / "legio.toml") == 0o600
    assert mode(demo / "castra") == 0o700
    assert mode(demo / "castra" / "legatus" / "prompt.md") == 0o600


def warnings(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("!")]


def make_castra_private(castra: Path) -> None:
    for folder, _, files in os.walk(castra):
        os.chmod(folder, 0o700)
        for name in files:
            os.chmod(Path(folder) / name, 0o600)


def test_legio_check_warns_about_what_other_users_can_read(
    castra_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_umask: None
) -> None:
    config_path = tmp_path / "legio.toml"
    config_path.write_text("")
    os.chmod(config_path, 0o644)
    make_castra_private(castra_dir)
    os.chmod(castra_dir / "legatus" / "prompt.md", 0o644)  # one file left readable
    secrets = tmp_path / "secrets.env"
    secrets.write_text("TELEGRAM_BOT_TOKEN=1234:ABCD\n")
    os.chmod(secrets, 0o644)
    monkeypatch.setenv("LEGIO_SECRETS_FILE", str(secrets))

    said = "\n".join(warnings(check_config(load_config(config_path)).lines))
    assert f"{config_path}" in said and "0644" in said
    assert f"{secrets}" in said and "0600 root:root" in said
    assert f"castra {castra_dir}: 1 file(s)" in said and "legatus/prompt.md 0644" in said
    assert "1234:ABCD" not in said

    # made private: no warning left about them
    os.chmod(config_path, 0o600)
    os.chmod(secrets, 0o600)
    make_castra_private(castra_dir)
    lines = check_config(load_config(config_path)).lines
    said = "\n".join(warnings(lines))
    assert str(config_path) not in said and "castra" not in said
    if os.geteuid() == 0:  # root owns it: as systemd wants it
        assert str(secrets) not in said
    else:  # Legio's own user owns it: its agents could read it
        assert str(secrets) in said
