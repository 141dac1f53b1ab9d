"""Limits on a project's check: at most ``[sandbox] check_processes`` processes,
``check_memory_mb`` of memory, ``check_tmp_mb`` in its ``/tmp`` (and ``/var/tmp``); its
time is ``check_timeout`` (``legio.projects.checks``). A fork bomb, a memory bomb or a
full ``/tmp`` ends that check (its forks fail, the kernel kills it) and nothing else.

``limit_support`` finds how this machine holds them, best first:

- a transient systemd scope (``systemd-run --scope -p TasksMax= -p MemoryMax=
  -p MemorySwapMax=0``; ``--user`` for a user other than root), where systemd takes one;
- else a cgroup of Legio's own making under the one it runs in (cgroup v1 ``pids`` and
  ``memory`` hierarchies it may write: a container run as root), which the check joins
  before bubblewrap starts (``/bin/sh`` writes its pid there, then execs it);
- else rlimits, set inside the jail where the check cannot raise them again:
  ``RLIMIT_NPROC``, which the kernel counts per user namespace (held where the check has
  its own, and never for root, whose processes it does not count), and ``RLIMIT_DATA``
  per process, always (a bound per process, not in total).

``/tmp`` (and ``/var/tmp``, ``/dev/shm``; ``/dev`` itself read-only) is a tmpfs of
``check_tmp_mb`` where bubblewrap sets sizes (``--size``); else,
with a memory cgroup, a tmpfs whose pages count against the check's memory; else the
check's own folder on disk (not memory). ``limits_said`` is ``legio check``'s sentence,
naming every limit that cannot be held here. ``Confinement`` sets one run's limits up
(``setup``), wraps its command line (``wrap``) and removes them after (``cleanup``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from legio.config import Config

CGROUP_FS = Path("/sys/fs/cgroup")
RMDIR_TRIES = 100  # a cgroup is removed once its last process is gone (0.05 s apart)
SYSTEMD_PROBE_S = 10.0
# exits 0 only if its argument reached it as written (not expanded by what runs it)
UNTOUCHED = (
    "/bin/sh",
    "-c",
    'case "$1" in *LEGIO_UNSET*) exit 0;; esac; exit 3',
    "sh",
    "${LEGIO_UNSET}",
)
LIMITS_FAILED = "legio-limits: the check could not join its cgroup"  # its only output then


@dataclass(frozen=True)
class CheckLimits:
    """What one check may use (``[sandbox]``)."""

    processes: int = 1024
    memory_mb: int = 4096
    tmp_mb: int = 1024

    @classmethod
    def of(cls, config: Config) -> CheckLimits:
        box = config.sandbox
        return cls(box.check_processes, box.check_memory_mb, box.check_tmp_mb)


@dataclass(frozen=True)
class LimitSupport:
    """How this machine holds a check's limits (``limit_support``)."""

    how: str  # "a systemd scope", "a cgroup", "rlimits"
    processes: bool  # held in total
    memory: bool  # held in total (else per process)
    tmp: bool  # /tmp bounded in total
    tmp_size: bool  # bubblewrap's --size
    nproc: bool  # set RLIMIT_NPROC (counted per user namespace)
    systemd: tuple[str, ...] = ()  # the systemd-run prefix
    cgroups: tuple[Path, ...] = ()  # (pids, memory) parents to make a cgroup under


def _own_cgroup(controller: str) -> Path | None:
    """Where this process's cgroup of ``controller`` (v1) is mounted, if writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    path = next(
        (
            line.split(":", 2)[2]
            for line in lines
            if line.count(":") >= 2 and controller in line.split(":", 2)[1].split(",")
        ),
        None,
    )
    if path is None:
        return None
    for mount in mounts:
        fields = mount.split()
        if " - cgroup " not in mount or len(fields) < 5:
            continue
        if controller not in mount.rsplit(" ", 1)[-1].split(","):
            continue
        root, point = fields[3], fields[4]
        if path != root and not path.startswith(root.rstrip("/") + "/"):
            continue
        folder = Path(point) / path[len(root) :].lstrip("/")
        if folder.is_dir() and os.access(folder, os.W_OK):
            return folder
    return None


def _probe_cgroup(parent: Path) -> bool:
    probe = parent / f"legio-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def _systemd(euid: int) -> tuple[str, ...]:
    """The ``systemd-run`` prefix where it makes a scope here, else ()."""
    run = shutil.which("systemd-run")
    if run is None:
        return ()
    prefix = (run, *(("--user",) if euid else ()), "--scope", "--quiet", "--collect")
    try:
        said = subprocess.run([run, "--help"], capture_output=True, text=True, timeout=10)
        if "--expand-environment" in said.stdout:  # else it would expand "$1" in the jail's line
            prefix += ("--expand-environment=no",)
        done = subprocess.run(  # the scope made, the command's words passed untouched
            [*prefix, "-p", "TasksMax=64", "-p", "MemoryMax=64M", "--", *UNTOUCHED],
            capture_output=True,
            timeout=SYSTEMD_PROBE_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return prefix if done.returncode == 0 else ()


def _tmp_size(bwrap: str) -> bool:
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in done.stdout + done.stderr


@functools.cache
def limit_support(bwrap: str = "bwrap", userns: bool = True) -> LimitSupport:
    """How a check's limits are held on this machine (probed once)."""
    euid = os.geteuid()
    nproc = userns and euid != 0  # root's processes are never counted against NPROC
    size = _tmp_size(bwrap)
    systemd = _systemd(euid)
    if systemd:
        return LimitSupport("a systemd scope", True, True, True, size, nproc, systemd)
    pids, memory = _own_cgroup("pids"), _own_cgroup("memory")
    pids = pids if pids is not None and _probe_cgroup(pids) else None
    memory = memory if memory is not None and _probe_cgroup(memory) else None
    if pids is not None or memory is not None:
        return LimitSupport(
            "a cgroup",
            pids is not None or nproc,
            memory is not None,
            size or memory is not None,
            size,
            nproc,
            cgroups=tuple(p for p in (pids, memory) if p is not None),
        )
    return LimitSupport("rlimits", nproc, False, size, size, nproc)


