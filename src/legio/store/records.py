"""Per-agent records in the praetorium: session checkpoints, compactions, turn usage.

``AgentRecords`` is ``Praetorium.records``, on the praetorium's one connection: each
agent's SDK session id and delivery checkpoint (``agent_sessions``), its compaction
summaries (``compactions``, never deleted; a reset only stops giving them), and the
token usage and cost of every query (``turns``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime

import aiosqlite

from legio.timing import now

COMPACTION_COLUMNS = (
    "id, agent, summary, first_kept_seq, tokens_before, session_id, reason, instructions, "
    "created_at"
)


@dataclass(frozen=True)
class Checkpoint:
    """What an agent's SDK session has already been given."""

    agent: str
    session_id: str | None
    last_seq: int
    prompt_hash: str | None
    updated_at: datetime


@dataclass(frozen=True)
class QueryUsage:
    """The usage the SDK reported for one agent query."""

    agent: str
    session_id: str | None = None
    nuntius_seq: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: int = 0
    is_error: bool = False
    model: str | None = None


@dataclass(frozen=True)
class Compaction:
    """An agent's summary of its conversation, written before its session was rebuilt.

    The agent's next SDK session starts from ``summary`` plus the nuntii it may see
    from ``first_kept_seq`` on; the nuntii themselves are never changed.
    """

    id: int
    agent: str
    summary: str
    first_kept_seq: int
    tokens_before: int
    session_id: str | None
    reason: str
    instructions: str | None
    created_at: datetime


@dataclass(frozen=True)
class UsageTotals:
    turns: int
    errors: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    cost_usd: float


@dataclass(frozen=True)
class UsageRow:
    """One agent's use of one model over a period."""

    agent: str
    model: str
    turns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


def _compaction(row: sqlite3.Row) -> Compaction:
    return Compaction(
        id=int(row["id"]),
        agent=row["agent"],
        summary=row["summary"],
        first_kept_seq=int(row["first_kept_seq"]),
        tokens_before=int(row["tokens_before"]),
        session_id=row["session_id"],
        reason=row["reason"],
        instructions=row["instructions"],
        created_at=datetime.fromisoformat(row["created_at"]),
    )


