"""The morning digest: what the legion did in a day, computed from the records alone.

``compute_digest(db, start, end, last_backup)`` reads the praetorium and returns a
``Digest`` value: per agent the answers it gave and the projects they were on, its cost
and failed turns (``turns``), the cost by project (each turn's request's ``#project``),
the jobs whose run failed, the approvals nobody answered in time, and the last backup.
No model is asked: the digest costs nothing and cannot be talked into lying.

Tables that other parts add later (``checks``, ``pulls``) are read only when they exist:
``OPTIONAL`` lists them; each is counted by agent and by its status column, in the
window of its time column, whichever of the usual names it has. Adding one is one line.
Front-ends render the value (``legio.frontends.digestview``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiosqlite

# (table, what the digest calls it); read only if the table exists
OPTIONAL = (("checks", "checks"), ("pulls", "pull requests"))
TIME_COLUMNS = ("finished_at", "updated_at", "created_at", "opened_at")
STATUS_COLUMNS = ("status", "state", "outcome", "conclusion")
FAILED_JOBS = ("error", "interrupted")
UNANSWERED = ("timeout", "expired")


@dataclass(frozen=True)
class AgentDay:
    """One agent's day: answers, the projects they were on, spend, failed turns."""

    agent: str
    answers: int = 0
    projects: tuple[tuple[str, int], ...] = ()  # (project, answers on it)
    turns: int = 0
    failed_turns: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class StatusCounts:
    """A table counted by agent and status (checks, pull requests…)."""

    title: str
    counts: tuple[tuple[str, str, int], ...]  # (agent, status, rows)


@dataclass(frozen=True)
class Digest:
    """The day from ``start`` to ``end`` (aware times), figures only."""

    start: datetime
    end: datetime
    requests: int  # Caesar's messages
    agents: tuple[AgentDay, ...]
    cost_by_project: tuple[tuple[str, float], ...]  # "" = no project
    failed_jobs: tuple[tuple[str, str], ...]  # (job name, outcome)
    unanswered_approvals: tuple[tuple[str, str, str], ...]  # (agent, tool, status)
    tallies: tuple[StatusCounts, ...] = ()
    last_backup: Mapping[str, Any] | None = None  # state/backups/last.json
    total_cost_usd: float = field(default=0.0)


@dataclass(frozen=True)
class DigestReady:
    """An event for the front-ends: the day's digest, to send silently."""

    digest: Digest


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


async def _all(db: aiosqlite.Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
    async with db.execute(sql, params) as cursor:
        return list(await cursor.fetchall())


async def _columns(db: aiosqlite.Connection, table: str) -> list[str]:
    return [row[1] for row in await _all(db, f"PRAGMA table_info({table})", ())]


async def tally(
    db: aiosqlite.Connection, table: str, title: str, window: tuple[str, str]
) -> StatusCounts | None:
    """``table``'s rows in the window by agent and status, or None if it is not there
    (or has no time column to place its rows in the day)."""
    present = await _columns(db, table)
    when = next((c for c in TIME_COLUMNS if c in present), None)
    if when is None:
        return None
    agent = "agent" if "agent" in present else "''"
    status = next((c for c in STATUS_COLUMNS if c in present), "''")
    rows = await _all(
        db,
        f"SELECT {agent}, coalesce({status}, ''), count(*) FROM {table} "
        f"WHERE {when} >= ? AND {when} < ? GROUP BY 1, 2 ORDER BY 1, 2",
        window,
    )
    return StatusCounts(title, tuple((str(a), str(s), int(n)) for a, s, n in rows))


async def compute_digest(
    db: aiosqlite.Connection,
    start: datetime,
    end: datetime,
    last_backup: Mapping[str, Any] | None = None,
) -> Digest:
    """The digest of ``[start, end)`` from the praetorium behind ``db``."""
    window = (_iso(start), _iso(end))
    requests = await _all(
        db,
        "SELECT count(*) FROM nuntii WHERE sender = 'caesar' AND timestamp >= ? AND timestamp < ?",
        window,
    )
    answers = await _all(
        db,
        "SELECT sender, coalesce(project, ''), count(*) FROM nuntii WHERE sender != 'caesar' "
        "AND timestamp >= ? AND timestamp < ? GROUP BY 1, 2 ORDER BY 1, 2",
        window,
    )
    turns = await _all(
        db,
        "SELECT agent, count(*), sum(is_error), sum(cost_usd) FROM turns "
        "WHERE created_at >= ? AND created_at < ? GROUP BY agent ORDER BY agent",
        window,
    )
    by_project = await _all(
        db,
        "SELECT coalesce(n.project, ''), sum(t.cost_usd) FROM turns AS t "
        "LEFT JOIN nuntii AS n ON n.seq = t.nuntius_seq "
        "WHERE t.created_at >= ? AND t.created_at < ? GROUP BY 1 ORDER BY 2 DESC, 1",
        window,
    )
    jobs = await _all(
        db,
        f"SELECT name, last_outcome FROM jobs WHERE last_run >= ? AND last_run < ? "
        f"AND last_outcome IN {FAILED_JOBS} ORDER BY last_run",
        window,
    )
    approvals = await _all(
        db,
        f"SELECT agent, tool, status FROM approval_requests WHERE created_at >= ? "
        f"AND created_at < ? AND status IN {UNANSWERED} ORDER BY id",
        window,
    )
    days: dict[str, dict[str, Any]] = {}
    for sender, project, count in answers:
        day = days.setdefault(sender, {"answers": 0, "projects": []})
        day["answers"] += count
        if project:
            day["projects"].append((project, count))
    for agent, count, errors, cost in turns:
        days.setdefault(agent, {"answers": 0, "projects": []}).update(
            turns=count, failed_turns=int(errors or 0), cost_usd=float(cost or 0)
        )
    agents = tuple(
        AgentDay(
            name,
            d["answers"],
            tuple(d["projects"]),
            d.get("turns", 0),
            d.get("failed_turns", 0),
            d.get("cost_usd", 0.0),
        )
        for name, d in sorted(days.items())
    )
    tallies = []
    for table, title in OPTIONAL:
        found = await tally(db, table, title, window)
        if found is not None and found.counts:  # a quiet table says nothing
            tallies.append(found)
    return Digest(
        start=start,
        end=end,
        requests=int(requests[0][0]),
        agents=agents,
        cost_by_project=tuple((str(p), float(c or 0)) for p, c in by_project),
        failed_jobs=tuple((str(n), str(o)) for n, o in jobs),
        unanswered_approvals=tuple((str(a), str(t), str(s)) for a, t, s in approvals),
        tallies=tuple(tallies),
        last_backup=last_backup,
        total_cost_usd=sum(a.cost_usd for a in agents),
    )
