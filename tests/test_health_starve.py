"""The health endpoint cannot be starved (issue 44, item 10): any local user can open
connections to it, so it holds only a few at once (the rest closed at once), drops one
that has not sent its request head in a few seconds, and ``legio run`` starts with its
soft descriptor limit raised to the hard one. ``/health`` says how Legio is, not what it
waits on: approvals' targets and the last error stay on the 0600 status socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import resource
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from legio.app import LegioApp
from legio.operations.control import serve_health
from tests.conftest import FakeCli
from tests.legion import fake_cli_config

SRC = str(Path(__file__).resolve().parents[1] / "src")
ROOT = str(Path(__file__).resolve().parents[1])
IDLE = 200  # idle connections an attacker holds open (the daemon below may hold 128 fds)
LOW_LIMIT = 128

# The daemon's side, in a process of its own with a low descriptor limit: the health
# endpoint as `legio run` starts it, then (once the attacker's connections are in) what
# an agent's request needs: files and a child process.
DAEMON = textwrap.dedent(
    f"""
    import asyncio, os, resource, sys
    from legio.operations.control import serve_health

    async def main():
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, ({LOW_LIMIT}, hard))

        async def answer():
            return {{"ok": True}}

        server = await serve_health("127.0.0.1:0", answer)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        try:
            files = [os.open(os.devnull, os.O_RDONLY) for _ in range(20)]
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-c", "print('agent ran')", stdout=asyncio.subprocess.PIPE
            )
            out, _ = await child.communicate()
            for fd in files:
                os.close(fd)
            print("request:", out.decode().strip(), flush=True)
        except OSError as e:
            print("request failed:", e, flush=True)
        server.close()

    asyncio.run(main())
    """
)


async def health_answer(port: int) -> bytes:
    """A whole GET /health exchange: the bytes answered (b"" if closed unanswered)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        return await reader.read()
    except ConnectionResetError:
        return b""
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def test_idle_connections_do_not_take_the_daemons_descriptors(tmp_path: Path) -> None:
    """200 idle connections against a daemon allowed 128 descriptors: an agent's request
    (20 files and a child process) still works, because the endpoint held only a few."""
    daemon = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        DAEMON,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert daemon.stdout is not None and daemon.stdin is not None
    idle: list[socket.socket] = []
    try:
        port = int(await asyncio.wait_for(daemon.stdout.readline(), 60))
        for _ in range(IDLE):
            client = socket.socket()
            client.setblocking(False)
            await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", port))
            idle.append(client)
        # a last connection, behind all the idle ones: once it is answered or closed, the
        # daemon has taken every one before it off its queue
        await asyncio.wait_for(health_answer(port), 60)
        daemon.stdin.write(b"go\n")
        await daemon.stdin.drain()
        said = (await asyncio.wait_for(daemon.stdout.readline(), 60)).decode()
    finally:
        for client in idle:
            client.close()
        if daemon.returncode is None:
            daemon.kill()
        await daemon.wait()
    assert said.strip() == "request: agent ran"


async def test_a_full_endpoint_closes_newcomers_and_frees_slots_after_the_timeout() -> None:
    async def answer() -> dict[str, object]:
        return {"ok": True}

    server = await serve_health("127.0.0.1:0", answer, max_connections=4, head_timeout_s=0.5)
    port = server.sockets[0].getsockname()[1]
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(IDLE):
            idle.append(await asyncio.open_connection("127.0.0.1", port))
        # beyond the cap each one is closed at once, with no answer
        closed = [await asyncio.wait_for(reader.read(), 30) for reader, _ in idle[4:]]
        assert closed == [b""] * (IDLE - 4)
        # the four held are dropped once their head is late: answered 400 and closed
        late = [await asyncio.wait_for(reader.read(), 30) for reader, _ in idle[:4]]
        assert all(b.startswith(b"HTTP/1.1 400") for b in late)
        # and a monitor's request is answered again
        body = await asyncio.wait_for(health_answer(port), 30)
        assert body.startswith(b"HTTP/1.1 200 OK")
    finally:
        for _, writer in idle:
            writer.close()
        server.close()
        await server.wait_closed()


def test_legio_run_raises_its_soft_descriptor_limit_to_the_hard_one(tmp_path: Path) -> None:
    (tmp_path / "castra").mkdir()
    (tmp_path / "legio.toml").write_text("")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 64:
        pytest.fail(f"this machine's hard descriptor limit is {hard}: nothing to raise")
    script = textwrap.dedent(
        f"""
        import resource
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        from legio.cli import main
        main(["run", "-c", {str(tmp_path / "legio.toml")!r}])  # refuses: no token
        print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TELEGRAM_BOT_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "PYTHONPATH": SRC},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    soft = int(done.stdout.strip().splitlines()[-1])
    assert soft > 64
    assert soft == hard or hard == resource.RLIM_INFINITY


async def test_health_says_how_legio_is_not_what_waits_or_failed(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    config = fake_cli_config(castra_dir, fake_cli, '[health]\nlisten = "127.0.0.1:0"\n')
    app = await LegioApp.open(config)
    try:
        await app.operations.start_operations()
        await app.engine.praetorium.connection.execute(
            "INSERT INTO approval_requests (agent, tool, target, status, created_at) "
            "VALUES ('vorenus', 'Bash', 'git push secret-remote HEAD', 'pending', "
            "'2026-11-28T00:00:00')"
        )
        await app.engine.praetorium.connection.commit()
        logging.getLogger("legio.test").error("token 1234:ABCD rejected by the forge")
        assert app.engine.operations.health is not None
        _, port = app.engine.operations.health
        data = await asyncio.wait_for(health_answer(port), 30)
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        health = json.loads(body)
        assert b"secret-remote" not in body and b"1234:ABCD" not in body
        assert health["approvals_waiting"] == 1
        assert "last_error" not in health and "approvals" not in health
        # the socket, 0600, still says both
        status = await app.engine.operations.snapshot()
        assert status["approvals"][0]["target"] == "git push secret-remote HEAD"
        assert "1234:ABCD" in status["last_error"]["message"]
    finally:
        await app.close()


def test_health_says_whether_the_last_backup_went_well_not_where_or_why() -> None:
    from legio.operations.report import public

    status = {
        "approvals": [],
        "last_error": None,
        "last_backup": {
            "finished": "2026-11-28T03:00:00+00:00",
            "ok": True,
            "archive": "/srv/private/legio-backup-2026-11-28.tar.gz",
            "prune_error": "could not remove /srv/private/old.tar.gz: Permission denied",
        },
    }
    shown = public(status)
    assert shown["last_backup"] == {"finished": "2026-11-28T03:00:00+00:00", "ok": False}
    assert "/srv/private" not in json.dumps(shown)
