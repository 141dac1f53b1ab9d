"""Scheduled jobs as data: the ``jobs`` table of the praetorium (migration ``m007_jobs``).

A job is a request (for the Legatus or a centurio) with a schedule: one time
(``once``, ``run_at``) or a cron expression in a time zone (``cron``). ``next_run``
is when it is due next (NULL once a one-shot has run); every time is UTC ISO 8601,
so string order is time order.

A run goes through three marks, so a daemon killed at any point never runs a job
twice: ``claim`` (``run_id``, ``run_due``, ``run_started_at``) before anything is
posted; ``started`` (``running_seq``, the nuntius that carries it, and the next
``next_run``) before any agent is asked; ``finish`` clears the run. A run still
claimed at start-up was interrupted: see ``Scheduler.recover``.

Every write is one statement (the connection is shared and in autocommit mode).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import aiosqlite

from legio.store.praetorium import Praetorium

Kind = Literal["once", "cron"]


def iso(moment: datetime) -> str:
    """A time as stored: UTC, ISO 8601, to the second."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass(frozen=True)
class NewJob:
    """What ``schedule_job`` asks to store."""

    name: str
    target: str
    request: str
    kind: Kind
    timezone: str
    next_run: datetime
    created_by: str
    cron: str | None = None
    run_at: datetime | None = None
    owner_chat: str | None = None


@dataclass(frozen=True)
class Job:
    """One row of ``jobs``."""

    id: int
    name: str
    owner_chat: str | None
    target: str
    request: str
    kind: Kind
    cron: str | None
    timezone: str
    run_at: datetime | None
    created_by: str
    created_at: datetime
    next_run: datetime | None
    last_run: datetime | None
    last_outcome: str | None
    runs: int
    enabled: bool
    run_id: str | None
    run_due: datetime | None
    run_started_at: datetime | None
    running_seq: int | None

    @property
    def running(self) -> bool:
        return self.run_id is not None

    @property
    def origin(self) -> str | None:
        """The origin of the nuntius of the run in progress (one nuntius per run)."""
        return f"job:{self.id}:{self.run_id}" if self.run_id else None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Job:
        return cls(
            id=int(row["id"]),
            name=row["name"],
            owner_chat=row["owner_chat"],
            target=row["target"],
            request=row["request"],
            kind=row["kind"],
            cron=row["cron"],
            timezone=row["timezone"],
            run_at=_time(row["run_at"]),
            created_by=row["created_by"],
            created_at=datetime.fromisoformat(row["created_at"]),
            next_run=_time(row["next_run"]),
            last_run=_time(row["last_run"]),
            last_outcome=row["last_outcome"],
            runs=int(row["runs"]),
            enabled=bool(row["enabled"]),
            run_id=row["run_id"],
            run_due=_time(row["run_due"]),
            run_started_at=_time(row["run_started_at"]),
            running_seq=row["running_seq"],
        )


