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
  ``turns`` the token usage of every agent query; ``compactions`` their summaries
  (those three in ``legio.store.records``, the praetorium's ``records``).
- The schema is built by the append-only migrations of ``legio.store.migrations``; the
  first one is the seed's schema, so a database made by the seed system upgrades in place.
- Rows are read by column name (``aiosqlite.Row``).

One long-lived aiosqlite connection in autocommit mode; every write is one
statement or an explicit ``BEGIN IMMEDIATE`` … ``COMMIT``. Posts are group-committed:
those waiting while a write is under way go into the next single multi-row
``INSERT … RETURNING``, in call order, so seq order is the order ``post`` was called.
A post with nothing else waiting is sent to the database thread at once, from the
caller's own task (no writer task to wait a turn of the event loop for).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite

from legio.errors import DuplicateOrigin, PraetoriumError, SearchQueryError
from legio.names import BROADCAST, NAME, NAME_RULE, PRIVILEGED
from legio.store.cardstore import CardStore
from legio.store.migrations import migrate
from legio.store.records import (
    AgentRecords,
)
from legio.timing import now

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
MAX_BATCH = 500  # rows per group-committed INSERT (8 parameters each)


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
    forwarded_from: str | None = None  # a forward's (or inline bot's) source, not Caesar
    project: str | None = None  # the [projects] entry it was about (its #name)
    plan: bool = False  # /plan: answered in plan mode (this run's flag, not stored)


@dataclass(frozen=True)
class AnsweredNuntius:
    """A nuntius with who has answered it and whether Caesar was told it went unanswered."""

    nuntius: Nuntius
    repliers: frozenset[str]
    noted: bool


@dataclass(frozen=True)
class SearchHit:
    nuntius: Nuntius
    snippet: str
    rank: float


# ------------------------------------------------------------------ the store


def _nuntius(row: sqlite3.Row) -> Nuntius:
    return Nuntius(
        id=row["id"],
        seq=row["seq"],
        sender=row["sender"],
        text=row["text"],
        audience=tuple(json.loads(row["audience"])),
        timestamp=datetime.fromisoformat(row["timestamp"]),
        reply_to=row["reply_to"],
        origin=row["origin"],
        forwarded_from=row["forwarded_from"],
        project=row["project"],
    )


COLUMNS = (
    "n.seq, n.id, n.sender, n.text, n.audience, n.timestamp, n.reply_to, n.origin, "
    "n.forwarded_from, n.project"
)


def validate_member(name: str, role: str) -> None:
    if not isinstance(name, str) or not NAME.match(name):
        raise PraetoriumError(f"{role} {name!r} is not a valid name ({NAME_RULE})")


def _refusal(nuntius: Nuntius, e: sqlite3.IntegrityError | ValueError) -> Exception:
    """What the caller of ``post`` is told when the database refuses ``nuntius``."""
    if isinstance(e, ValueError):  # e.g. text that is not valid Unicode (lone surrogates)
        return PraetoriumError(f"the text cannot be stored: {e}")
    if nuntius.origin is not None and "nuntii.origin" in str(e):
        return DuplicateOrigin(nuntius.origin)
    if nuntius.reply_to is not None and "FOREIGN KEY" in str(e):
        return PraetoriumError(f"reply_to {nuntius.reply_to!r} is not the id of a stored nuntius")
    return e


class Praetorium:
    """The store. ``async with await Praetorium.open(path) as p`` or ``open``/``close``."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.records = AgentRecords(db)  # checkpoints, compactions, usage: on this connection
        self.cards = CardStore(db)  # work cards (legio.store.cardstore)
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
            await migrate(db)
            db.row_factory = aiosqlite.Row
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
        forwarded_from: str | None = None,
        project: str | None = None,
    ) -> Nuntius:
        """Store a nuntius; return it with its ``seq``. Raises ``PraetoriumError`` on bad input.

        ``origin`` names where it came from (e.g. ``telegram:<chat>:<message>``); a second
        nuntius with the same origin raises ``DuplicateOrigin``. ``forwarded_from`` names
        the source of a message Caesar forwarded (or sent via an inline bot); ``project``
        the project it was about.
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
        nuntius = Nuntius(
            str(uuid.uuid4()),
            0,
            sender,
            text,
            members,
            now(),
            reply_to,
            origin,
            forwarded_from,
            project,
        )
        if not self._pending and (self._writer is None or self._writer.done()):
            # Alone: queued on the database thread now. A post that comes meanwhile starts
            # a writer, whose INSERT the thread runs after this one (seq order holds).
            try:
                seqs = await self._insert([nuntius])
            except (sqlite3.IntegrityError, ValueError) as e:
                raise _refusal(nuntius, e) from e
            return dataclasses.replace(nuntius, seq=seqs[nuntius.id])
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
        except (sqlite3.IntegrityError, ValueError) as e:
            future.set_exception(_refusal(nuntius, e))
        except Exception as e:
            future.set_exception(e)
        else:
            future.set_result(seqs[nuntius.id])

    async def _insert(self, batch: list[Nuntius]) -> dict[str, int]:
        """Insert nuntii in one statement (one transaction); return their seqs by id."""
        values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(batch))
        params: list[Any] = []
        for n in batch:
            params += [n.id, n.sender, n.text, json.dumps(n.audience), n.timestamp.isoformat()]
            params += [n.reply_to, n.origin, n.forwarded_from, n.project]
        rows = await self._db.execute_fetchall(
            "INSERT INTO nuntii (id, sender, text, audience, timestamp, reply_to, origin, "
            "forwarded_from, project) "
            f"VALUES {values} RETURNING id, seq",
            params,
        )
        return {row["id"]: int(row["seq"]) for row in rows}

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
            # FTS5 reports a query it cannot parse as a plain SQLITE_ERROR ("fts5: syntax
            # error", "no such column: database", "unterminated string"); a busy, full or
            # broken database has its own codes and is not the query's fault.
            if getattr(e, "sqlite_errorcode", sqlite3.SQLITE_ERROR) != sqlite3.SQLITE_ERROR:
                raise
            raise SearchQueryError(
                f"that search could not be read: {str(e).removeprefix('fts5: ')} (in {query!r}). "
                'Use plain words, or put a phrase in "double quotes".'
            ) from e
        return [SearchHit(_nuntius(r), r["snip"], float(r["rank"])) for r in rows]

    async def get_by_origin(self, origin: str) -> Nuntius | None:
        """The nuntius that came from ``origin`` (a Telegram message, a job's run), if stored."""
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
        return {row["sender"] for row in rows}

    async def requests_from(self, *senders: str, limit: int) -> list[AnsweredNuntius]:
        """The latest ``limit`` nuntii sent by any of ``senders``, oldest first, each with
        the set of its repliers and whether an interruption was noted for it: one query."""
        limit = max(0, limit)
        # each sender's newest, by its own index walk; then the newest of them all
        latest = " UNION ALL ".join(
            ["SELECT * FROM (SELECT * FROM nuntii WHERE sender = ? ORDER BY seq DESC LIMIT ?)"]
            * len(senders)
        )
        rows = await self._db.execute_fetchall(
            f"""SELECT {COLUMNS},
                   (SELECT json_group_array(DISTINCT r.sender) FROM nuntii AS r
                    WHERE r.reply_to = n.id) AS repliers,
                   EXISTS (SELECT 1 FROM interruptions AS i WHERE i.seq = n.seq) AS noted
               FROM (SELECT * FROM ({latest}) ORDER BY seq DESC LIMIT ?) AS n
               ORDER BY n.seq""",
            (*[p for sender in senders for p in (sender, limit)], limit),
        )
        return [
            AnsweredNuntius(_nuntius(r), frozenset(json.loads(r["repliers"])), bool(r["noted"]))
            for r in rows
        ]

    async def note_interruption(self, seq: int, agents: Sequence[str]) -> None:
        """Record that Caesar was told nuntius ``seq`` went unanswered by ``agents``."""
        await self._db.execute(
            "INSERT OR IGNORE INTO interruptions (seq, agents, noticed_at) VALUES (?, ?, ?)",
            (seq, json.dumps(list(agents)), now().isoformat()),
        )

    async def interruptions(self, *, pending_only: bool = True) -> list[tuple[Nuntius, list[str]]]:
        """Interrupted requests Caesar was told about (not yet retried), oldest first."""
        where = "WHERE i.retried_at IS NULL" if pending_only else ""
        rows = await self._db.execute_fetchall(
            f"SELECT {COLUMNS}, i.agents FROM interruptions AS i "
            f"JOIN nuntii AS n ON n.seq = i.seq {where} ORDER BY i.seq"
        )
        return [(_nuntius(r), list(json.loads(r["agents"]))) for r in rows]

    async def mark_retried(self, seq: int) -> bool:
        """Mark an interrupted request as retried; False if it already was (or is unknown)."""
        async with self._db.execute(
            "UPDATE interruptions SET retried_at = ? WHERE seq = ? AND retried_at IS NULL",
            (now().isoformat(), seq),
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
