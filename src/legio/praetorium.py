"""The praetorium: every nuntius, kept forever in SQLite, exact and indexed.

Design, in short:

- The seed's ``nuntii`` table (UUID ``id``, sender, text, JSON audience, ISO
  timestamp, ``reply_to`` foreign key, both indexes) gains ``seq``, an
  ``INTEGER PRIMARY KEY AUTOINCREMENT``: ordering, paging and agents' checkpoints use
  it, never timestamp strings.
- ``participants(member, seq)`` holds each audience member and the sender of every
  nuntius; a trigger fills it in the same transaction as the insert. A viewer's
  history is two backward walks of that index (its own name and ``all``), each
  stopping after ``limit`` rows, so its cost does not grow with the database.
- ``nuntii_fts`` is an external-content FTS5 index kept in sync by triggers, ranked
  with ``bm25()``.
- ``agent_sessions`` keeps each agent's SDK session id and delivery checkpoint;
  ``turns`` the token usage of every agent query.
- Migrations are an append-only list of functions, each applied in one transaction
  with its record in ``_migrations``. The first one is the seed's schema, written with
  ``IF NOT EXISTS``, so a database made by the seed system upgrades in place.

One long-lived aiosqlite connection in autocommit mode; every write is one
statement or an explicit ``BEGIN IMMEDIATE`` … ``COMMIT``. Posts are group-committed:
those waiting while a write is under way go into the next single multi-row
``INSERT … RETURNING``, in call order, so seq order is the order ``post`` was called.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite

from legio.errors import LegioError

logger = logging.getLogger(__name__)

PRIVILEGED = frozenset({"caesar", "legatus"})
BROADCAST = "all"
MEMBER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}\Z")
BUSY_TIMEOUT_MS = 10_000
MAX_BATCH = 500  # rows per group-committed INSERT (7 parameters each)


class PraetoriumError(LegioError):
    """A request the praetorium cannot carry out, explained for a person."""


class SearchQueryError(PraetoriumError):
    """A search query that FTS5 cannot parse."""


class DuplicateOrigin(PraetoriumError):
    """A nuntius from this origin (e.g. this Telegram message) is already stored."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        super().__init__(f"a nuntius from {origin} is already stored")


@dataclass(frozen=True)
class Nuntius:
    """One message between Caesar and the agents."""

    id: str
    seq: int
    sender: str
    text: str
    audience: tuple[str, ...]
    timestamp: datetime
    reply_to: str | None = None
    origin: str | None = None


@dataclass(frozen=True)
class SearchHit:
    nuntius: Nuntius
    snippet: str
    rank: float


@dataclass(frozen=True)
class Checkpoint:
    """What an agent's SDK session has already been given."""

    agent: str
    session_id: str | None
    last_seq: int
    prompt_hash: str | None
    updated_at: datetime


@dataclass(frozen=True)
class Turn:
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


# ------------------------------------------------------------------ migrations

Migration = Callable[[aiosqlite.Connection], Awaitable[None]]
MIGRATIONS: list[tuple[str, Migration]] = []


def migration(func: Migration) -> Migration:
    """Register a migration; they run in the order they are defined, once each."""
    MIGRATIONS.append((func.__name__, func))
    return func


async def _script(db: aiosqlite.Connection, statements: Iterable[str]) -> None:
    for statement in statements:
        await db.execute(statement)


@migration
async def m001_seed_nuntii(db: aiosqlite.Connection) -> None:
    """The seed's schema, as it was; IF NOT EXISTS adopts a seed database."""
    await _script(
        db,
        [
            """CREATE TABLE IF NOT EXISTS nuntii (
                id TEXT PRIMARY KEY,
                sender TEXT NOT NULL,
                text TEXT NOT NULL,
                audience TEXT NOT NULL,
                timestamp TEXT NOT NULL,
                reply_to TEXT,
                FOREIGN KEY (reply_to) REFERENCES nuntii(id)
            )""",
            "CREATE INDEX IF NOT EXISTS idx_nuntii_timestamp ON nuntii(timestamp)",
            "CREATE INDEX IF NOT EXISTS idx_nuntii_sender ON nuntii(sender)",
        ],
    )


