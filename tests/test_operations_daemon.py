"""The real daemon (`python -m legio run`) seen from outside: systemd's notify socket gets
READY=1 and STOPPING=1, `legio status` asks it over its socket, `/restart` starts it again
in place (same pid, the token handed over again), and once it is gone `legio status` says
so with the end of its log."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from legio.cli import main
from legio.operations.control import ask_daemon
from tests.conftest import FakeCli
from tests.fakes.bot_api import FakeBotApi
from tests.reliability.daemon import CAESAR, Daemon, write_daemon_config


def datagrams(listener: socket.socket) -> list[str]:
    return listener.recv(4096).decode().split("\n")


async def until_datagram(listener: socket.socket, line: str) -> list[list[str]]:
    """Every datagram up to the first holding ``line`` (the socket times out: a failure)."""
    seen = []
    while True:
        got = await asyncio.to_thread(datagrams, listener)
        seen.append(got)
        if line in got:
            return seen


async def test_the_daemon_notifies_systemd_answers_status_and_restarts_in_place(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = f"legio-daemon-test-{os.getpid()}-{id(tmp_path)}"
    listener.bind(b"\0" + name.encode())
    listener.settimeout(60)
    async with FakeBotApi() as api:
        config = write_daemon_config(castra_dir, api, str(fake_cli.path))
        daemon = Daemon(config, api, fake_cli, env={"NOTIFY_SOCKET": "@" + name})
        try:
            await daemon.start()
            await until_datagram(listener, "READY=1")
            assert daemon.process is not None
            pid = daemon.process.pid
            status = await asyncio.to_thread(ask_daemon, castra_dir)
            assert status is not None and status["pid"] == pid
            assert status["agents"][0]["name"] == "legatus"

            assert await asyncio.to_thread(main, ["status", "-c", str(config)]) == 0
            out = capsys.readouterr().out
            assert f"is running (pid {pid})" in out and "legatus: idle" in out

            start = len(api.calls)
            api.add_message("/restart", user_id=CAESAR)
            sent = await api.wait_for_call(
                "sendMessage",
                lambda c: "Restarting now" in str(c.params.get("text")),
                start=start,
                timeout=30,
            )
            assert sent is not None
            seen = await until_datagram(listener, "READY=1")  # the new image is listening
            assert ["STOPPING=1", "STATUS=stopping"] in seen
            again = await asyncio.to_thread(ask_daemon, castra_dir)
            assert again is not None
            assert again["pid"] == pid  # started again in place
            assert again["started"] >= status["started"]
            assert again["uptime_s"] < status["uptime_s"] + 60

            start = len(api.calls)
            api.add_message("REPLY still here", user_id=CAESAR)  # the token came through
            await api.wait_for_call(
                "sendMessage",
                lambda c: "still here" in str(c.params.get("text")),
                start=start,
                timeout=60,
            )
            assert await daemon.terminate() == 0
            await until_datagram(listener, "STOPPING=1")
        finally:
            if daemon.process is not None and daemon.process.poll() is None:
                daemon.kill()
            listener.close()
    assert await asyncio.to_thread(main, ["status", "-c", str(config)]) == 3
    out = capsys.readouterr().out
    assert "Legio is not running" in out and "Legio is stopping" in out, daemon.output()
