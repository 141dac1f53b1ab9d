"""Run the real daemon (`python -m legio run`) as a subprocess against the test bench."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import FakeCli
from tests.fakes.bot_api import FakeBotApi

CAESAR = 1001


def write_daemon_config(castra_dir: Path, api: FakeBotApi, cli_path: str, extra: str = "") -> Path:
    path = castra_dir.parent / "legio.toml"
    path.write_text(
        f"{extra}\nshutdown_grace_seconds = 3\n"
        f'[claude]\ncli_path = "{cli_path}"\n'
        f'[telegram]\ncaesar_ids = [{CAESAR}]\nbase_url = "{api.base_url}"\n'
    )
    return path


class Daemon:
    """`legio run` in its own process; its output goes to a log file for failures."""

    def __init__(
        self,
        config: Path,
        api: FakeBotApi,
        fake_cli: FakeCli | None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.config = config
        self.api = api
        self.env = {
            **os.environ,
            "TELEGRAM_BOT_TOKEN": api.token,
            "IS_SANDBOX": "1",  # tests may run as root
            "NO_PROXY": "127.0.0.1,localhost",
            **(env or {}),
        }
        if fake_cli is not None:
            self.env["FAKE_CLAUDE_LOG_DIR"] = str(fake_cli.log_dir)
            self.env["FAKE_CLAUDE_STATE_DIR"] = str(fake_cli.state_dir)
        self.log = config.parent / "daemon.log"
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        """Start and wait until it polls Telegram."""
        start = len(self.api.calls)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "legio", "run", "-c", str(self.config)],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        await self.api.wait_for_call("setMyCommands", start=start, timeout=30)
        await self.api.wait_for_call("getUpdates", start=start, timeout=30, completed=False)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    async def terminate(self, timeout: float = 30) -> int:
        """SIGTERM and wait; the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.process.wait, timeout)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except OSError:
        return True
    return state != "Z"


async def until(predicate: object, timeout: float = 15, what: str = "condition") -> None:
    """Poll ``predicate`` (a callable) until it is true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
