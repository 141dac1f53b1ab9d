"""What ``legio status`` and ``GET /health`` answer: one JSON object, and its text form.

``snapshot`` gathers it from the running parts: since when and which version, each
agent (idle, working for how long on which request, how many wait in line, its session's
size in tokens, silent too long), the jobs due next, approvals waiting for Caesar, the
last error logged, the praetorium's size, the last backup (``castra/state/backups/
last.json``, written by ``legio backup``: ``finished``, ``archive``, ``ok``, ``error``),
the event loop's lag, the disk, and whether a restart is draining. ``render`` turns it
into the lines ``legio status`` prints; ``public`` is the part ``GET /health`` shows.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from legio import __version__
from legio.operations.disk import DiskGuard
from legio.operations.lag import LagMonitor
from legio.operations.logfile import LastError
from legio.operations.stuck import StuckWatch
from legio.sessions.manager import SessionManager
from legio.store.jobstore import JobStore
from legio.store.praetorium import Praetorium

JOBS_SHOWN = 5
LAST_BACKUP = Path("state") / "backups" / "last.json"


def iso(unix: float | None) -> str | None:
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="seconds") if unix else None


def last_backup(castra_root: Path) -> dict[str, Any] | None:
    """The last backup's record, as ``legio backup`` wrote it (None: no backup yet)."""
    try:
        data = json.loads((castra_root / LAST_BACKUP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def agent_rows(sessions: SessionManager, names: list[str], stuck: StuckWatch) -> list[Any]:
    now = time.monotonic()
    rows = []
    for name in names:
        slot = sessions.slot(name)
        session = slot.session
        asking = session.asking if session is not None else None
        rows.append(
            {
                "name": name,
                "state": slot.state,
                "seq": asking or None,
                "working_s": round(now - session.asked_at, 1)
                if session and asking is not None
                else None,
                "silent_s": round(now - session.heard, 1)
                if session and asking is not None
                else None,
                "stuck": name in stuck.current,
                "queued": sessions.errands.waiting(name),
                "tokens": session.tracker.context_tokens if session else 0,
                "live": session is not None,
            }
        )
    return rows


async def jobs_due(praetorium: Praetorium) -> list[dict[str, Any]]:
    jobs = (await JobStore(praetorium).active())[:JOBS_SHOWN]
    return [
        {
            "id": job.id,
            "name": job.name,
            "target": job.target,
            "next_run": job.next_run.isoformat(timespec="seconds") if job.next_run else None,
            "running": job.run_id is not None,
        }
        for job in jobs
    ]


async def approvals_waiting(praetorium: Praetorium) -> list[dict[str, Any]]:
    async with praetorium.connection.execute(
        "SELECT id, agent, tool, target, created_at FROM approval_requests "
        "WHERE status = 'pending' ORDER BY id"
    ) as cursor:
        rows = await cursor.fetchall()
    return [dict(row) for row in rows]


async def praetorium_size(praetorium: Praetorium) -> dict[str, Any]:
    path = praetorium.path
    size = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            size += os.stat(f"{path}{suffix}").st_size
    async with praetorium.connection.execute("SELECT max(seq) AS last FROM nuntii") as cursor:
        row = await cursor.fetchone()
    return {"bytes": size, "last_seq": (row["last"] if row else None) or 0}


async def snapshot(
    *,
    started: float,
    castra_root: Path,
    sessions: SessionManager,
    praetorium: Praetorium,
    agents: list[str],
    stuck: StuckWatch,
    lag: LagMonitor | None,
    disk: DiskGuard,
    last_error: LastError | None,
    draining: str | None,
) -> dict[str, Any]:
    """The status, as JSON-ready data (see the module docstring)."""
    free = disk.free_mb()
    return {
        "ok": True,
        "pid": os.getpid(),
        "version": __version__,
        "started": iso(started),
        "uptime_s": round(time.time() - started, 1),
        "agents": agent_rows(sessions, agents, stuck),
        "jobs": await jobs_due(praetorium),
        "approvals": await approvals_waiting(praetorium),
        "last_error": last_error.summary() if last_error is not None else None,
        "praetorium": await praetorium_size(praetorium),
        "last_backup": last_backup(castra_root),
        "loop_lag": asdict(lag.figures) if lag is not None else None,
        "disk": {
            "free_mb": round(free, 1) if free is not None else None,
            "warn_mb": disk.warn_mb,
            "refuse_mb": disk.refuse_mb,
            "low": free is not None and free < disk.warn_mb,
        },
        "restarting": draining,
    }


def public(status: dict[str, Any]) -> dict[str, Any]:
    """What ``GET /health`` answers (any local user may ask): the status without what
    only Caesar may read: approvals waiting are counted, not listed (their targets are
    commands and paths), the last error keeps its time, not its text, and the last backup
    says when and whether it went well, not where it is or why it failed."""
    shown = {k: v for k, v in status.items() if k not in ("approvals", "last_error")}
    backup = status.get("last_backup")
    if isinstance(backup, dict):
        shown["last_backup"] = {
            "finished": backup.get("finished"),
            "ok": bool(backup.get("ok")) and not backup.get("prune_error"),
        }
    shown["approvals_waiting"] = len(status.get("approvals") or [])
    error = status.get("last_error")
    shown["last_error_at"] = iso(error["time"]) if error else None
    return shown


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def agent_line(row: dict[str, Any]) -> str:
    what = row["state"]
    if row.get("working_s") is not None:
        on = f" on #{row['seq']}" if row.get("seq") else ""
        what = f"working for {_ago(row['working_s'])}{on}"
        if row.get("stuck"):
            what += f", silent for {_ago(row.get('silent_s'))} (stuck?)"
    if row.get("queued"):
        what += f", queued {row['queued']}"
    size = f"session {row['tokens']:,} tokens" if row.get("live") else "no session open"
    return f"  {row['name']}: {what} — {size}"


def render(status: dict[str, Any]) -> list[str]:
    """``legio status``'s text: one fact a line."""
    lines = [
        f"Legio {status['version']} is running (pid {status['pid']}) since "
        f"{status['started']} ({_ago(status['uptime_s'])})."
    ]
    if status.get("restarting"):
        lines.append(f"Restarting ({status['restarting']}): new requests are refused.")
    lines.append("Agents:")
    lines += [agent_line(row) for row in status["agents"]]
    jobs = status["jobs"]
    lines.append("Jobs due next: " + ("none" if not jobs else ""))
    for job in jobs:
        when = "running now" if job["running"] else (job["next_run"] or "not scheduled")
        lines.append(f"  #{job['id']} {job['name']} for {job['target']}: {when}")
    approvals = status["approvals"]
    lines.append(f"Approvals waiting for Caesar: {len(approvals) or 'none'}")
    for item in approvals:
        lines.append(f"  {item['agent']}: {item['tool']} {str(item['target'])[:80]}")
    error = status["last_error"]
    lines.append(
        "Last error: "
        + (f"{iso(error['time'])} {error['logger']}: {error['message']}" if error else "none")
    )
    size = status["praetorium"]
    lines.append(f"Praetorium: {size['bytes'] / 1024 / 1024:,.1f} MB, {size['last_seq']:,} nuntii")
    backup = status["last_backup"]
    if backup is None:
        lines.append("Last backup: none recorded")
    elif backup.get("ok"):
        lines.append(f"Last backup: {backup.get('finished')} → {backup.get('archive')}")
    else:
        lines.append(f"Last backup FAILED at {backup.get('finished')}: {backup.get('error')}")
    if backup is not None and backup.get("prune_error"):
        lines.append(f"  older archives not removed: {backup['prune_error']}")
    lag = status.get("loop_lag")
    if lag:
        stalls = f"{lag['stalls']} stall(s) over 1 s" if lag["stalls"] else "no stall"
        lines.append(
            f"Event loop lag: {lag['last_s'] * 1000:.0f} ms now, worst "
            f"{lag['worst_s'] * 1000:.0f} ms, {stalls}"
        )
    disk = status["disk"]
    if disk["free_mb"] is not None:
        low = " — LOW" if disk["low"] else ""
        lines.append(f"Disk: {disk['free_mb']:,.0f} MB free{low}")
    return lines
