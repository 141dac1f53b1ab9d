"""Attachments in the praetorium: which files came with (or went out with) which nuntius.

- ``attachments``: one row per file of a nuntius (kind, MIME type, file name, size,
  SHA-256 of the content kept in ``castra/attachments/``, Telegram's ``file_unique_id``,
  direction ``in`` from Caesar or ``out`` from an agent), indexed by nuntius seq.
- ``attachments_pending``: an incoming file on its way, keyed by the message's origin
  and its part (the files of one Telegram album are parts 0, 1, … of its first
  message's origin), written *before* the download starts. A trigger on ``nuntii`` moves it into
  ``attachments`` in the statement that stores its nuntius (same origin), so the
  nuntius and its files (in part order) are stored together or not at all; a pending row left by a
  restart is finished at the next start (``pending``).

File names are found with ``LIKE`` (attachments are few next to nuntii; FTS5 would
refuse ``report.pdf`` as a query anyway).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from legio.request import PendingFile
from legio.store.praetorium import Praetorium
from legio.timing import now

Direction = Literal["in", "out"]


@dataclass(frozen=True)
class Attachment:
    """One stored file of a nuntius."""

    id: int
    nuntius_seq: int
    direction: Direction
    kind: str
    mime_type: str
    name: str
    size: int
    sha256: str
    file_unique_id: str | None = None
    source_path: str | None = None


def _attachment(row: sqlite3.Row) -> Attachment:
    return Attachment(
        id=int(row["id"]),
        nuntius_seq=int(row["nuntius_seq"]),
        direction=row["direction"],
        kind=row["kind"],
        mime_type=row["mime_type"],
        name=row["name"],
        size=int(row["size"]),
        sha256=row["sha256"],
        file_unique_id=row["file_unique_id"],
        source_path=row["source_path"],
    )


def _pending(row: sqlite3.Row) -> PendingFile:
    return PendingFile(
        origin=row["origin"],
        text=row["text"],
        kind=row["kind"],
        mime_type=row["mime_type"],
        name=row["name"],
        size=int(row["size"]),
        sha256=row["sha256"],
        file_id=row["file_id"],
        file_unique_id=row["file_unique_id"],
        part=int(row["part"]),
        forwarded_from=row["forwarded_from"],
    )


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class AttachmentStore:
    """The attachment tables, on the praetorium's one connection."""

    def __init__(self, praetorium: Praetorium) -> None:
        self.praetorium = praetorium

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        db = self.praetorium.connection
        async with db.execute(sql, params) as cursor:
            cursor.row_factory = sqlite3.Row
            return list(await cursor.fetchall())

    # ---------------------------------------------------------- incoming

    async def stage(self, pending: PendingFile) -> None:
        """Record an incoming file before its download (again: nothing changes)."""
        await self.praetorium.connection.execute(
            "INSERT OR IGNORE INTO attachments_pending (origin, part, text, file_id, kind, "
            "mime_type, name, size, sha256, file_unique_id, created_at, forwarded_from) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                pending.origin,
                pending.part,
                pending.text,
                pending.file_id,
                pending.kind,
                pending.mime_type,
                pending.name,
                pending.size,
                pending.sha256,
                pending.file_unique_id,
                now().isoformat(),
                pending.forwarded_from,
            ),
        )

    async def downloaded(self, pending: PendingFile, sha256: str, size: int) -> None:
        """The pending file is complete in the castra."""
        await self.praetorium.connection.execute(
            "UPDATE attachments_pending SET sha256 = ?, size = ? WHERE origin = ? AND part = ?",
            (sha256, size, pending.origin, pending.part),
        )

    async def drop_pending(self, origin: str, part: int | None = None) -> None:
        """Forget a pending file (refused, or its download failed for good); without
        ``part``, every file of the message."""
        sql = "DELETE FROM attachments_pending WHERE origin = ?"
        params: tuple[str | int, ...] = (origin,)
        if part is not None:
            sql, params = sql + " AND part = ?", (origin, part)
        await self.praetorium.connection.execute(sql, params)

    async def pending(self) -> list[PendingFile]:
        """Incoming files a restart interrupted, oldest first (a message's in part order)."""
        rows = await self._rows(
            "SELECT * FROM attachments_pending "
            "ORDER BY min(created_at) OVER (PARTITION BY origin), origin, part"
        )
        return [_pending(r) for r in rows]

    # ---------------------------------------------------------- outgoing

    async def add_outgoing(
        self,
        nuntius_seq: int,
        *,
        kind: str,
        mime_type: str,
        name: str,
        size: int,
        sha256: str,
        source_path: str,
    ) -> None:
        """Record a file an agent sent with its answer (nuntius ``nuntius_seq``)."""
        await self.praetorium.connection.execute(
            "INSERT INTO attachments (nuntius_seq, direction, kind, mime_type, name, size, "
            "sha256, source_path, created_at) VALUES (?, 'out', ?, ?, ?, ?, ?, ?, ?)",
            (nuntius_seq, kind, mime_type, name, size, sha256, source_path, now().isoformat()),
        )

    # ---------------------------------------------------------- reading

    async def of_nuntius(self, seq: int) -> list[Attachment]:
        """The files of one nuntius, in the order they were stored."""
        rows = await self._rows(
            "SELECT * FROM attachments WHERE nuntius_seq = ? ORDER BY id", (seq,)
        )
        return [_attachment(r) for r in rows]

    async def of_nuntii(self, seqs: Iterable[int]) -> dict[int, list[Attachment]]:
        """The files of several nuntii, by seq (nuntii without files are left out)."""
        wanted = sorted(set(seqs))
        found: dict[int, list[Attachment]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = await self._rows(
                f"SELECT * FROM attachments WHERE nuntius_seq IN ({marks}) ORDER BY id", chunk
            )
            for row in rows:
                attachment = _attachment(row)
                found.setdefault(attachment.nuntius_seq, []).append(attachment)
        return found

    async def search_names(self, text: str, limit: int = 10) -> list[Attachment]:
        """Files whose name contains ``text`` (case-insensitive for ASCII), newest first."""
        rows = await self._rows(
            "SELECT * FROM attachments WHERE name LIKE ? ESCAPE '\\' ORDER BY id DESC LIMIT ?",
            (_like(text.strip()), max(0, limit)),
        )
        return [_attachment(r) for r in rows]
