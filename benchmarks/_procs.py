"""Shared by the process benchmarks: a process tree's memory and CPU, read from /proc."""

from __future__ import annotations

import os
from pathlib import Path


def rss_mib(pid: int) -> float:
    """Resident memory of one process, MiB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().split(") ", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                out.append(int(entry.name))
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and every descendant."""
    kids = children(pid)
    return [pid, *(d for k in kids for d in tree(k))]


def cpu_s(pid: int) -> float:
    """CPU time of one process, all its live threads, in seconds (ns resolution)."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                continue
    except OSError:
        return 0.0
    return total / 1e9


def tree_rss(pid: int) -> float:
    return sum(rss_mib(p) for p in tree(pid))


def tree_cpu(pid: int) -> float:
    return sum(cpu_s(p) for p in tree(pid))


def names(pid: int) -> list[str]:
    """The command names of ``pid``'s descendants (not itself)."""
    out = []
    for p in tree(pid)[1:]:
        try:
            out.append(Path(f"/proc/{p}/comm").read_text().strip())
        except OSError:
            continue
    return out


def own_pid() -> int:
    return os.getpid()


def tree_cpus(pid: int) -> dict[int, float]:
    """CPU seconds of ``pid`` and each descendant, by pid."""
    return {p: cpu_s(p) for p in tree(pid)}


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two ``tree_cpus`` readings by the processes alive at the
    second (one started meanwhile counts whole; one ended meanwhile is not seen)."""
    return sum(cpu - before.get(p, 0.0) for p, cpu in after.items())
