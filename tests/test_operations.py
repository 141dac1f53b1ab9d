"""Operations, part by part: systemd's notify protocol on a local socket, the loop-lag
monitor against a blocked loop, the disk guard with an injected free-space function, the
rotated log, and the status socket and health endpoint of an opened app."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from legio.app import LegioApp
from legio.cli import main
from legio.config import load_config
from legio.errors import AttachmentError
from legio.operations.control import ask_daemon, health_problem, socket_path
from legio.operations.disk import MB, DiskGuard
from legio.operations.lag import LagMonitor
from legio.operations.logfile import file_handler, log_path, tail
from legio.operations.report import render
from legio.operations.systemd import Notifier, socket_address, watchdog_period
from legio.request import PendingFile
from tests.conftest import FakeCli
from tests.legion import Told, fake_cli_config

# ------------------------------------------------------------------ systemd


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[socket.socket]:
    """A datagram socket standing in for systemd's (in the abstract namespace)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(b"\0legio-test-" + str(os.getpid()).encode() + str(id(tmp_path)).encode())
    listener.settimeout(30)
    yield listener
    listener.close()


def address_of(listener: socket.socket) -> str:
    name = listener.getsockname()
    assert isinstance(name, bytes) and name.startswith(b"\0")
    return "@" + name[1:].decode()


def received(listener: socket.socket) -> list[str]:
    return listener.recv(4096).decode().split("\n")


def test_socket_address_reads_the_abstract_namespace() -> None:
    assert socket_address("@legio") == b"\0legio"
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"


