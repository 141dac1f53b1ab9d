"""Process lifecycle: one Legio per castra, and no Claude CLI outliving its daemon.

A daemon killed with SIGKILL leaves its Claude CLI children running: a CLI that is
answering finishes its turn on its own. Every CLI Legio starts carries two
environment variables, the castra it serves and the id of the daemon run that
started it; at start-up, CLIs of an earlier run on the same castra are terminated
(SIGTERM, then SIGKILL). Reading other processes' environment needs ``/proc`` (Linux);
elsewhere nothing is reaped and the log says so.

``CastraLock`` (an ``flock`` on ``castra/legio.lock``) makes a second daemon on the same
castra refuse to start instead of killing the first one's agents.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import time
import uuid
from pathlib import Path

from legio.errors import LegioError

logger = logging.getLogger(__name__)

CASTRA_ENV = "LEGIO_CASTRA"
RUN_ENV = "LEGIO_RUN"
LOCK_FILE = "legio.lock"


def new_run_id() -> str:
    return uuid.uuid4().hex


def agent_env(castra_root: Path, run_id: str) -> dict[str, str]:
    """Variables every agent's CLI is started with, so a later run can find it."""
    return {CASTRA_ENV: str(castra_root.resolve()), RUN_ENV: run_id}


class CastraLock:
    """An exclusive lock on a castra for the life of one daemon."""

    def __init__(self, castra_root: Path) -> None:
        self.path = castra_root / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise ``LegioError`` naming the daemon that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise LegioError(
                f"another Legio (pid {holder}) is running on the castra {self.path.parent}; "
                "stop it first (two daemons would answer the same messages)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def find_orphans(castra_root: Path, run_id: str) -> list[int]:
    """Pids of agent CLIs started for this castra by another daemon run."""
    proc = Path("/proc")
    if not proc.is_dir():
        logger.info("no /proc here: cannot look for agent CLIs left by an earlier run")
        return []
    castra = str(castra_root.resolve())
    orphans = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        env = _environ(int(entry.name))
        if env.get(CASTRA_ENV) == castra and env.get(RUN_ENV) not in (None, run_id):
            orphans.append(int(entry.name))
    return orphans


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie has no environ left; count it as gone
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def reap_orphans(castra_root: Path, run_id: str, *, grace_s: float = 3.0) -> list[int]:
    """Terminate CLIs an earlier run left behind (SIGTERM, then SIGKILL); return their pids."""
    orphans = find_orphans(castra_root, run_id)
    for pid in orphans:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in orphans):
        time.sleep(0.05)
    for pid in orphans:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    if orphans:
        logger.warning(
            "terminated %d agent CLI(s) left by an earlier run: %s", len(orphans), orphans
        )
    return orphans
