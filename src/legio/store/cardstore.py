"""Work cards in the praetorium: what one agent's turn changed on a project.

A card is made after a turn on a project moved the agent's branch or changed its copy
(``legio.sessions.cards``). Its row keeps the two commits the turn went from and to, so
a button tapped days later still shows what *that* turn did, and can say when the
branch has moved on since.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiosqlite

from legio.timing import now

COLUMNS = (
    "id, agent, project, branch, base, from_tip, to_tip, commits, files, added, removed, "
    "uncommitted, answer_seq, created_at, check_id, model, plan_seq"
)
ADDED = COLUMNS.partition(", ")[2].replace(", check_id", "").replace(", plan_seq", "")  # add


@dataclass(frozen=True)
class CardRow:
    """One stored card (``from_tip`` is "" when the branch did not exist before)."""

    id: int
    agent: str
    project: str
    branch: str
    base: str
    from_tip: str
    to_tip: str
    commits: int
    files: int
    added: int
    removed: int
    uncommitted: int
    answer_seq: int | None
    created_at: str
    check_id: int | None = None  # the project check run for this turn, if any
    model: str | None = None  # the [models] name its turn ran on, when known
    plan_seq: int | None = None  # the plan Caesar agreed to in this turn (its nuntius)

    @classmethod
    def from_row(cls, row: Any) -> CardRow:
        return cls(*tuple(row))


class CardStore:
    """The ``cards`` table, on the praetorium's connection."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    async def add(
        self,
        *,
        agent: str,
        project: str,
        branch: str,
        base: str,
        from_tip: str,
        to_tip: str,
        commits: int,
        files: int,
        added: int,
        removed: int,
        uncommitted: int,
        answer_seq: int | None,
        model: str | None = None,
    ) -> CardRow:
        cursor = await self._db.execute(
            f"INSERT INTO cards ({ADDED}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                agent,
                project,
                branch,
                base,
                from_tip,
                to_tip,
                commits,
                files,
                added,
                removed,
                uncommitted,
                answer_seq,
                now().isoformat(),
                model,
            ),
        )
        card_id = cursor.lastrowid
        await cursor.close()
        found = await self.get(int(card_id or 0))
        assert found is not None
        return found

    async def get(self, card_id: int) -> CardRow | None:
        async with self._db.execute(f"SELECT {COLUMNS} FROM cards WHERE id = ?", (card_id,)) as c:
            row = await c.fetchone()
        return CardRow.from_row(row) if row is not None else None

    async def latest(self, agent: str, project: str) -> CardRow | None:
        """The newest card of ``agent``'s copy of ``project``."""
        async with self._db.execute(
            f"SELECT {COLUMNS} FROM cards WHERE agent = ? AND project = ? ORDER BY id DESC LIMIT 1",
            (agent, project),
        ) as c:
            row = await c.fetchone()
        return CardRow.from_row(row) if row is not None else None

    async def recent(self, limit: int) -> list[CardRow]:
        """The newest ``limit`` cards, newest first."""
        async with self._db.execute(
            f"SELECT {COLUMNS} FROM cards ORDER BY id DESC LIMIT ?", (limit,)
        ) as c:
            rows = await c.fetchall()
        return [CardRow.from_row(row) for row in rows]

    async def newer(self, card_id: int, agent: str, project: str) -> list[int]:
        """The ids of ``agent``'s cards on ``project`` made after card ``card_id``."""
        async with self._db.execute(
            "SELECT id FROM cards WHERE agent = ? AND project = ? AND id > ? ORDER BY id",
            (agent, project, card_id),
        ) as c:
            rows = await c.fetchall()
        return [int(row[0]) for row in rows]

    async def set_check(self, card_id: int, check_id: int) -> None:
        await self._db.execute("UPDATE cards SET check_id = ? WHERE id = ?", (check_id, card_id))

    async def of_check(self, check_id: int) -> list[CardRow]:
        """The cards showing check run ``check_id``."""
        async with self._db.execute(
            f"SELECT {COLUMNS} FROM cards WHERE check_id = ? ORDER BY id", (check_id,)
        ) as c:
            rows = await c.fetchall()
        return [CardRow.from_row(row) for row in rows]

    async def set_plan(self, card_id: int, seq: int) -> None:
        await self._db.execute("UPDATE cards SET plan_seq = ? WHERE id = ?", (seq, card_id))

    async def set_answer(self, card_id: int, seq: int) -> None:
        await self._db.execute("UPDATE cards SET answer_seq = ? WHERE id = ?", (seq, card_id))