def test_the_watchdog_period_is_half_read_from_watchdog_usec() -> None:
    assert watchdog_period({"WATCHDOG_USEC": "30000000"}) == 30.0
    assert watchdog_period({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, pid=2) is None
    assert watchdog_period({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "2"}, pid=2) == 30.0
    assert watchdog_period({}) is None


def test_ready_stopping_and_status_reach_the_notify_socket(
    notify_socket: socket.socket,
) -> None:
    notifier = Notifier({"NOTIFY_SOCKET": address_of(notify_socket)})
    assert notifier.ready("listening (Telegram long polling)")
    assert received(notify_socket) == ["READY=1", "STATUS=listening (Telegram long polling)"]
    assert notifier.status("3 agents working")
    assert received(notify_socket) == ["STATUS=3 agents working"]
    assert notifier.stopping()
    assert received(notify_socket) == ["STOPPING=1", "STATUS=stopping"]
    notifier.close()


def test_without_notify_socket_nothing_is_sent() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    assert not notifier.ready("x")


async def test_the_watchdog_is_pinged_from_the_event_loop(notify_socket: socket.socket) -> None:
    env = {"NOTIFY_SOCKET": address_of(notify_socket), "WATCHDOG_USEC": "200000"}
    notifier = Notifier(env)
    assert notifier.period == 0.2
    pinging = asyncio.create_task(notifier.keep_alive())
    try:
        pings = [await asyncio.to_thread(received, notify_socket) for _ in range(3)]
    finally:
        pinging.cancel()
        await asyncio.gather(pinging, return_exceptions=True)
    assert pings == [["WATCHDOG=1"]] * 3
    # a stalled loop stops pinging: nothing arrives while the loop is blocked
    notify_socket.settimeout(0.3)
    with pytest.raises(TimeoutError):
        notify_socket.recv(4096)
    notifier.close()


# ------------------------------------------------------------------ loop lag


def block_the_loop_for_a_while() -> None:
    """What the lag monitor must name: a synchronous wait on the loop's thread."""
    time.sleep(1.5)


async def test_a_blocked_loop_is_measured_and_logged_with_what_ran(
    caplog: pytest.LogCaptureFixture,
) -> None:
    monitor = LagMonitor(interval_s=0.05, threshold_s=0.3)
    monitor.start()
    try:
        await asyncio.sleep(0.2)  # a beat or two
        block_the_loop_for_a_while()
        assert monitor.captured.wait(30)  # the thread caught the stack meanwhile
        with caplog.at_level(logging.WARNING, "legio.operations.lag"):
            for _ in range(600):  # the loop's next beat notes the stall
                if monitor.figures.stalls:
                    break
                await asyncio.sleep(0.05)
    finally:
        await monitor.stop()
    assert monitor.figures.worst_s > 0.3
    assert "block_the_loop_for_a_while" in monitor.figures.last_stall_where
    [record] = [r for r in caplog.records if "event loop was blocked" in r.getMessage()]
    assert "block_the_loop_for_a_while" in record.getMessage()


# ------------------------------------------------------------------ disk


class FakeDisk:
    def __init__(self, free_mb: float) -> None:
        self.free_mb = free_mb

    def __call__(self, path: Path) -> int:
        return int(self.free_mb * MB)


def test_the_disk_guard_warns_once_and_again_after_recovering(tmp_path: Path) -> None:
    disk = FakeDisk(5000)
    guard = DiskGuard(tmp_path, warn_mb=1024, refuse_mb=200, free=disk)
    assert guard.check() is None
    disk.free_mb = 900
    notice = guard.check()
    assert notice is not None and "900 MB free" in notice and "warn_mb" in notice
    assert guard.check() is None  # once
    disk.free_mb = 800
    assert guard.check() is None
    disk.free_mb = 2000
    assert guard.check() is None
    disk.free_mb = 1000
    assert guard.check() is not None  # a new fall


def test_the_disk_guard_refuses_a_file_that_would_leave_too_little(tmp_path: Path) -> None:
    disk = FakeDisk(300)
    guard = DiskGuard(tmp_path, warn_mb=1024, refuse_mb=200, free=disk)
    assert guard.refusal(50 * 1024 * 1024) is None
    refusal = guard.refusal(150 * 1024 * 1024)
    assert refusal is not None and "refuse_mb" in refusal and "300 MB free" in refusal


async def test_a_file_is_refused_before_anything_is_written_on_a_full_disk(
    app: LegioApp, castra_dir: Path
) -> None:
    app.engine.operations.disk.free = FakeDisk(100)
    pending = PendingFile("telegram:1:5", "", "document", "text/plain", "notes.txt", 1000)
    with pytest.raises(AttachmentError, match="Not enough disk space"):
        await app.inbox.accept_file(pending)
    assert await app.engine.sessions.attachments.pending() == []
    app.engine.operations.disk.free = FakeDisk(10_000)
    assert await app.inbox.accept_file(pending) == pending


async def test_a_low_disk_is_told_to_caesar_once(app: LegioApp) -> None:
    told: list[str] = []

    async def notify(text: str) -> None:
        told.append(text)

    await app.attach(Told(notify))
    app.engine.operations.disk.free = FakeDisk(500)
    await app.engine.operations.look()
    await app.engine.operations.look()
    assert len(told) == 1 and "running low" in told[0]
    status = await app.operations.status_report()
    assert status["disk"]["low"] is True


# ------------------------------------------------------------------ the log file


def test_the_log_file_rotates_at_its_size_and_keeps_its_count(
    write_config: object, castra_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "legio.toml"
    path.write_text("[log]\nmax_mb = 0.001\nkeep = 2\n")  # about 1 KB a file
    config = load_config(path)
    handler = file_handler(config)
    log = logging.getLogger("legio.test.rotation")
    log.addHandler(handler)
    log.propagate = False
    try:
        for n in range(200):
            log.warning("line %03d %s", n, "x" * 40)
    finally:
        log.removeHandler(handler)
        handler.close()
    folder = log_path(castra_dir).parent
    names = sorted(p.name for p in folder.iterdir() if p.name.startswith("legio.log"))
    assert names == ["legio.log", "legio.log.1", "legio.log.2"]
    assert all(p.stat().st_size <= 1100 for p in folder.glob("legio.log*"))
    assert tail(log_path(castra_dir), 1)[0].endswith("line 199 " + "x" * 40)


# ------------------------------------------------------------------ status and health


def test_health_listen_beyond_loopback_is_refused_unless_allowed(tmp_path: Path) -> None:
    (tmp_path / "castra").mkdir()
    path = tmp_path / "legio.toml"
    path.write_text('[health]\nlisten = "0.0.0.0:8787"\n')
    assert "not a loopback address" in (health_problem(load_config(path)) or "")
    path.write_text('[health]\nlisten = "0.0.0.0:8787"\nallow_remote = true\n')
    assert health_problem(load_config(path)) is None
    path.write_text('[health]\nlisten = "127.0.0.1:8787"\n')
    assert health_problem(load_config(path)) is None


async def http_get(host: str, port: int, path: str) -> tuple[str, bytes]:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body


async def test_status_socket_and_health_endpoint_answer_the_same_json(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    config = fake_cli_config(castra_dir, fake_cli, '[health]\nlisten = "127.0.0.1:0"\n')
    app = await LegioApp.open(config)
    try:
        await app.operations.start_operations()
        [reply] = await app.handle_message("REPLY hello")
        assert reply.text == "hello"
        logging.getLogger("legio.test").error("the last thing that went wrong")
        (castra_dir / "state" / "backups").mkdir(parents=True)
        (castra_dir / "state" / "backups" / "last.json").write_text(
            json.dumps(
                {
                    "finished": "2026-11-25T03:00:00+00:00",
                    "archive": "/b/x.tar",
                    "ok": True,
                    "error": None,
                    "prune_error": "could not remove /b/old.tar: Operation not permitted",
                }
            )
        )
        path = socket_path(castra_dir)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        status = await asyncio.to_thread(ask_daemon, castra_dir)
        assert status is not None
        assert status["pid"] == os.getpid()
        [legatus] = [a for a in status["agents"] if a["name"] == "legatus"]
        assert legatus["state"] == "idle" and legatus["live"] and legatus["tokens"] > 0
        assert status["last_error"]["message"] == "the last thing that went wrong"
        assert status["last_backup"]["archive"] == "/b/x.tar"
        assert status["praetorium"]["last_seq"] == 2
        text = "\n".join(render(status))
        assert "Last backup: 2026-11-25T03:00:00+00:00 → /b/x.tar" in text
        assert "older archives not removed: could not remove /b/old.tar" in text
        assert "legatus: idle" in text
        assert app.engine.operations.health is not None
        host, port = app.engine.operations.health
        first, body = await http_get(host, port, "/health")
        assert first == "HTTP/1.1 200 OK"
        health = json.loads(body)
        assert health["pid"] == status["pid"] and health["agents"] == status["agents"]
        first, _ = await http_get(host, port, "/other")
        assert first == "HTTP/1.1 404 Not Found"
    finally:
        await app.close()
    assert not socket_path(castra_dir).exists()
    assert await asyncio.to_thread(ask_daemon, castra_dir) is None  # not running


def test_legio_status_of_a_dead_daemon_shows_its_log(
    castra_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "legio.toml").write_text("")
    log = log_path(castra_dir)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"2026-11-25 10:00:{n:02d} INFO legio: line {n}\n" for n in range(40)))
    (castra_dir / "legio.lock").write_text("12345")  # a lock file its dead daemon left
    stale = socket_path(castra_dir)
    stale.write_text("")  # and a stale socket: not asked
    assert main(["status", "-c", str(tmp_path / "legio.toml"), "-n", "5"]) == 3
    out = capsys.readouterr().out
    assert "Legio is not running" in out
    assert "line 39" in out and "line 35" in out and "line 34" not in out


async def test_a_starting_daemon_replaces_a_stale_socket(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    path = socket_path(castra_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("left by a daemon killed with -9")
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    try:
        await app.operations.start_operations()
        status = await asyncio.to_thread(ask_daemon, castra_dir)
        assert status is not None and status["ok"]
    finally:
        await app.close()


@pytest.mark.skipif(os.getuid() != 0, reason="taking a folder as another user needs root")
async def test_another_user_taking_the_socket_folder_does_not_stop_the_status_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """An attacker's pass: another local user made ``/tmp/legio-<uid>`` first (the sticky
    temporary folder: Legio cannot remove it), and every daemon on a castra whose socket
    path is too long failed to start. The daemon listens in a fresh private folder
    instead, and ``legio status`` finds it there."""
    import fcntl
    import pwd
    import shutil
    import tempfile

    from legio.operations.control import serve_socket
    from legio.store.lifecycle import LOCK_FILE

    temp = Path(tempfile.mkdtemp(prefix="lg-", dir="/tmp"))  # short: a socket path's limit
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    root = tmp_path / ("castra-with-a-long-name-" * 4)
    (root / "state").mkdir(parents=True)
    taken = temp / f"legio-{os.getuid()}"
    taken.mkdir(mode=0o755)
    nobody = pwd.getpwnam("nobody")
    os.chown(taken, nobody.pw_uid, nobody.pw_gid)

    async def answer() -> dict[str, object]:
        return {"pid": os.getpid()}

    lock = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    server, path = await serve_socket(root, answer)
    try:
        assert path.parent != taken and path.parent.parent == temp
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert path.parent.stat().st_uid == os.getuid()
        assert socket_path(root) == path
        assert await asyncio.to_thread(ask_daemon, root) == {"pid": os.getpid()}
    finally:
        server.close()
        await server.wait_closed()
        os.close(lock)
