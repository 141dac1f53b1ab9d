"""Projects' checks as data: the ``checks`` table of the praetorium (migration ``m014_checks``).

One row per run of a copy's check (``legio.projects.checks``): which agent's copy of which
project, the command, the commit it ran on (``worktree:<HEAD>`` for a run asked for on the
copy's uncommitted work), its state (``running``, then ``passed``,
``failed``, ``timed_out``, ``cancelled``, ``error`` or ``interrupted``) and why
(``detail``), when it started and ended, the exit code, the last lines of its output,
how big its log grew and whether it was cut, and the runner's own count where one was
found. A run still ``running`` when the daemon starts was cut off by a restart:
``interrupt_running`` says so. Every time is UTC ISO 8601; every write is one statement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import aiosqlite

from legio.store.praetorium import Praetorium

CheckState = Literal[
    "running", "passed", "failed", "timed_out", "cancelled", "error", "interrupted"
]
FINISHED: tuple[CheckState, ...] = (
    "passed",
    "failed",
    "timed_out",
    "cancelled",
    "error",
    "interrupted",
)
# ``commit_id`` of a run on the copy's uncommitted work: ``worktree:<HEAD>``
WORK_TREE = "worktree:"
INTERRUPTED = "Legio stopped while it ran (a restart): it did not finish"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass(frozen=True)
class CheckRecord:
    """One run of a project's check in one agent's copy, as stored (and as it stands
    while it runs). The count (``passed``…``runner``) is None where the output held none;
    ``failed`` counts errors too; ``unit`` is "tests" or "packages"."""

    id: int
    agent: str
    project: str
    command: str
    commit: str  # the commit it checked (a clean tree of it), or the HEAD under ``uncommitted``
    state: CheckState
    timeout_s: float
    started_at: datetime
    detail: str | None = None  # why it ended so: superseded, timed out, no sandbox…
    finished_at: datetime | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    tail: str = ""  # its last lines of output (bounded)
    log_bytes: int = 0  # what its log file holds
    log_cut: bool = False  # the log reached its cap: the rest was not kept
    passed: int | None = None
    failed: int | None = None
    skipped: int | None = None
    total: int | None = None
    unit: str | None = None
    runner: str | None = None
    uncommitted: bool = False  # asked for: the copy's work tree, not a commit, was checked

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def counted(self) -> bool:
        """Whether the runner's own count was found in the output."""
        return self.total is not None

    def replace(self, **changes: Any) -> CheckRecord:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CheckRecord:
        return cls(
            id=int(row["id"]),
            agent=row["agent"],
            project=row["project"],
            command=row["command"],
            commit=row["commit_id"].removeprefix(WORK_TREE),
            uncommitted=row["commit_id"].startswith(WORK_TREE),
            state=row["state"],
            timeout_s=float(row["timeout_s"]),
            started_at=datetime.fromisoformat(row["started_at"]),
            detail=row["detail"],
            finished_at=_time(row["finished_at"]),
            exit_code=row["exit_code"],
            duration_s=row["duration_s"],
            tail=row["tail"],
            log_bytes=int(row["log_bytes"]),
            log_cut=bool(row["log_cut"]),
            passed=row["passed"],
            failed=row["failed"],
            skipped=row["skipped"],
            total=row["total"],
            unit=row["unit"],
            runner=row["runner"],
        )


class CheckStore:
    """The checks table, through the praetorium's connection."""

    def __init__(self, praetorium: Praetorium) -> None:
        self.praetorium = praetorium

    @property
    def _db(self) -> aiosqlite.Connection:
        return self.praetorium.connection

    async def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[CheckRecord]:
        async with self._db.execute(sql, tuple(params)) as cursor:
            names = [d[0] for d in cursor.description]
            rows = await cursor.fetchall()
        return [CheckRecord.from_row(dict(zip(names, row, strict=True))) for row in rows]

    async def begin(
        self,
        agent: str,
        project: str,
        command: str,
        commit: str,
        timeout_s: float,
        started_at: datetime,
        uncommitted: bool = False,
    ) -> CheckRecord:
        """A new run, ``running`` from ``started_at``; ``uncommitted``: of the copy's work
        tree over ``commit``, not of ``commit`` itself."""
        commit = WORK_TREE + commit if uncommitted else commit
        rows = await self._rows(
            "INSERT INTO checks (agent, project, command, commit_id, state, timeout_s, "
            "started_at) VALUES (?, ?, ?, ?, 'running', ?, ?) RETURNING *",
            (agent, project, command, commit, timeout_s, _iso(started_at)),
        )
        return rows[0]

    async def save(self, record: CheckRecord) -> None:
        """Write what changed of a run (its state, times, output and count)."""
        await self._db.execute(
            "UPDATE checks SET state = ?, detail = ?, finished_at = ?, exit_code = ?, "
            "duration_s = ?, tail = ?, log_bytes = ?, log_cut = ?, passed = ?, failed = ?, "
            "skipped = ?, total = ?, unit = ?, runner = ? WHERE id = ?",
            (
                record.state,
                record.detail,
                _iso(record.finished_at) if record.finished_at else None,
                record.exit_code,
                record.duration_s,
                record.tail,
                record.log_bytes,
                int(record.log_cut),
                record.passed,
                record.failed,
                record.skipped,
                record.total,
                record.unit,
                record.runner,
                record.id,
            ),
        )

    async def get(self, run_id: int) -> CheckRecord | None:
        rows = await self._rows("SELECT * FROM checks WHERE id = ?", (run_id,))
        return rows[0] if rows else None

    async def last(self, agent: str, project: str) -> CheckRecord | None:
        """The latest run on ``agent``'s copy of ``project``, or None."""
        rows = await self._rows(
            "SELECT * FROM checks WHERE agent = ? AND project = ? ORDER BY id DESC LIMIT 1",
            (agent, project),
        )
        return rows[0] if rows else None

    async def history(self, agent: str, project: str, limit: int = 20) -> list[CheckRecord]:
        """The latest runs on one copy, newest first."""
        return await self._rows(
            "SELECT * FROM checks WHERE agent = ? AND project = ? ORDER BY id DESC LIMIT ?",
            (agent, project, limit),
        )

    async def interrupt_running(self, when: datetime) -> list[CheckRecord]:
        """At start-up: every run still ``running`` was cut off by the restart; marked
        ``interrupted`` (finished ``when``), and returned."""
        return await self._rows(
            "UPDATE checks SET state = 'interrupted', detail = ?, finished_at = ? "
            "WHERE state = 'running' RETURNING *",
            (INTERRUPTED, _iso(when)),
        )
