"""Shared fixtures: a castra in a tmp folder, the fake Claude CLI's environment, and a
``LegioApp`` whose agents run the fake CLI."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from legio.app import LegioApp
from legio.cli import default_castra_source
from legio.fence.policy import _TMP_BASES, tmp_dir
from tests.fakes.cli_log import FAKE_CLI, CliProcess, read_cli_logs

CASTRA_TEMPLATE = default_castra_source()

# python-telegram-bot: take retry_after as a timedelta now (its announced future default)
os.environ.setdefault("PTB_TIMEDELTA", "1")
# loopback servers of the test bench must never go through a proxy
os.environ["NO_PROXY"] = "127.0.0.1,localhost"


@pytest.fixture
def castra_dir(tmp_path: Path) -> Iterator[Path]:
    """A copy of the default castra's prompt files; its agents' temporary folder
    (``fence.policy.tmp_dir``: one per castra, kept across a daemon's restarts) removed
    after the test, so the suite leaves no folder per test in the machine's ``/tmp``."""
    target = tmp_path / "castra"
    for prompt in CASTRA_TEMPLATE.rglob("prompt.md"):
        dest = target / prompt.relative_to(CASTRA_TEMPLATE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(prompt, dest)
    yield target
    agents_tmp = tmp_dir(target, "x").parent
    _TMP_BASES.pop(target.resolve(), None)
    shutil.rmtree(agents_tmp, ignore_errors=True)


@pytest.fixture
def write_config(tmp_path: Path, castra_dir: Path) -> Callable[[str], Path]:
    """Write a legio.toml beside the castra from TOML text; return its path."""

    def write(text: str = "") -> Path:
        path = tmp_path / "legio.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def fake_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCli:
    """The fake Claude CLI, logging into this test's tmp folder."""
    log_dir = tmp_path / "cli-log"
    state_dir = tmp_path / "cli-state"
    monkeypatch.setenv("FAKE_CLAUDE_LOG_DIR", str(log_dir))
    monkeypatch.setenv("FAKE_CLAUDE_STATE_DIR", str(state_dir))
    return FakeCli(FAKE_CLI, log_dir, state_dir)


class FakeCli:
    """Where the fake CLI is and what it logged."""

    def __init__(self, path: Path, log_dir: Path, state_dir: Path) -> None:
        self.path = path
        self.log_dir = log_dir
        self.state_dir = state_dir

    def processes(self) -> list[CliProcess]:
        return read_cli_logs(self.log_dir) if self.log_dir.exists() else []


@pytest.fixture
async def app(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[LegioApp]:
    """The engine, opened on a fresh castra with the fake CLI; closed after the test."""
    from tests.legion import fake_cli_config  # tests.legion imports this module

    opened = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    yield opened
    await opened.close()
