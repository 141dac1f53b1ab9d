"""An upgrade from every earlier schema: a small praetorium built at each migration level
(migrations 1..k applied, representative rows of that level inserted), then opened by
today's code, which migrates it; its rows must be intact and usable (history, search,
replies, usage, jobs, grants). Parametrized over ``MIGRATIONS``: a migration added later
is covered without touching this file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from legio.store.grants import ApprovalStore
from legio.store.jobstore import JobStore
from legio.store.migrations import MIGRATIONS
from legio.store.praetorium import Praetorium


async def build_at_level(path: Path, level: int) -> None:
    """Apply migrations 1..level, as ``migrate`` does, and stop there."""
    async with aiosqlite.connect(path, isolation_level=None) as db:
        await db.execute("PRAGMA journal_mode = WAL")
        await db.execute(
            "CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        for number, (name, func) in enumerate(MIGRATIONS[:level], start=1):
            await db.execute("BEGIN IMMEDIATE")
            await func(db)
            await db.execute(
                "INSERT INTO _migrations VALUES (?, '2026-01-01T00:00:00+00:00')", (name,)
            )
            await db.execute(f"PRAGMA user_version = {number}")
            await db.execute("COMMIT")


def columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def insert(db: sqlite3.Connection, table: str, values: dict[str, object]) -> bool:
    """Insert the values whose columns exist at this level; False if the table does not."""
    present = columns(db, table)
    if not present:
        return False
    row = {k: v for k, v in values.items() if k in present}
    names = ", ".join(row)
    db.execute(
        f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(row))})", tuple(row.values())
    )
    return True


NUNTII = [
    {
        "id": "n1",
        "sender": "caesar",
        "text": "build the aqueduct",
        "audience": '["legatus"]',
        "timestamp": "2026-01-02T08:00:00+00:00",
        "origin": "telegram:1:1",
        "project": "app",
    },
    {
        "id": "n2",
        "sender": "legatus",
        "text": "the aqueduct is planned",
        "audience": '["caesar"]',
        "timestamp": "2026-01-02T08:01:00+00:00",
        "reply_to": "n1",
    },
    {
        "id": "n3",
        "sender": "caesar",
        "text": "@vorenus inspect the wall",
        "audience": '["vorenus"]',
        "timestamp": "2026-01-02T08:02:00+00:00",
    },
    {
        "id": "n4",
        "sender": "vorenus",
        "text": "the wall holds",
        "audience": '["caesar"]',
        "timestamp": "2026-01-02T08:03:00+00:00",
        "reply_to": "n3",
    },
]


def representative_rows(path: Path) -> dict[str, bool]:
    """Rows valid at the database's level, in every table it has; which tables got one."""
    db = sqlite3.connect(path)
    made = {}
    with db:
        for values in NUNTII:
            insert(db, "nuntii", values)
        made["turns"] = insert(
            db,
            "turns",
            {
                "agent": "vorenus",
                "session_id": "s1",
                "nuntius_seq": 3,
                "input_tokens": 10,
                "output_tokens": 5,
                "cost_usd": 0.25,
                "created_at": "2026-01-02T08:03:00+00:00",
                "model": "m",
            },
        )
        made["agent_sessions"] = insert(
            db,
            "agent_sessions",
            {
                "agent": "vorenus",
                "session_id": "s1",
                "last_seq": 4,
                "prompt_hash": "h",
                "updated_at": "2026-01-02T08:03:00+00:00",
            },
        )
        made["jobs"] = insert(
            db,
            "jobs",
            {
                "name": "daily report",
                "target": "legatus",
                "request": "report",
                "kind": "cron",
                "cron": "0 8 * * *",
                "timezone": "UTC",
                "created_by": "legatus",
                "created_at": "2026-01-02T08:00:00+00:00",
                "next_run": "2026-01-03T08:00:00+00:00",
            },
        )
        made["approval_grants"] = insert(
            db,
            "approval_grants",
            {
                "agent": "vorenus",
                "rule": "Bash(git push:*)",
                "created_at": "2026-01-02T08:00:00+00:00",
            },
        )
        seq4 = 4 if "seq" in columns(db, "nuntii") else None
        if seq4 is not None:
            made["attachments"] = insert(
                db,
                "attachments",
                {
                    "nuntius_seq": seq4,
                    "direction": "out",
                    "kind": "document",
                    "mime_type": "text/plain",
                    "name": "wall.txt",
                    "size": 3,
                    "sha256": "ab",
                    "created_at": "2026-01-02T08:03:00+00:00",
                },
            )
    db.close()
    return made


@pytest.mark.parametrize("level", range(1, len(MIGRATIONS) + 1))
async def test_a_praetorium_of_every_schema_opens_with_its_rows(tmp_path: Path, level: int) -> None:
    path = tmp_path / "praetorium.db"
    await build_at_level(path, level)
    made = representative_rows(path)
    async with await Praetorium.open(path) as p:  # today's code: migrates the rest
        async with p.connection.execute("PRAGMA user_version") as cursor:
            assert (await cursor.fetchone())[0] == len(MIGRATIONS)
        history = list(reversed(await p.get_history(10)))
        assert [(n.id, n.sender, n.text) for n in history] == [
            (v["id"], v["sender"], v["text"]) for v in NUNTII
        ]
        assert [n.seq for n in history] == [1, 2, 3, 4]
        assert (
            history[1].reply_to == "n1"
            and json.dumps(list(history[2].audience)) == (NUNTII[2]["audience"])
        )
        if level >= 4:  # origin arrived with m004, the project with m012
            assert history[0].origin == "telegram:1:1"
        assert [h.nuntius.id for h in await p.search("aqueduct", "caesar", 5)] == ["n1", "n2"]
        seen = await p.get_visible_nuntii("vorenus", 10)
        assert [n.id for n in seen] == ["n3", "n4"]
        answer = await p.post("legatus", "still usable", ["caesar"], reply_to="n4")
        assert answer.seq == 5
        usage = await p.records.usage_totals()
        if made.get("turns"):
            assert usage["vorenus"].cost_usd == 0.25
        if made.get("agent_sessions"):
            checkpoint = await p.records.get_checkpoint("vorenus")
            assert checkpoint is not None and checkpoint.last_seq == 4
        if made.get("jobs"):
            assert [j.name for j in await JobStore(p).active()] == ["daily report"]
        if made.get("approval_grants"):
            assert [g.rule for g in await ApprovalStore(p).grants()] == ["Bash(git push:*)"]


@pytest.mark.parametrize("level", range(1, len(MIGRATIONS) + 1))
async def test_a_restore_accepts_the_schema_of_every_level_and_its_upgrade(
    tmp_path: Path, level: int
) -> None:
    """``legio restore`` compares a praetorium's schema with a fresh migration to its
    version (issue #44): a genuine one, at any level or upgraded from it, is never refused."""
    from legio.operations.restoreguard import schema_problems

    path = tmp_path / "praetorium.db"
    await build_at_level(path, level)
    db = sqlite3.connect(path)
    try:
        assert schema_problems(db, level) == []
        assert schema_problems(db, level - 1) != []  # the comparison can fail
    finally:
        db.close()
    async with await Praetorium.open(path):
        pass  # migrated to today's schema
    db = sqlite3.connect(path)
    try:
        assert schema_problems(db, len(MIGRATIONS)) == []
    finally:
        db.close()