class JobStore:
    """The jobs table, through the praetorium's connection."""

    def __init__(self, praetorium: Praetorium) -> None:
        self.praetorium = praetorium

    @property
    def _db(self) -> aiosqlite.Connection:
        return self.praetorium.connection

    async def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[Job]:
        async with self._db.execute(sql, tuple(params)) as cursor:
            names = [d[0] for d in cursor.description]
            rows = await cursor.fetchall()
        return [Job.from_row(dict(zip(names, row, strict=True))) for row in rows]

    async def add(self, job: NewJob, max_jobs: int, now: datetime) -> Job | None:
        """Store a new job, unless ``max_jobs`` are already scheduled (then None)."""
        rows = await self._rows(
            "INSERT INTO jobs (name, owner_chat, target, request, kind, cron, timezone, run_at, "
            "created_by, created_at, next_run) "
            "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? "
            "WHERE (SELECT count(*) FROM jobs WHERE enabled) < ? RETURNING *",
            (
                job.name,
                job.owner_chat,
                job.target,
                job.request,
                job.kind,
                job.cron,
                job.timezone,
                iso(job.run_at) if job.run_at else None,
                job.created_by,
                iso(now),
                iso(job.next_run),
                max_jobs,
            ),
        )
        return rows[0] if rows else None

    async def get(self, job_id: int) -> Job | None:
        rows = await self._rows("SELECT * FROM jobs WHERE id = ?", (job_id,))
        return rows[0] if rows else None

    async def active(self) -> list[Job]:
        """Jobs still scheduled or running now, the next due first."""
        return await self._rows(
            "SELECT * FROM jobs WHERE enabled OR run_id IS NOT NULL "
            "ORDER BY next_run IS NULL, next_run, id"
        )

    async def count_active(self) -> int:
        async with self._db.execute("SELECT count(*) FROM jobs WHERE enabled") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def cancel(self, job_id: int) -> Job | None:
        """Stop scheduling a job (a run in progress finishes); the job, or None if not active."""
        rows = await self._rows(
            "UPDATE jobs SET enabled = 0, next_run = NULL WHERE id = ? AND enabled RETURNING *",
            (job_id,),
        )
        return rows[0] if rows else None

    async def due(self, now: datetime) -> list[Job]:
        """Scheduled jobs due at ``now`` and not running, the earliest first."""
        return await self._rows(
            "SELECT * FROM jobs WHERE enabled AND run_id IS NULL AND next_run <= ? "
            "ORDER BY next_run, id",
            (iso(now),),
        )

    async def next_due(self) -> datetime | None:
        """When the next job not running now is due (None: nothing scheduled)."""
        async with self._db.execute(
            "SELECT min(next_run) FROM jobs WHERE enabled AND run_id IS NULL"
        ) as cursor:
            row = await cursor.fetchone()
        return _time(row[0]) if row else None

    async def claimed(self) -> list[Job]:
        """Jobs with a run in progress (at start-up: runs a restart interrupted)."""
        return await self._rows("SELECT * FROM jobs WHERE run_id IS NOT NULL ORDER BY id")

    async def claim(self, job: Job, run_id: str, now: datetime) -> Job | None:
        """Mark a run of ``job`` as begun, once: the claimed job, or None if it was taken."""
        if job.next_run is None:
            return None
        rows = await self._rows(
            "UPDATE jobs SET run_id = ?, run_due = next_run, run_started_at = ? "
            "WHERE id = ? AND enabled AND run_id IS NULL AND next_run = ? RETURNING *",
            (run_id, iso(now), job.id, iso(job.next_run)),
        )
        return rows[0] if rows else None

    async def started(self, job: Job, seq: int | None, next_run: datetime | None) -> None:
        """The run's nuntius is ``seq``: record it and move the schedule on, before asking."""
        when = iso(next_run) if next_run else None
        await self._db.execute(
            "UPDATE jobs SET running_seq = ?, "
            "next_run = CASE WHEN enabled THEN ? END, "
            "enabled = CASE WHEN ? IS NULL THEN 0 ELSE enabled END "
            "WHERE id = ? AND run_id = ?",
            (seq, when, when, job.id, job.run_id),
        )

    async def finish(self, job: Job, outcome: str) -> None:
        """The run is over: record when it ran and how it went; clear the run marks."""
        await self._db.execute(
            "UPDATE jobs SET last_run = run_started_at, last_outcome = ?, runs = runs + 1, "
            "run_id = NULL, run_due = NULL, run_started_at = NULL, running_seq = NULL "
            "WHERE id = ? AND run_id = ?",
            (outcome, job.id, job.run_id),
        )

    async def release(self, job: Job) -> None:
        """Drop a claim whose nuntius was never posted: the job is due again as it was."""
        await self._db.execute(
            "UPDATE jobs SET run_id = NULL, run_due = NULL, run_started_at = NULL, "
            "running_seq = NULL WHERE id = ? AND run_id = ?",
            (job.id, job.run_id),
        )
