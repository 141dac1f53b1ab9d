"""``legio export`` and ``/export``: the conversation as Caesar saw it, streamed to a file.

Who said what to whom and when (on the owner's clock), the project a message was marked
with (``#app``), what it replied to, where a forward came from, and the files that came or
went with it. Three formats: Markdown, one self-contained HTML page (every text escaped,
its style inline, nothing fetched), and JSON Lines (one object per nuntius).

It streams: nuntii are read in batches of ``BATCH`` by keyset pagination (``seq > last``,
on the primary key; the agent filter is an indexed ``participants`` lookup per row, never
a set built in memory), each batch's files by one indexed range query, and each batch is
written before the next is read. Memory stays bounded whatever the history's size. The
reader is its own SQLite connection (``query_only``): in WAL mode it never blocks the
daemon's writers, and the export is of one snapshot per batch.
"""

from __future__ import annotations

import html
import json
import os
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, tzinfo
from pathlib import Path
from typing import Literal, TextIO

from legio.errors import LegioError
from legio.jobs.schedule import zone
from legio.operations.backup import BackupError
from legio.store.migrations import MIGRATIONS

Format = Literal["md", "html", "json"]
FORMATS: tuple[Format, ...] = ("md", "html", "json")
EXTENSIONS = {"md": "md", "html": "html", "json": "jsonl"}
BATCH = 1000


@dataclass(frozen=True)
class ExportSpec:
    """What to export: whose conversation, from when, in which format, on which clock."""

    format: Format = "md"
    agent: str | None = None  # the nuntii this agent sent or was addressed (@all included)
    since: datetime | None = None  # aware; nuntii at or after it
    zone: tzinfo | None = None  # times are shown on this clock (None: UTC)


@dataclass(frozen=True)
class FileLine:
    name: str
    kind: str
    size: int
    direction: str


@dataclass(frozen=True)
class Entry:
    """One nuntius as the export shows it."""

    seq: int
    sender: str
    audience: tuple[str, ...]
    time: datetime
    text: str
    project: str | None
    reply_to: int | None
    forwarded_from: str | None
    files: tuple[FileLine, ...] = field(default=())


@dataclass(frozen=True)
class ExportResult:
    path: Path
    nuntii: int
    size: int


SELECT = (
    "SELECT n.seq, n.sender, n.text, n.audience, n.timestamp, n.project, n.forwarded_from, "
    "r.seq AS reply_seq FROM nuntii AS n LEFT JOIN nuntii AS r ON r.id = n.reply_to "
    "WHERE n.seq > ?"
)


def entries(db: sqlite3.Connection, spec: ExportSpec) -> Iterator[list[Entry]]:
    """The matching nuntii in seq order, ``BATCH`` at a time (keyset pagination)."""
    sql, params = SELECT, []
    if spec.since is not None:
        sql += " AND n.timestamp >= ?"
        params.append(spec.since.astimezone(UTC).isoformat())
    if spec.agent is not None:
        sql += (
            " AND EXISTS (SELECT 1 FROM participants AS p WHERE p.seq = n.seq "
            "AND p.member IN (?, 'all'))"
        )
        params.append(spec.agent)
    sql += " ORDER BY n.seq LIMIT ?"
    last = 0
    while True:
        rows = db.execute(sql, (last, *params, BATCH)).fetchall()
        if not rows:
            return
        first, last = rows[0][0], rows[-1][0]
        files: dict[int, list[FileLine]] = {}
        for seq, *fields in db.execute(
            "SELECT nuntius_seq, name, kind, size, direction FROM attachments "
            "WHERE nuntius_seq BETWEEN ? AND ? ORDER BY id",
            (first, last),
        ):
            files.setdefault(seq, []).append(FileLine(*fields))
        yield [
            Entry(
                seq=r[0],
                sender=r[1],
                text=r[2],
                audience=tuple(json.loads(r[3])),
                time=datetime.fromisoformat(r[4]).astimezone(spec.zone or UTC),
                project=r[5],
                forwarded_from=r[6],
                reply_to=r[7],
                files=tuple(files.get(r[0], ())),
            )
            for r in rows
        ]


