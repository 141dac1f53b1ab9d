"""Pull requests Legio opened on the forge: the ``pulls`` table (migration ``m016_pulls``).

One row per pull request (``repo``, ``number``), with the agent and project it carries, its
head commit as last pushed, its state (``open`` until merged or closed), and what was
already told to Caesar: ``reported_sha`` (the head whose CI result was said) and
``reported_review`` (the last review said), so a restart neither repeats nor loses a
line. ``forge_seen`` keeps, per agent and project, the newest issue number the agent was
shown by ``forge_new_issues`` (issue numbers only grow: "new" is a higher number). Every
write is one statement (the connection is shared and in autocommit mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiosqlite

from legio.store.praetorium import Praetorium
from legio.timing import now

COLUMNS = (
    "id, project, agent, repo, number, url, branch, base, head_sha, state, reported_sha, "
    "reported_review"
)


@dataclass(frozen=True)
class PullRecord:
    id: int
    project: str
    agent: str
    repo: str
    number: int
    url: str
    branch: str
    base: str
    head_sha: str
    state: str  # "open", "merged", "closed"
    reported_sha: str
    reported_review: int


def _record(row: Any) -> PullRecord:
    return PullRecord(
        int(row["id"]),
        row["project"],
        row["agent"],
        row["repo"],
        int(row["number"]),
        row["url"],
        row["branch"],
        row["base"],
        row["head_sha"],
        row["state"],
        row["reported_sha"],
        int(row["reported_review"]),
    )


class PullStore:
    """The ``pulls`` table; see the module docstring."""

    def __init__(self, praetorium: Praetorium) -> None:
        self.praetorium = praetorium

    @property
    def _db(self) -> aiosqlite.Connection:
        return self.praetorium.connection

    async def opened(
        self,
        *,
        project: str,
        agent: str,
        repo: str,
        number: int,
        url: str,
        branch: str,
        base: str,
        head_sha: str,
    ) -> PullRecord:
        """Record a pull request Legio opened or updated (its head as just pushed)."""
        stamp = now().isoformat()
        async with self._db.execute(
            "INSERT INTO pulls (project, agent, repo, number, url, branch, base, head_sha, "
            "state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?) "
            "ON CONFLICT (repo, number) DO UPDATE SET head_sha = excluded.head_sha, "
            "url = excluded.url, state = 'open', updated_at = excluded.updated_at "
            f"RETURNING {COLUMNS}",
            (project, agent, repo, number, url, branch, base, head_sha, stamp, stamp),
        ) as cursor:
            row = await cursor.fetchone()
        assert row is not None
        return _record(row)

    async def following(self) -> list[PullRecord]:
        """Every pull request still open, oldest first (CI and reviews are followed)."""
        async with self._db.execute(
            f"SELECT {COLUMNS} FROM pulls WHERE state = 'open' ORDER BY id"
        ) as cursor:
            return [_record(r) for r in await cursor.fetchall()]

    async def get(self, pull_id: int) -> PullRecord | None:
        async with self._db.execute(f"SELECT {COLUMNS} FROM pulls WHERE id = ?", (pull_id,)) as c:
            row = await c.fetchone()
        return _record(row) if row is not None else None

    async def of(self, project: str, agent: str) -> PullRecord | None:
        """The latest pull request Legio opened for ``agent`` on ``project``, if any."""
        async with self._db.execute(
            f"SELECT {COLUMNS} FROM pulls WHERE project = ? AND agent = ? ORDER BY id DESC LIMIT 1",
            (project, agent),
        ) as cursor:
            row = await cursor.fetchone()
        return _record(row) if row is not None else None

    async def numbered(self, project: str, number: int) -> PullRecord | None:
        """Pull request ``number`` of ``project``, if Legio opened it."""
        async with self._db.execute(
            f"SELECT {COLUMNS} FROM pulls WHERE project = ? AND number = ? ORDER BY id DESC "
            "LIMIT 1",
            (project, number),
        ) as cursor:
            row = await cursor.fetchone()
        return _record(row) if row is not None else None

    async def update(self, pull_id: int, **values: str | int) -> None:
        """Set ``head_sha``, ``state``, ``reported_sha`` or ``reported_review``."""
        allowed = {"head_sha", "state", "reported_sha", "reported_review"}
        if not values or set(values) - allowed:
            raise ValueError(f"pulls: cannot set {sorted(set(values) - allowed)}")
        sets = ", ".join(f"{key} = ?" for key in values)
        await self._db.execute(
            f"UPDATE pulls SET {sets}, updated_at = ? WHERE id = ?",
            (*values.values(), now().isoformat(), pull_id),
        )

    async def seen_issue(self, agent: str, project: str) -> int:
        """The newest issue number ``agent`` was shown of ``project`` (0: none yet)."""
        async with self._db.execute(
            "SELECT last_issue FROM forge_seen WHERE agent = ? AND project = ?", (agent, project)
        ) as cursor:
            row = await cursor.fetchone()
        return int(row["last_issue"]) if row is not None else 0

    async def saw_issue(self, agent: str, project: str, number: int) -> None:
        """``agent`` was shown ``project``'s issues up to ``number``."""
        await self._db.execute(
            "INSERT INTO forge_seen (agent, project, last_issue, seen_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (agent, project) DO UPDATE SET "
            "last_issue = max(last_issue, excluded.last_issue), seen_at = excluded.seen_at",
            (agent, project, number, now().isoformat()),
        )
