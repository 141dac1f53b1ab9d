"""Approvals in the praetorium: Caesar's durable "always" grants and the requests' fate.

``ApprovalStore`` takes a ``Praetorium`` and uses its one connection. A grant is an
(agent, rule) pair Caesar answered "Always" to; ``/revoke <id>`` ends it (the row stays,
with ``revoked_at``). Every approval request is recorded while it waits, so a restart
can mark the ones left pending as expired and their old buttons can say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import aiosqlite

from legio.store.praetorium import Praetorium
from legio.timing import now


@dataclass(frozen=True)
class Grant:
    """An "always" answer: agent ``agent`` may make calls under ``rule`` unasked."""

    id: int
    agent: str
    rule: str
    created_at: datetime


class ApprovalStore:
    """Grants and requests; see the module docstring."""

    def __init__(self, praetorium: Praetorium) -> None:
        self.praetorium = praetorium

    @property
    def _db(self) -> aiosqlite.Connection:
        return self.praetorium.connection

    async def grants(self) -> list[Grant]:
        """Every grant not revoked, oldest first."""
        async with self._db.execute(
            "SELECT id, agent, rule, created_at FROM approval_grants "
            "WHERE revoked_at IS NULL ORDER BY id"
        ) as cursor:
            rows = await cursor.fetchall()
        return [
            Grant(int(r["id"]), r["agent"], r["rule"], datetime.fromisoformat(r["created_at"]))
            for r in rows
        ]

    async def add_grant(self, agent: str, rule: str) -> Grant:
        """Store an "always" grant (an existing live one is returned as it is)."""
        for grant in await self.grants():
            if (grant.agent, grant.rule) == (agent, rule):
                return grant
        stamp = now().isoformat()
        async with self._db.execute(
            "INSERT INTO approval_grants (agent, rule, created_at) VALUES (?, ?, ?) RETURNING id",
            (agent, rule, stamp),
        ) as cursor:
            row = await cursor.fetchone()
        assert row is not None
        return Grant(int(row["id"]), agent, rule, datetime.fromisoformat(stamp))

    async def revoke(self, grant_id: int) -> Grant | None:
        """End grant ``grant_id``; the grant, or None if there is no such live grant."""
        async with self._db.execute(
            "UPDATE approval_grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL "
            "RETURNING id, agent, rule, created_at",
            (now().isoformat(), grant_id),
        ) as cursor:
            row = await cursor.fetchone()
        if row is None:
            return None
        return Grant(
            int(row["id"]), row["agent"], row["rule"], datetime.fromisoformat(row["created_at"])
        )

    async def open_request(self, agent: str, tool: str, target: str) -> int:
        """Record a request that waits for Caesar; its id."""
        async with self._db.execute(
            "INSERT INTO approval_requests (agent, tool, target, created_at) "
            "VALUES (?, ?, ?, ?) RETURNING id",
            (agent, tool, target[:500], now().isoformat()),
        ) as cursor:
            row = await cursor.fetchone()
        assert row is not None
        return int(row["id"])

    async def close_request(self, request_id: int, status: str) -> None:
        """Record how a request ended (allowed, denied, timeout, cancelled…)."""
        await self._db.execute(
            "UPDATE approval_requests SET status = ?, decided_at = ? WHERE id = ?",
            (status, now().isoformat(), request_id),
        )

    async def request_status(self, request_id: int) -> str | None:
        """How request ``request_id`` ended, ``pending``, or None if unknown."""
        async with self._db.execute(
            "SELECT status FROM approval_requests WHERE id = ?", (request_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return str(row["status"]) if row else None

    async def expire_pending(self) -> int:
        """At start-up: requests an earlier run left waiting can no longer be answered."""
        cursor = await self._db.execute(
            "UPDATE approval_requests SET status = 'expired', decided_at = ? "
            "WHERE status = 'pending'",
            (now().isoformat(),),
        )
        return cursor.rowcount