@migration
async def m002_seq_participants_fts(db: aiosqlite.Connection) -> None:
    """Sequence numbers, the participants index, and full-text search."""
    await _script(
        db,
        [
            """CREATE TABLE nuntii_new (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                sender TEXT NOT NULL,
                text TEXT NOT NULL,
                audience TEXT NOT NULL,
                timestamp TEXT NOT NULL,
                reply_to TEXT,
                FOREIGN KEY (reply_to) REFERENCES nuntii(id)
            )""",
            """INSERT INTO nuntii_new (id, sender, text, audience, timestamp, reply_to)
               SELECT id, sender, text, audience, timestamp, reply_to
               FROM nuntii ORDER BY timestamp, rowid""",
            "DROP TABLE nuntii",
            "ALTER TABLE nuntii_new RENAME TO nuntii",
            "CREATE INDEX idx_nuntii_timestamp ON nuntii(timestamp)",
            "CREATE INDEX idx_nuntii_sender ON nuntii(sender)",
            """CREATE TABLE participants (
                member TEXT NOT NULL,
                seq INTEGER NOT NULL REFERENCES nuntii(seq) ON DELETE CASCADE,
                PRIMARY KEY (member, seq)
            ) WITHOUT ROWID""",
            """INSERT OR IGNORE INTO participants (member, seq)
               SELECT j.value, n.seq FROM nuntii AS n, json_each(n.audience) AS j
               UNION SELECT sender, seq FROM nuntii""",
            """CREATE TRIGGER nuntii_participants AFTER INSERT ON nuntii BEGIN
                INSERT OR IGNORE INTO participants (member, seq)
                SELECT value, new.seq FROM json_each(new.audience)
                UNION SELECT new.sender, new.seq;
            END""",
            """CREATE VIRTUAL TABLE nuntii_fts USING fts5(
                text, content='nuntii', content_rowid='seq',
                tokenize='unicode61 remove_diacritics 2'
            )""",
            "INSERT INTO nuntii_fts (nuntii_fts) VALUES ('rebuild')",
            """CREATE TRIGGER nuntii_fts_insert AFTER INSERT ON nuntii BEGIN
                INSERT INTO nuntii_fts (rowid, text) VALUES (new.seq, new.text);
            END""",
            """CREATE TRIGGER nuntii_fts_delete AFTER DELETE ON nuntii BEGIN
                INSERT INTO nuntii_fts (nuntii_fts, rowid, text)
                VALUES ('delete', old.seq, old.text);
            END""",
            """CREATE TRIGGER nuntii_fts_update AFTER UPDATE OF text ON nuntii BEGIN
                INSERT INTO nuntii_fts (nuntii_fts, rowid, text)
                VALUES ('delete', old.seq, old.text);
                INSERT INTO nuntii_fts (rowid, text) VALUES (new.seq, new.text);
            END""",
        ],
    )


