"""How the running daemon is asked how it is: a UNIX socket only its user can open, and
the optional HTTP health endpoint.

The socket is ``castra/state/legio.sock`` (made 0600 in the ``state`` folder, made 0700;
a path too long for a UNIX socket moves to a 0700 folder of this user under the system's
temporary folder, named by the castra; if another user took that folder first, a fresh
private one made with ``mkdtemp``, its path recorded in ``state/socket.where``). A
client writes one request line (``status``) and reads one line of JSON. A socket left by
a daemon that died is stale: the castra's lock tells (``CastraLock``: held only while a
daemon lives), so the client asks the lock first, and a starting daemon, holding the
lock, removes any file in the socket's place.

``[health] listen = "127.0.0.1:8787"`` also answers ``GET /health`` with the status less
what Caesar alone may read (``report.public``: no approvals' targets, no error text), for
an uptime monitor (HTTP/1.1, ``Connection: close``); off by default, loopback only unless
``[health] allow_remote``. Any local user can connect to it, so it cannot take the
daemon's descriptors: at most ``HEALTH_CONNECTIONS`` at once (a connection beyond them is
closed at once, unanswered), each given ``HEAD_TIMEOUT_S`` to send its request head and
as long to take the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import hashlib
import ipaddress
import json
import logging
import os
import socket
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from legio.config import Config
from legio.errors import LegioError
from legio.store.lifecycle import LOCK_FILE

logger = logging.getLogger(__name__)

SOCKET_NAME = "legio.sock"
WHERE = "socket.where"  # the socket's path, when the usual one was taken by another user
SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes; some room for the terminating NUL
REQUEST_MAX = 8192
HEALTH_CONNECTIONS = 16  # /health connections held at once; more are closed at once
HEAD_TIMEOUT_S = 5.0  # to send the request head, and again to take the answer
Answer = Callable[[], Awaitable[dict[str, Any]]]


def socket_path(castra_root: Path) -> Path:
    """Where the daemon of this castra listens (the same for daemon and client): the path
    the running daemon recorded (``state/socket.where``) when the usual one was taken."""
    root = castra_root.resolve()
    path = root / "state" / SOCKET_NAME
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        return path
    with contextlib.suppress(OSError, ValueError):
        recorded = Path((root / "state" / WHERE).read_text(encoding="utf-8").strip())
        if recorded.is_absolute():
            return recorded
    return _usual_path(root)


def _usual_path(root: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"legio-{os.getuid()}" / f"{digest}.sock"


def listen_path(castra_root: Path) -> Path:
    """Where the starting daemon listens, in a private folder of its own: the usual path,
    or, when its folder in the temporary folder is another user's (any local user can take
    ``/tmp/legio-<uid>`` first), a fresh private one (``mkdtemp``), recorded for clients."""
    root = castra_root.resolve()
    path = socket_path(root)
    where = root / "state" / WHERE
    if path.parent == root / "state":
        private_folder(path.parent)
        return path
    path = _usual_path(root)
    try:
        private_folder(path.parent)
    except (LegioError, OSError) as e:
        fresh = Path(tempfile.mkdtemp(prefix=f"legio-{os.getuid()}-"))
        logger.warning("%s; the status socket goes to %s instead", e, fresh)
        path = fresh / path.name
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(f"{path}\n", encoding="utf-8")
        return path
    with contextlib.suppress(FileNotFoundError):
        where.unlink()
    return path


def private_folder(folder: Path) -> None:
    """Make ``folder`` (0700, this user's); ``LegioError`` if someone else owns it."""
    folder.mkdir(parents=True, exist_ok=True)
    info = folder.lstat()
    if info.st_uid != os.getuid() or not folder.is_dir() or folder.is_symlink():
        raise LegioError(f"{folder} is not a folder of this user: cannot put Legio's socket there")
    os.chmod(folder, 0o700)


def daemon_running(castra_root: Path) -> bool:
    """Whether a daemon holds the castra's lock now (a test on the lock, let go at once)."""
    try:
        fd = os.open(castra_root / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing lets a lock we took go
    return False


# ------------------------------------------------------------------ the daemon's side


async def serve_socket(
    castra_root: Path, answer: Answer, requests: dict[str, Answer] | None = None
) -> tuple[asyncio.Server, Path]:
    """Listen on the castra's socket (the caller holds the castra's lock): ``status``
    answered by ``answer``, other request lines by ``requests`` (read at each request,
    so a front-end may add one later: ``cockpit``, the one-time link)."""
    more = requests if requests is not None else {}
    path = listen_path(castra_root)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # stale: its daemon is gone (we hold the lock)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                line = (await reader.readline())[:REQUEST_MAX].decode(errors="replace").strip()
            handler = answer if line == "status" else more.get(line)
            reply = await handler() if handler else {"error": f"unknown request {line!r}"}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except Exception as e:
            logger.warning("the status socket could not answer: %r", e)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    server = await asyncio.start_unix_server(handle, path)
    os.chmod(path, 0o600)
    return server, path


def health_problem(config: Config) -> str | None:
    """Why ``[health] listen`` cannot be served as it is, or None."""
    listen = config.health.listen
    if not listen:
        return None
    host = listen.rpartition(":")[0].strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return f"[health] listen = {listen!r}: the host must be an IP address or localhost"
    if not loopback and not config.health.allow_remote:
        return (
            f"[health] listen = {listen!r} is not a loopback address: the status names your "
            "agents, jobs and errors. Listen on 127.0.0.1 (and put a proxy in front), or set "
            "[health] allow_remote = true if this network is yours"
        )
    return None


async def serve_health(
    listen: str,
    answer: Answer,
    *,
    max_connections: int = HEALTH_CONNECTIONS,
    head_timeout_s: float = HEAD_TIMEOUT_S,
) -> asyncio.Server:
    """Answer ``GET /health`` with ``answer``'s JSON on ``listen`` (host:port), holding at
    most ``max_connections`` at once (see the module docstring)."""
    host, _, port = listen.rpartition(":")
    held = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal held
        if held >= max_connections:
            writer.transport.abort()  # its descriptor back now, not after a timeout
            return
        held += 1
        try:
            await exchange(reader, writer)
        finally:
            held -= 1

    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(head_timeout_s):
                head = await reader.readuntil(b"\r\n\r\n")
            first = head.split(b"\r\n", 1)[0].decode(errors="replace").split()
            if len(first) >= 2 and first[0] == "GET" and first[1].split("?")[0] == "/health":
                status, body = "200 OK", json.dumps(await answer()).encode()
            else:
                status, body = "404 Not Found", b'{"error": "only GET /health is served"}'
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            status, body = "400 Bad Request", b'{"error": "bad request"}'
        except Exception as e:
            logger.warning("the health endpoint could not answer: %r", e)
            status, body = "500 Internal Server Error", b'{"ok": false}'
        try:
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            async with asyncio.timeout(head_timeout_s):
                await writer.drain()
        except TimeoutError:
            writer.transport.abort()  # it does not read its answer: no waiting on it
        except OSError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return await asyncio.start_server(handle, host.strip("[]"), int(port), limit=REQUEST_MAX)


# ------------------------------------------------------------------ the client's side


def ask_daemon(
    castra_root: Path, timeout_s: float = 10.0, request: str = "status"
) -> dict[str, Any] | None:
    """The running daemon's status (or its answer to ``request``); None if no daemon runs
    on this castra.
    ``LegioError`` if one runs but does not answer (say why)."""
    if not daemon_running(castra_root):
        return None
    path = socket_path(castra_root)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout_s)
            client.connect(os.fspath(path))
            client.sendall(request.encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = client.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as e:
        why = (
            "it does not listen there yet (starting?)"
            if e.errno
            in (
                errno.ENOENT,
                errno.ECONNREFUSED,
            )
            else str(e)
        )
        raise LegioError(
            f"Legio runs on {castra_root} (it holds the lock) but did not answer on {path}: "
            f"{why}. If it stays so, its event loop may be stuck: see its log"
        ) from None
    try:
        status = json.loads(data)
    except ValueError:
        raise LegioError(f"Legio answered on {path} with something that is not JSON") from None
    if not isinstance(status, dict):
        raise LegioError(f"Legio answered on {path} with something that is not a status")
    return status