def parse_since(text: str, *, zone_name: str = "") -> datetime:
    """``2026-11-01`` (midnight on the owner's clock) or an ISO time, as an aware time."""
    place = zone(zone_name)
    try:
        if len(text) == 10:
            return datetime.combine(datetime.fromisoformat(text).date(), time(), place)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise LegioError(
            f"{text!r} is not a date: write it as 2026-11-01 (or 2026-11-01T08:00)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=place)


# ---------------------------------------------------------------- the formats


def _size(size: int) -> str:
    for unit in ("bytes", "KB", "MB"):
        if size < 1024 or unit == "MB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return str(size)


def _file_words(f: FileLine) -> str:
    way = "from Caesar" if f.direction == "in" else "sent by the agent"
    return f"{f.name} ({f.kind}, {_size(f.size)}, {way})"


def _marks(e: Entry) -> list[str]:
    marks = []
    if e.project:
        marks.append(f"#{e.project}")
    if e.reply_to is not None:
        marks.append(f"reply to #{e.reply_to}")
    if e.forwarded_from:
        marks.append(f"forwarded from {e.forwarded_from}")
    return marks


def _when(e: Entry) -> str:
    return f"{e.time:%Y-%m-%d %H:%M}"


def title(spec: ExportSpec, made: datetime) -> str:
    words = [f"exported {made:%Y-%m-%d %H:%M %Z}".rstrip()]
    if spec.agent:
        words.append(f"conversation with {spec.agent}")
    if spec.since is not None:
        words.append(f"since {spec.since:%Y-%m-%d %H:%M}")
    return "Legio conversation (" + ", ".join(words) + ")"


class Writer:
    """Writes one format: a head, the entries batch by batch, a tail."""

    def __init__(self, out: TextIO, spec: ExportSpec, made: datetime) -> None:
        self.out, self.spec, self.made = out, spec, made

    def head(self) -> None:
        self.out.write(f"# {title(self.spec, self.made)}\n")

    def batch(self, batch: list[Entry]) -> None:
        write = self.out.write
        for e in batch:
            head = " · ".join([f"#{e.seq}", _when(e), f"{e.sender} → {', '.join(e.audience)}"])
            marks = " · ".join(_marks(e))
            write(f"\n---\n\n**{head}**" + (f" · {marks}" if marks else "") + "\n\n")
            write(e.text.rstrip() + "\n")
            for f in e.files:
                write(f"\n📎 {_file_words(f)}\n")

    def tail(self) -> None:
        pass


STYLE = (
    "body{font:15px/1.45 system-ui,sans-serif;max-width:52em;margin:2em auto;padding:0 1em;"
    "color:#1d1d1f}article{border-top:1px solid #ddd;padding:.6em 0}header{color:#666;"
    "font-size:.85em}.caesar header{color:#0b5cad}.text{white-space:pre-wrap;"
    "overflow-wrap:anywhere}.file{color:#555;font-size:.9em}"
)


class HtmlWriter(Writer):
    """One self-contained page: inline style, every text escaped, no script, no fetch."""

    def head(self) -> None:
        heading = html.escape(title(self.spec, self.made))
        self.out.write(
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{heading}</title><style>{STYLE}</style></head><body>\n<h1>{heading}</h1>\n"
        )

    def batch(self, batch: list[Entry]) -> None:
        esc = html.escape
        for e in batch:
            who = esc(f"{e.sender} → {', '.join(e.audience)}")
            marks = "".join(f" · {esc(m)}" for m in _marks(e))
            files = "".join(f'<div class="file">📎 {esc(_file_words(f))}</div>' for f in e.files)
            self.out.write(
                f'<article class="{"caesar" if e.sender == "caesar" else "agent"}" '
                f'id="n{e.seq}"><header>#{e.seq} · {_when(e)} · {who}{marks}</header>'
                f'<div class="text">{esc(e.text)}</div>{files}</article>\n'
            )

    def tail(self) -> None:
        self.out.write("</body></html>\n")


class JsonWriter(Writer):
    """JSON Lines: one object per nuntius, nothing around them."""

    def head(self) -> None:
        pass

    def batch(self, batch: list[Entry]) -> None:
        for e in batch:
            record = {
                "seq": e.seq,
                "time": e.time.isoformat(),
                "sender": e.sender,
                "audience": list(e.audience),
                "project": e.project,
                "reply_to": e.reply_to,
                "forwarded_from": e.forwarded_from,
                "text": e.text,
                "files": [f.__dict__ for f in e.files],
            }
            self.out.write(json.dumps(record, ensure_ascii=False) + "\n")


WRITERS: dict[str, type[Writer]] = {"md": Writer, "html": HtmlWriter, "json": JsonWriter}


# ---------------------------------------------------------------- the file


def open_reader(db_path: Path) -> sqlite3.Connection:
    """A read-only connection to a praetorium this Legio's schema can read."""
    if not db_path.is_file():
        raise BackupError(f"no praetorium at {db_path}")
    db = sqlite3.connect(db_path, timeout=30)
    db.execute("PRAGMA query_only = ON")
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version != len(MIGRATIONS):
        db.close()
        raise BackupError(
            f"the praetorium's schema is {version}, this Legio's is {len(MIGRATIONS)}: "
            "start Legio once (it upgrades the praetorium), then export"
        )
    return db


def export_history(db_path: Path, out: Path, spec: ExportSpec, made: datetime) -> ExportResult:
    """Write the export to ``out`` (through ``out.part``, renamed when whole)."""
    db = open_reader(db_path)
    part = out.with_name(f".{out.name}.{secrets.token_hex(4)}.part")  # two at once: two parts
    count = 0
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # Caesar's words
        with open(fd, "w", encoding="utf-8", newline="\n") as handle:
            writer = WRITERS[spec.format](handle, spec, made)
            writer.head()
            for batch in entries(db, spec):
                writer.batch(batch)
                count += len(batch)
            writer.tail()
        os.replace(part, out)
    except sqlite3.Error as e:
        raise BackupError(f"the export could not read the praetorium: {e}") from e
    finally:
        db.close()
        part.unlink(missing_ok=True)
    return ExportResult(out, count, out.stat().st_size)