def limits_said(limits: CheckLimits, support: LimitSupport) -> str:
    """``legio check``'s words: each limit, how it is held, and which cannot be."""
    parts = []
    if support.processes:
        parts.append(f"at most {limits.processes} processes")
    else:
        parts.append(
            "processes not limited (no cgroup here, and the kernel does not count the "
            "processes of root or of a check without its own user namespace)"
        )
    if support.memory:
        parts.append(f"{limits.memory_mb} MB of memory")
    else:
        parts.append(f"memory not limited in total (no cgroup): {limits.memory_mb} MB per process")
    if support.tmp_size:
        parts.append(f"a /tmp of {limits.tmp_mb} MB")
    elif support.tmp:
        parts.append(
            f"/tmp counted in its memory (bubblewrap sets no size: {limits.tmp_mb} MB unused)"
        )
    else:
        parts.append("/tmp not limited in total: it is the check's own folder on disk")
    return f"limits by {support.how}: " + ", ".join(parts)


class Confinement:
    """One run's limits: made (``setup``), applied (``wrap``, ``tmp_args``, ``shell``),
    removed (``cleanup``)."""

    def __init__(self, limits: CheckLimits, support: LimitSupport, name: str) -> None:
        self.limits = limits
        self.support = support
        self.name = name
        self.groups: list[Path] = []

    def setup(self) -> None:
        """Make the run's cgroups and set their limits (``OSError`` if one cannot be)."""
        memory = self.limits.memory_mb * 1024 * 1024
        for parent in self.support.cgroups:
            group = parent / self.name
            group.mkdir(mode=0o755)
            self.groups.append(group)
            if (group / "pids.max").exists():
                (group / "pids.max").write_text(str(self.limits.processes))
            if (group / "memory.limit_in_bytes").exists():
                (group / "memory.limit_in_bytes").write_text(str(memory))
                swap = group / "memory.memsw.limit_in_bytes"
                if swap.exists():  # no swap beyond it either
                    swap.write_text(str(memory))

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the limits: after ``systemd-run``, or by a shell that
        joins the cgroups and execs it (its children are born inside)."""
        if self.support.systemd:
            return [
                *self.support.systemd,
                "-p",
                f"TasksMax={self.limits.processes}",
                "-p",
                f"MemoryMax={self.limits.memory_mb}M",
                "-p",
                "MemorySwapMax=0",
                "--",
                *argv,
            ]
        if not self.groups:
            return list(argv)
        n = len(self.groups)
        join = " && ".join(f'echo $$ > "${i + 1}/cgroup.procs"' for i in range(n))
        failed = f'{{ echo "{LIMITS_FAILED}"; exit 1; }}'
        script = f'{{ {join}; }} 2>/dev/null || {failed}; shift {n}; exec "$@"'
        return ["/bin/sh", "-c", script, "legio-limits", *map(str, self.groups), *argv]

    def tmp_args(self, folder: Path) -> list[str]:
        """bubblewrap's options making ``/tmp`` and ``/var/tmp``."""
        if self.support.tmp_size:
            size = str(self.limits.tmp_mb * 1024 * 1024)
            return ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/var/tmp"]
        if self.support.tmp:  # a tmpfs charged to the check's memory cgroup
            return ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
        return ["--bind", str(folder), "/tmp", "--bind", str(folder), "/var/tmp"]

    def scratch_size(self) -> list[str] | None:
        """bubblewrap's options before ``--tmpfs`` for the check's ``TMPDIR``, cache and
        ``HOME``: each a tmpfs of ``check_tmp_mb`` (``--size``), or charged to its memory
        cgroup, so that what the check writes there is bounded and gone when it ends;
        None where neither holds (they are its own folders on disk)."""
        if self.support.tmp_size:
            return ["--size", str(self.limits.tmp_mb * 1024 * 1024)]
        if self.support.tmp:
            return []
        return None

    def dev_args(self, folder: Path) -> list[str]:
        """bubblewrap's options after ``--dev /dev``: ``/dev/shm`` bounded as ``/tmp`` is
        (bubblewrap's own ``/dev`` is a tmpfs as large as half the machine's memory), then
        ``/dev`` itself read-only."""
        if self.support.tmp_size:
            shm = ["--size", str(self.limits.tmp_mb * 1024 * 1024), "--tmpfs", "/dev/shm"]
        elif self.support.tmp:
            shm = ["--tmpfs", "/dev/shm"]
        else:
            shm = ["--bind", str(folder), "/dev/shm"]
        return [*shm, "--remount-ro", "/dev"]

    def shell(self) -> str:
        """The jail's ``ulimit`` line for these limits (before the command's)."""
        data = f"ulimit -d {self.limits.memory_mb * 1024}"
        if not self.support.nproc:
            return data
        n = self.limits.processes
        return f"{data} && {{ ulimit -p {n} 2>/dev/null || ulimit -u {n}; }}"

    def cleanup(self) -> None:
        """Kill what is left in the run's cgroups and remove them (logged by the caller
        if one stays)."""
        for group in reversed(self.groups):
            for _ in range(RMDIR_TRIES):
                with contextlib.suppress(OSError, ValueError):
                    for pid in (group / "cgroup.procs").read_text().split():
                        with contextlib.suppress(OSError):
                            os.kill(int(pid), signal.SIGKILL)
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        self.groups = [g for g in self.groups if g.exists()]