@migration
async def m003_agent_sessions_and_turns(db: aiosqlite.Connection) -> None:
    """Agents' SDK sessions and checkpoints; per-query token usage."""
    await _script(
        db,
        [
            """CREATE TABLE agent_sessions (
                agent TEXT PRIMARY KEY,
                session_id TEXT,
                last_seq INTEGER NOT NULL DEFAULT 0,
                prompt_hash TEXT,
                updated_at TEXT NOT NULL
            )""",
            """CREATE TABLE turns (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                agent TEXT NOT NULL,
                session_id TEXT,
                nuntius_seq INTEGER,
                input_tokens INTEGER NOT NULL DEFAULT 0,
                output_tokens INTEGER NOT NULL DEFAULT 0,
                cache_read_tokens INTEGER NOT NULL DEFAULT 0,
                cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
                cost_usd REAL NOT NULL DEFAULT 0,
                duration_ms INTEGER NOT NULL DEFAULT 0,
                is_error INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX idx_turns_agent ON turns(agent, id)",
        ],
    )


@migration
async def m004_origins_and_interruptions(db: aiosqlite.Connection) -> None:
    """Where a nuntius came from (one nuntius per Telegram message), and interrupted requests."""
    await _script(
        db,
        [
            "ALTER TABLE nuntii ADD COLUMN origin TEXT",
            "CREATE UNIQUE INDEX idx_nuntii_origin ON nuntii(origin) WHERE origin IS NOT NULL",
            "CREATE INDEX idx_nuntii_reply_to ON nuntii(reply_to) WHERE reply_to IS NOT NULL",
            """CREATE TABLE interruptions (
                seq INTEGER PRIMARY KEY REFERENCES nuntii(seq),
                agents TEXT NOT NULL,
                noticed_at TEXT NOT NULL,
                retried_at TEXT
            )""",
        ],
    )


@migration
async def m005_compactions(db: aiosqlite.Connection) -> None:
    """Agents' compaction records (summaries of their conversations), never deleted."""
    await _script(
        db,
        [
            """CREATE TABLE compactions (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                agent TEXT NOT NULL,
                summary TEXT NOT NULL,
                first_kept_seq INTEGER NOT NULL,
                tokens_before INTEGER NOT NULL DEFAULT 0,
                session_id TEXT,
                reason TEXT NOT NULL,
                instructions TEXT,
                created_at TEXT NOT NULL,
                cleared_at TEXT
            )""",
            "CREATE INDEX idx_compactions_agent ON compactions(agent, id)",
        ],
    )


@migration
async def m006_attachments(db: aiosqlite.Connection) -> None:
    """Files that came with or went out with a nuntius, and incoming files still on their way.

    An incoming file is first an ``attachments_pending`` row (written before the download,
    keyed by the message's origin); the trigger moves it into ``attachments`` in the same
    statement that inserts its nuntius, so a restart at any point neither loses the file
    nor stores it twice.
    """
    columns = """kind TEXT NOT NULL,
                mime_type TEXT NOT NULL,
                name TEXT NOT NULL,
                size INTEGER NOT NULL DEFAULT 0,
                sha256 TEXT,
                file_unique_id TEXT,
                created_at TEXT NOT NULL"""
    await _script(
        db,
        [
            f"""CREATE TABLE attachments (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                nuntius_seq INTEGER NOT NULL REFERENCES nuntii(seq),
                direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
                {columns},
                source_path TEXT
            )""",
            "CREATE INDEX idx_attachments_nuntius ON attachments(nuntius_seq)",
            f"""CREATE TABLE attachments_pending (
                origin TEXT PRIMARY KEY,
                text TEXT NOT NULL,
                file_id TEXT,
                {columns}
            )""",
            """CREATE TRIGGER attachments_arrive AFTER INSERT ON nuntii
               WHEN new.origin IS NOT NULL BEGIN
                INSERT INTO attachments (nuntius_seq, direction, kind, mime_type, name, size,
                    sha256, file_unique_id, created_at)
                SELECT new.seq, 'in', kind, mime_type, name, size, sha256, file_unique_id,
                    created_at
                FROM attachments_pending WHERE origin = new.origin AND sha256 IS NOT NULL;
                DELETE FROM attachments_pending WHERE origin = new.origin;
            END""",
        ],
    )


# ------------------------------------------------------------------ the store


def _now() -> datetime:
    return datetime.now(UTC)


def _nuntius(row: sqlite3.Row | tuple[Any, ...]) -> Nuntius:
    seq, id_, sender, text, audience, timestamp, reply_to, origin = tuple(row)[:8]
    return Nuntius(
        id=id_,
        seq=seq,
        sender=sender,
        text=text,
        audience=tuple(json.loads(audience)),
        timestamp=datetime.fromisoformat(timestamp),
        reply_to=reply_to,
        origin=origin,
    )


COLUMNS = "n.seq, n.id, n.sender, n.text, n.audience, n.timestamp, n.reply_to, n.origin"
COMPACTION_COLUMNS = (
    "id, agent, summary, first_kept_seq, tokens_before, session_id, reason, instructions, "
    "created_at"
)


def _compaction(row: sqlite3.Row | tuple[Any, ...]) -> Compaction:
    id_, agent, summary, first_kept, tokens, session_id, reason, instructions, created = row
    return Compaction(
        int(id_),
        agent,
        summary,
        int(first_kept),
        int(tokens),
        session_id,
        reason,
        instructions,
        datetime.fromisoformat(created),
    )


def validate_member(name: str, role: str) -> None:
    if not isinstance(name, str) or not MEMBER_NAME.match(name):
        raise PraetoriumError(
            f"{role} {name!r} is not a valid name (lowercase letters, digits, '-' or '_', "
            "a letter first, at most 32 characters)"
        )


class Praetorium:
    """The store. ``async with await Praetorium.open(path) as p`` or ``open``/``close``."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        self._pending: list[tuple[Nuntius, asyncio.Future[int]]] = []
        self._writer: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, path: Path | str, *, synchronous: str = "FULL") -> Praetorium:
        """Open (creating if needed) and migrate the database at ``path``.

        ``synchronous`` is SQLite's setting: ``FULL`` (the default) makes every commit
        survive a power loss; ``NORMAL`` survives a crash of the process only.
        """
        if synchronous not in ("FULL", "NORMAL"):
            raise PraetoriumError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        path = Path(path)
        try:
            db = await aiosqlite.connect(path, isolation_level=None)
        except sqlite3.Error as e:
            raise PraetoriumError(f"cannot open the praetorium at {path}: {e}") from e
        try:
            await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute(f"PRAGMA synchronous = {synchronous}")
            await _migrate(db)
            await db.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            await db.close()
            raise
        return cls(db, path)

    @property
    def connection(self) -> aiosqlite.Connection:
        """The one aiosqlite connection, for the store's sibling tables (jobs, attachments…)."""
        return self._db

    async def close(self) -> None:
        """Finish pending writes, then close the connection (idempotent)."""
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)
        await self._db.close()

    async def __aenter__(self) -> Praetorium:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ---------------------------------------------------------- nuntii

    async def post(
        self,
        sender: str,
        text: str,
        audience: Sequence[str],
        reply_to: str | None = None,
        origin: str | None = None,
    ) -> Nuntius:
        """Store a nuntius; return it with its ``seq``. Raises ``PraetoriumError`` on bad input.

        ``origin`` names where it came from (e.g. ``telegram:<chat>:<message>``); a second
        nuntius with the same origin raises ``DuplicateOrigin``.
        """
        if not isinstance(text, str):
            raise PraetoriumError(f"a nuntius's text must be a string, got {type(text).__name__}")
        validate_member(sender, "sender")
        members = tuple(dict.fromkeys(audience))
        if not members:
            raise PraetoriumError("a nuntius needs an audience: at least one recipient")
        for member in members:
            validate_member(member, "audience member")
        if BROADCAST in members and len(members) > 1:
            raise PraetoriumError("the audience 'all' stands alone: it already includes everyone")
        nuntius = Nuntius(str(uuid.uuid4()), 0, sender, text, members, _now(), reply_to, origin)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append((nuntius, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_pending())
        seq = await asyncio.shield(future)
        return dataclasses.replace(nuntius, seq=seq)

    async def _write_pending(self) -> None:
        """Group commit: every post waiting now goes into one multi-row INSERT."""
        while self._pending:
            batch = self._pending[:MAX_BATCH]
            del self._pending[:MAX_BATCH]
            try:
                seqs = await self._insert([n for n, _ in batch])
            except (sqlite3.IntegrityError, ValueError):
                if len(batch) > 1:  # find the culprit: the others must still be stored
                    for item in batch:
                        await self._write_one(*item)
                    continue
                await self._write_one(*batch[0])
                continue
            except asyncio.CancelledError:
                for _, future in batch:
                    future.cancel()
                raise
            except Exception as e:  # the database itself failed: tell every caller
                for _, future in batch:
                    if not future.done():
                        future.set_exception(e)
                continue
            for nuntius, future in batch:
                if not future.done():
                    future.set_result(seqs[nuntius.id])

    async def _write_one(self, nuntius: Nuntius, future: asyncio.Future[int]) -> None:
        try:
            seqs = await self._insert([nuntius])
        except sqlite3.IntegrityError as e:
            error: Exception = e
            if nuntius.origin is not None and "nuntii.origin" in str(e):
                error = DuplicateOrigin(nuntius.origin)
            elif nuntius.reply_to is not None and "FOREIGN KEY" in str(e):
                error = PraetoriumError(
                    f"reply_to {nuntius.reply_to!r} is not the id of a stored nuntius"
                )
            future.set_exception(error)
        except ValueError as e:  # e.g. text that is not valid Unicode (lone surrogates)
            future.set_exception(PraetoriumError(f"the text cannot be stored: {e}"))
        except Exception as e:
            future.set_exception(e)
        else:
            future.set_result(seqs[nuntius.id])

    async def _insert(self, batch: list[Nuntius]) -> dict[str, int]:
        """Insert nuntii in one statement (one transaction); return their seqs by id."""
        values = ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(batch))
        params: list[Any] = []
        for n in batch:
            params += [n.id, n.sender, n.text, json.dumps(n.audience), n.timestamp.isoformat()]
            params += [n.reply_to, n.origin]
        rows = await self._db.execute_fetchall(
            "INSERT INTO nuntii (id, sender, text, audience, timestamp, reply_to, origin) "
            f"VALUES {values} RETURNING id, seq",
            params,
        )
        return {row[0]: int(row[1]) for row in rows}

    async def get(self, nuntius_id: str) -> Nuntius | None:
        """One nuntius by its UUID."""
        async with self._db.execute(
            f"SELECT {COLUMNS} FROM nuntii AS n WHERE n.id = ?", (nuntius_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return _nuntius(row) if row else None

    async def get_history(self, limit: int, before_seq: int | None = None) -> list[Nuntius]:
        """All nuntii, newest first (the admin view); ``before_seq`` pages backwards."""
        before = before_seq if before_seq is not None else 2**63 - 1
        async with self._db.execute(
            f"SELECT {COLUMNS} FROM nuntii AS n WHERE n.seq < ? ORDER BY n.seq DESC LIMIT ?",
            (before, max(0, limit)),
        ) as cursor:
            return [_nuntius(r) for r in await cursor.fetchall()]

    async def get_visible_nuntii(
        self,
        viewer: str,
        limit: int,
        after_seq: int | None = None,
        before_seq: int | None = None,
    ) -> list[Nuntius]:
        """The ``limit`` most recent nuntii ``viewer`` may see, oldest first.

        Only seqs strictly between ``after_seq`` and ``before_seq`` count. Caesar and the
        Legatus see everything; a centurio sees what is addressed to it or to ``all``,
        and what it sent itself.
        """
        after = after_seq or 0
        before = before_seq if before_seq is not None else 2**63 - 1
        limit = max(0, limit)
        if viewer in PRIVILEGED:
            sql = (
                f"SELECT {COLUMNS} FROM nuntii AS n WHERE n.seq > ? AND n.seq < ? "
                "ORDER BY n.seq DESC LIMIT ?"
            )
            params: tuple[Any, ...] = (after, before, limit)
        else:
            walk = "SELECT seq FROM participants WHERE member = {} AND seq > ? AND seq < ? "
            walk += "ORDER BY seq DESC LIMIT ?"
            sql = f"""
                SELECT {COLUMNS} FROM nuntii AS n WHERE n.seq IN (
                    SELECT seq FROM ({walk.format("?")})
                    UNION
                    SELECT seq FROM ({walk.format(repr(BROADCAST))})
                ) ORDER BY n.seq DESC LIMIT ?"""
            params = (viewer, after, before, limit, after, before, limit, limit)
        async with self._db.execute(sql, params) as cursor:
            rows = await cursor.fetchall()
        return [_nuntius(r) for r in reversed(list(rows))]

    async def search(self, query: str, viewer: str, limit: int = 10) -> list[SearchHit]:
        """Full-text search (FTS5 syntax), best first, only what ``viewer`` may see."""
        if not query.strip():
            raise SearchQueryError("the search query is empty: give one or more words")
        visibility = ""
        params: list[Any] = [query]
        if viewer not in PRIVILEGED:
            visibility = (
                "AND EXISTS (SELECT 1 FROM participants AS p "
                f"WHERE p.seq = n.seq AND p.member IN (?, '{BROADCAST}'))"
            )
            params.append(viewer)
        params.append(max(0, limit))
        sql = f"""
            SELECT {COLUMNS},
                   snippet(nuntii_fts, 0, '«', '»', '…', 12) AS snip,
                   bm25(nuntii_fts) AS rank
            FROM nuntii_fts JOIN nuntii AS n ON n.seq = nuntii_fts.rowid
            WHERE nuntii_fts MATCH ? {visibility}
            ORDER BY rank LIMIT ?"""
        try:
            async with self._db.execute(sql, params) as cursor:
                rows = await cursor.fetchall()
        except sqlite3.OperationalError as e:
            message = str(e)
            if not any(word in message for word in ("database", "disk", "locked", "memory")):
                raise SearchQueryError(
                    f"cannot search for {query!r}: {message.removeprefix('fts5: ')}. "
                    'Use plain words, or put a phrase in "double quotes".'
                ) from e
            raise
        return [SearchHit(_nuntius(r), r[8], float(r[9])) for r in rows]

    async def get_by_origin(self, origin: str) -> Nuntius | None:
        """The nuntius that came from ``origin``, if stored."""
        async with self._db.execute(
            f"SELECT {COLUMNS} FROM nuntii AS n WHERE n.origin = ?", (origin,)
        ) as cursor:
            row = await cursor.fetchone()
        return _nuntius(row) if row else None

    async def repliers(self, nuntius_id: str) -> set[str]:
        """Who has answered the nuntius ``nuntius_id``."""
        rows = await self._db.execute_fetchall(
            "SELECT DISTINCT sender FROM nuntii WHERE reply_to = ?", (nuntius_id,)
        )
        return {row[0] for row in rows}

    async def recent_from(self, sender: str, limit: int) -> list[Nuntius]:
        """The latest ``limit`` nuntii sent by ``sender``, oldest first."""
        rows = await self._db.execute_fetchall(
            f"SELECT {COLUMNS} FROM nuntii AS n WHERE n.sender = ? ORDER BY n.seq DESC LIMIT ?",
            (sender, limit),
        )
        return [_nuntius(r) for r in reversed(list(rows))]

    async def note_interruption(self, seq: int, agents: Sequence[str]) -> None:
        """Record that Caesar was told nuntius ``seq`` went unanswered by ``agents``."""
        await self._db.execute(
            "INSERT OR IGNORE INTO interruptions (seq, agents, noticed_at) VALUES (?, ?, ?)",
            (seq, json.dumps(list(agents)), _now().isoformat()),
        )

    async def interruptions(self, *, pending_only: bool = True) -> list[tuple[Nuntius, list[str]]]:
        """Interrupted requests Caesar was told about (not yet retried), oldest first."""
        where = "WHERE i.retried_at IS NULL" if pending_only else ""
        rows = await self._db.execute_fetchall(
            f"SELECT {COLUMNS}, i.agents FROM interruptions AS i "
            f"JOIN nuntii AS n ON n.seq = i.seq {where} ORDER BY i.seq"
        )
        return [(_nuntius(r), list(json.loads(r[8]))) for r in rows]

    async def is_noted(self, seq: int) -> bool:
        rows = await self._db.execute_fetchall("SELECT 1 FROM interruptions WHERE seq = ?", (seq,))
        return bool(rows)

    async def mark_retried(self, seq: int) -> bool:
        """Mark an interrupted request as retried; False if it already was (or is unknown)."""
        async with self._db.execute(
            "UPDATE interruptions SET retried_at = ? WHERE seq = ? AND retried_at IS NULL",
            (_now().isoformat(), seq),
        ) as cursor:
            return cursor.rowcount == 1

    async def count(self) -> int:
        """How many nuntii are stored."""
        async with self._db.execute("SELECT count(*) FROM nuntii") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def last_seq(self) -> int:
        """The highest seq stored (0 for an empty praetorium)."""
        async with self._db.execute("SELECT coalesce(max(seq), 0) FROM nuntii") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

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
        return Checkpoint(row[0], row[1], int(row[2]), row[3], datetime.fromisoformat(row[4]))

    async def set_checkpoint(
        self, agent: str, session_id: str | None, last_seq: int, prompt_hash: str | None
    ) -> None:
        """Save (replace) the agent's SDK session id, checkpoint seq and prompt hash."""
        await self._db.execute(
            "INSERT INTO agent_sessions (agent, session_id, last_seq, prompt_hash, updated_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent) DO UPDATE SET "
            "session_id = excluded.session_id, last_seq = excluded.last_seq, "
            "prompt_hash = excluded.prompt_hash, updated_at = excluded.updated_at",
            (agent, session_id, last_seq, prompt_hash, _now().isoformat()),
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
                _now().isoformat(),
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
            (_now().isoformat(), agent),
        )
        return cursor.rowcount

    # ---------------------------------------------------------- usage

    async def record_turn(self, turn: Turn) -> None:
        """Store the usage of one agent query."""
        await self._db.execute(
            "INSERT INTO turns (agent, session_id, nuntius_seq, input_tokens, output_tokens, "
            "cache_read_tokens, cache_creation_tokens, cost_usd, duration_ms, is_error, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                _now().isoformat(),
            ),
        )

    async def usage_totals(self) -> dict[str, UsageTotals]:
        """Per agent: turns, errors, tokens and cost, summed over every recorded turn."""
        async with self._db.execute(
            "SELECT agent, count(*), sum(is_error), sum(input_tokens), sum(output_tokens), "
            "sum(cache_read_tokens), sum(cache_creation_tokens), sum(cost_usd) "
            "FROM turns GROUP BY agent ORDER BY agent"
        ) as cursor:
            rows = await cursor.fetchall()
        return {
            r[0]: UsageTotals(
                int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6]), float(r[7])
            )
            for r in rows
        }


async def _migrate(db: aiosqlite.Connection) -> None:
    """Apply the migrations this database has not had yet, each in one transaction."""
    await db.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    async with db.execute("SELECT name FROM _migrations") as cursor:
        applied = {row[0] for row in await cursor.fetchall()}
    known = {name for name, _ in MIGRATIONS}
    unknown = applied - known
    if unknown:
        raise PraetoriumError(
            f"the praetorium was written by a newer Legio (migrations {sorted(unknown)}); "
            "upgrade Legio to open it"
        )
    for number, (name, func) in enumerate(MIGRATIONS, start=1):
        if name in applied:
            continue
        await db.execute("PRAGMA foreign_keys = OFF")  # table rebuilds, as SQLite advises
        await db.execute("BEGIN IMMEDIATE")
        try:
            await func(db)
            await db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (name, _now().isoformat()),
            )
            await db.execute(f"PRAGMA user_version = {number}")
            await db.execute("COMMIT")
        except BaseException:
            await db.execute("ROLLBACK")
            raise
        logger.info("praetorium: applied migration %s", name)
