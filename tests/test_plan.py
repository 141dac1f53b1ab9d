"""Plan limits and logins: told to Caesar once, work waits for the reset and goes on by itself."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from legio.app import LegioApp
from legio.config import load_config
from legio.frontends.admin import Admin
from legio.frontends.statusview import status_text
from legio.limits.plan import PlanHealth, login_state
from legio.request import Callbacks, Status
from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.legion import Told, fake_cli_config

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
RESET = NOW + timedelta(hours=2)


class Clock:
    """A clock that moves only when told; sleepers wake when it passes their time."""

    def __init__(self) -> None:
        self.now = NOW
        self.moved = asyncio.Event()
        self.sleepers = 0

    def __call__(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        until = self.now + timedelta(seconds=seconds)
        self.sleepers += 1
        try:
            while self.now < until:
                self.moved.clear()
                await self.moved.wait()
        finally:
            self.sleepers -= 1

    def advance(self, to: datetime) -> None:
        self.now = to
        self.moved.set()


async def until(condition: object, what: str) -> None:
    for _ in range(500):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


async def test_a_plan_limit_is_told_once_and_work_resumes_after_the_reset(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    clock = Clock()
    health = PlanHealth(clock=clock, sleep=clock.sleep)
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli), health=health)
    told: list[str] = []

    async def notify(text: str) -> None:
        told.append(text)

    await app.attach(Told(notify))
    try:
        limit = f"LIMIT_FIRST rate_limit {int(RESET.timestamp())} a\nREPLY done"
        first = asyncio.create_task(app.handle_message(f"@vorenus {limit}"))
        await until(lambda: clock.sleepers == 1, "the turn waits for the reset")
        second = asyncio.create_task(app.handle_message("@pullo REPLY later"))
        await until(lambda: clock.sleepers == 2, "the next request waits too")
        assert told == [
            "⏸ The five-hour limit is reached; it resets at 2026-11-23 14:00 UTC. "
            "Work waits and goes on by itself then."
        ]
        page = "\n".join(await Admin(app).run("/usage"))
        assert "five-hour: rejected, 100% used, resets 2026-11-23 14:00 UTC" in page
        assert not first.done() and not second.done()

        clock.advance(RESET)
        [answer] = await first
        assert answer.text.endswith("done")
        [later] = await second
        assert later.text.endswith("later")
        assert len(told) == 1
        assert health.fault is None
    finally:
        await app.close()


async def test_an_expired_login_is_told_once_and_holds_work_until_retry(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    told: list[str] = []

    async def notify(text: str) -> None:
        told.append(text)

    await app.attach(Told(notify))
    try:
        [failed] = await app.handle_message(
            "@vorenus LIMIT_FIRST authentication_failed 0 b\nREPLY first"
        )
        assert failed.kind == "held"
        [held] = await app.handle_message("@vorenus REPLY after")
        assert held.kind == "held"
        assert "claude login" in held.text and "/retry" in held.text
        assert failed.text.startswith("⏸ vorenus stopped: 🔑")  # the one message it says
        assert told == []
        replies = await app.retry()  # the login is fixed: both run, in order
        assert [r.text.rsplit("\n", 1)[-1] for r in replies] == ["first", "after"]
    finally:
        await app.close()


def test_legio_check_reports_the_login(tmp_path: Path) -> None:
    assert login_state({"ANTHROPIC_API_KEY": "k"})[0]
    ok, text = login_state({"CLAUDE_CONFIG_DIR": str(tmp_path)})
    assert not ok and "claude login" in text
    expired = {"claudeAiOauth": {"accessToken": "x", "expiresAt": 1000}}
    (tmp_path / ".credentials.json").write_text(json.dumps(expired))
    ok, text = login_state({"CLAUDE_CONFIG_DIR": str(tmp_path)})
    assert not ok and "has expired" in text


async def test_the_real_cli_at_the_plans_limit(castra_dir: Path, tmp_path: Path) -> None:
    """The real bundled CLI on the fake Messages API answering 429 "rejected": with an API
    key no reset time comes, so the request is held (told once) and /retry runs it."""
    with FakeMessagesApi() as api:
        path = castra_dir.parent / "legio.toml"
        path.write_text(f'model = "{PINNED_MODEL}"\n[claude]\ncli_path = ""\n')
        app = await LegioApp.open(load_config(path), env=api.safe_cli_env(tmp_path / "cli"))
        told: list[str] = []

        async def notify(text: str) -> None:
            told.append(text)

        await app.attach(Told(notify))
        try:
            [held] = await app.handle_message("@vorenus LIMIT_FIRST 1893456000\nREPLY salve")
            assert held.kind == "held"
            assert held.text == (  # one failure, one message: the held reply says it all
                "⏸ vorenus stopped: ⏸ The plan's limit is reached and the API did not say "
                "when it resets: the request waits; send /retry later."
            )
            [later] = await app.handle_message("@vorenus REPLY vale")
            assert later.kind == "held"
            assert told == []  # not told a second time beside the reply
            replies = await app.retry()
            assert [r.text.rsplit("\n", 1)[-1] for r in replies] == ["salve", "vale"]
        finally:
            await app.close()


async def test_no_login_at_all_is_not_called_an_expired_one(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "no-login"))
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    try:
        [failed] = await app.handle_message(
            "@vorenus LIMIT_FIRST authentication_failed 0 b\nREPLY first"
        )
        assert failed.kind == "held"
        assert "No Claude login found: run `claude login`" in failed.text
        assert "ANTHROPIC_API_KEY" in failed.text and "expired" not in failed.text
    finally:
        await app.close()


async def test_an_api_that_does_not_answer_is_said_when_the_cli_starts_retrying(
    castra_dir: Path, tmp_path: Path
) -> None:
    """The real CLI retrying a 529: the agent's status line says so at the first retry
    (not when the retries run out), and the answer still comes."""
    with FakeMessagesApi() as api:
        path = castra_dir.parent / "legio.toml"
        path.write_text(f'model = "{PINNED_MODEL}"\n[claude]\ncli_path = ""\n')
        env = {**api.safe_cli_env(tmp_path / "cli"), "CLAUDE_CODE_MAX_RETRIES": "3"}
        app = await LegioApp.open(load_config(path), env=env)
        lines: list[tuple[str, str]] = []

        async def on_status(status: Status) -> None:
            lines.append((status.agent, status_text(status)))

        try:
            [reply] = await app.handle_message(
                "@vorenus OVERLOADED_FIRST 1 busy\nREPLY at last",
                Callbacks(on_status=on_status),
            )
        finally:
            await app.close()
    assert reply.text.endswith("at last")
    warned = [line for agent, line in lines if agent == "vorenus" and "⚠️" in line]
    assert warned and warned[0].startswith("⚠️ The Claude API answered 529: trying again (1 of 3)")