class AgentRecords:
    """Checkpoints, compactions and usage, on the praetorium's one connection."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    # ---------------------------------------------------------- agent sessions

    async def get_checkpoint(self, agent: str) -> Checkpoint | None:
        """The agent's saved SDK session and delivery checkpoint, if any."""
        async with self._db.execute(
            "SELECT agent, session_id, last_seq, prompt_hash, updated_at "
            "FROM agent_sessions WHERE agent = ?",
            (agent,),
        ) as cursor:
            row = await cursor.fetchone()
        if row is None:
            return None
        return Checkpoint(
            agent=row["agent"],
            session_id=row["session_id"],
            last_seq=int(row["last_seq"]),
            prompt_hash=row["prompt_hash"],
            updated_at=datetime.fromisoformat(row["updated_at"]),
        )

    async def set_checkpoint(
        self, agent: str, session_id: str | None, last_seq: int, prompt_hash: str | None
    ) -> None:
        """Save (replace) the agent's SDK session id, checkpoint seq and prompt hash."""
        await self._db.execute(
            "INSERT INTO agent_sessions (agent, session_id, last_seq, prompt_hash, updated_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent) DO UPDATE SET "
            "session_id = excluded.session_id, last_seq = excluded.last_seq, "
            "prompt_hash = excluded.prompt_hash, updated_at = excluded.updated_at",
            (agent, session_id, last_seq, prompt_hash, now().isoformat()),
        )

    async def clear_checkpoint(self, agent: str) -> None:
        """Forget the agent's SDK session (a reset)."""
        await self._db.execute("DELETE FROM agent_sessions WHERE agent = ?", (agent,))

    # ---------------------------------------------------------- compactions

    async def add_compaction(
        self,
        agent: str,
        summary: str,
        first_kept_seq: int,
        tokens_before: int,
        *,
        session_id: str | None = None,
        reason: str = "command",
        instructions: str | None = None,
    ) -> Compaction:
        """Store a compaction record; it becomes the agent's current one."""
        async with self._db.execute(
            "INSERT INTO compactions (agent, summary, first_kept_seq, tokens_before, session_id, "
            "reason, instructions, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            f"RETURNING {COMPACTION_COLUMNS}",
            (
                agent,
                summary,
                first_kept_seq,
                tokens_before,
                session_id,
                reason,
                instructions,
                now().isoformat(),
            ),
        ) as cursor:
            row = await cursor.fetchone()
        assert row is not None
        return _compaction(row)

    async def latest_compaction(self, agent: str) -> Compaction | None:
        """The agent's current compaction record (the newest one not cleared by a reset)."""
        async with self._db.execute(
            f"SELECT {COMPACTION_COLUMNS} FROM compactions WHERE agent = ? "
            "AND cleared_at IS NULL ORDER BY id DESC LIMIT 1",
            (agent,),
        ) as cursor:
            row = await cursor.fetchone()
        return _compaction(row) if row is not None else None

    async def clear_compactions(self, agent: str) -> int:
        """Stop giving the agent its summaries (a reset); the records are kept."""
        cursor = await self._db.execute(
            "UPDATE compactions SET cleared_at = ? WHERE agent = ? AND cleared_at IS NULL",
            (now().isoformat(), agent),
        )
        return cursor.rowcount

    # ---------------------------------------------------------- usage

    async def record_turn(self, turn: QueryUsage) -> None:
        """Store the usage of one agent query."""
        await self._db.execute(
            "INSERT INTO turns (agent, session_id, nuntius_seq, input_tokens, output_tokens, "
            "cache_read_tokens, cache_creation_tokens, cost_usd, duration_ms, is_error, "
            "created_at, model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                turn.agent,
                turn.session_id,
                turn.nuntius_seq,
                turn.input_tokens,
                turn.output_tokens,
                turn.cache_read_tokens,
                turn.cache_creation_tokens,
                turn.cost_usd,
                turn.duration_ms,
                int(turn.is_error),
                now().isoformat(),
                turn.model,
            ),
        )

    async def usage_totals(self) -> dict[str, UsageTotals]:
        """Per agent: turns, errors, tokens and cost, summed over every recorded turn."""
        async with self._db.execute(
            "SELECT agent, count(*) AS turns, sum(is_error) AS errors, "
            "sum(input_tokens) AS input, sum(output_tokens) AS output, "
            "sum(cache_read_tokens) AS cache_read, sum(cache_creation_tokens) AS cache_creation, "
            "sum(cost_usd) AS cost FROM turns GROUP BY agent ORDER BY agent"
        ) as cursor:
            rows = await cursor.fetchall()
        return {
            r["agent"]: UsageTotals(
                turns=int(r["turns"]),
                errors=int(r["errors"]),
                input_tokens=int(r["input"]),
                output_tokens=int(r["output"]),
                cache_read_tokens=int(r["cache_read"]),
                cache_creation_tokens=int(r["cache_creation"]),
                cost_usd=float(r["cost"]),
            )
            for r in rows
        }

    async def usage_since(self, since: datetime) -> list[UsageRow]:
        """Per agent and model: turns, tokens and cost of the turns since ``since``."""
        async with self._db.execute(
            "SELECT agent, coalesce(model, '') AS model, count(*) AS turns, "
            "sum(input_tokens + cache_read_tokens + cache_creation_tokens) AS input, "
            "sum(output_tokens) AS output, sum(cost_usd) AS cost FROM turns "
            "WHERE created_at >= ? GROUP BY agent, model ORDER BY agent, model",
            (since.astimezone(UTC).isoformat(),),
        ) as cursor:
            rows = await cursor.fetchall()
        return [
            UsageRow(
                r["agent"],
                r["model"],
                int(r["turns"]),
                int(r["input"]),
                int(r["output"]),
                float(r["cost"]),
            )
            for r in rows
        ]

    async def spend_by_day(self, since: datetime) -> list[tuple[str, str, float]]:
        """(UTC day, project or "", cost) of the turns since ``since``: each turn's
        request's ``#project``, as the digest counts it."""
        async with self._db.execute(
            "SELECT substr(t.created_at, 1, 10) AS day, coalesce(n.project, '') AS project, "
            "sum(t.cost_usd) AS cost FROM turns AS t "
            "LEFT JOIN nuntii AS n ON n.seq = t.nuntius_seq "
            "WHERE t.created_at >= ? GROUP BY 1, 2 ORDER BY 1, 2",
            (since.astimezone(UTC).isoformat(),),
        ) as cursor:
            rows = await cursor.fetchall()
        return [(r["day"], r["project"], float(r["cost"] or 0)) for r in rows]

    async def session_cost(self, session_id: str) -> float:
        """What one SDK session has cost so far, by the turns recorded for it."""
        async with self._db.execute(
            "SELECT coalesce(sum(cost_usd), 0) AS cost FROM turns WHERE session_id = ?",
            (session_id,),
        ) as cursor:
            row = await cursor.fetchone()
        return float(row["cost"]) if row else 0.0
