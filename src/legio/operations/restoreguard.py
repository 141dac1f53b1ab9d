"""What a restore checks beyond paths, so that it brings back data and never control.

- ``restorable``: the archive's files that are restored: exactly what ``legio backup``
  writes (the praetorium, the prompts, memoria, attachments). Anything else in the
  archive (``castra/state/``, which holds Legio's login sync for Claude and its sockets; a
  ``praetorium.db-wal``; an agent's workspace) is left out and named.
- ``schema_problems``: the praetorium's schema (``sqlite_master``: tables, indexes,
  triggers, views, with their SQL) against a fresh migration of an empty database to the
  same ``user_version``; a trigger, view or table Legio never made, or a definition it
  never wrote, is named, and the restore refused. So is a ``_migrations`` list that does
  not match the version. The standing "Always" grants it holds are named
  (``standing_grants``): rows, restored, but each lets an agent act without asking.
- ``disarm``: after the checks, every scheduled job is restored disabled and every
  standing "Always" grant revoked, each named: a job runs as "the request, set earlier
  by Caesar", and a grant lets an agent act unasked, but an archive may not be Caesar's.
- ``config_differences``: the archive's ``legio.toml`` (set aside as
  ``legio.toml.restored``, never used) against the running configuration, in the keys
  that decide who commands, where the token goes and what agents may do.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import tomllib
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import aiosqlite
from pydantic import ValidationError

from legio.config import Config
from legio.store.migrations import MIGRATIONS
from legio.visible import visible

RESTORABLE = re.compile(
    r"castra/(praetorium\.db|legatus/prompt\.md|(edicta|acta|attachments)/.+"
    r"|centuriones/[^/]+/(prompt\.md|commentarii/.+))\Z"
)
Schema = dict[tuple[str, str], tuple[str, str]]  # (type, name) -> (table, SQL)
WATCHED = (
    "telegram.caesar_ids",
    "telegram.allowed_chats",
    "telegram.base_url",
    "telegram.token_env",
    "forge.api_url",
    "forge.token_env",
    "sandbox.mode",
    "sandbox.allowed_domains",
    "sandbox.hide",
    "sandbox.check_read",
    "claude.cli_path",
    "claude.permission_mode",
    "claude.env_deny",
    "approvals.ask",
    "health.listen",
    "health.allow_remote",
    "backup.dir",
    "backup.allow_shared_folder",
)
PROJECT_KEYS = ("path", "check", "repo", "remote")


def restorable(name: str) -> bool:
    """Whether the archive's file ``name`` is one ``legio backup`` writes into a castra."""
    return bool(RESTORABLE.match(name))


# ---------------------------------------------------------------- the schema


def _normal(sql: str | None) -> str:
    return " ".join((sql or "").split())


def read_schema(db: sqlite3.Connection) -> Schema:
    rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return {(str(t), str(n)): (str(tbl), _normal(sql)) for t, n, tbl, sql in rows}


async def _fresh(version: int) -> Schema:
    async with aiosqlite.connect(":memory:", isolation_level=None) as db:
        await db.execute(
            "CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        for number, (_, func) in enumerate(MIGRATIONS[:version], start=1):
            await db.execute("BEGIN IMMEDIATE")
            await func(db)
            await db.execute(f"PRAGMA user_version = {number}")
            await db.execute("COMMIT")
        async with db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master") as cursor:
            rows = await cursor.fetchall()
    return {(str(t), str(n)): (str(tbl), _normal(sql)) for t, n, tbl, sql in rows}


@lru_cache(maxsize=8)
def fresh_schema(version: int) -> Schema:
    """The schema ``migrate`` gives an empty database at ``version`` (its own loop: the
    caller may be running one)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, _fresh(version)).result()


def _excerpt(sql: str) -> str:
    return visible(sql if len(sql) <= 160 else sql[:157] + "...", keep="")


def schema_problems(db: sqlite3.Connection, version: int) -> list[str]:
    """Each object of ``db``'s schema that a fresh migration to ``version`` would not
    have written as it is, and the ``_migrations`` list if it does not match."""
    actual, expected = read_schema(db), fresh_schema(version)
    problems = []
    for key in sorted(actual.keys() - expected.keys()):
        kind, name = key
        problems.append(f"{kind} {name!r} is not one of Legio's ({_excerpt(actual[key][1])})")
    for key in sorted(actual.keys() & expected.keys()):
        if actual[key] != expected[key]:
            kind, name = key
            problems.append(
                f"{kind} {name!r} is not defined as Legio defines it ({_excerpt(actual[key][1])})"
            )
    for kind, name in sorted(expected.keys() - actual.keys()):
        problems.append(f"{kind} {name!r} is missing")
    if not problems:
        names = [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY rowid")]
        if sorted(names) != sorted(name for name, _ in MIGRATIONS[:version]):
            problems.append(f"its list of migrations does not match its schema version {version}")
    return problems


def standing_grants(db: sqlite3.Connection) -> list[str]:
    """``agent: rule`` of each "Always" grant not revoked: restored rows, but each lets an
    agent act without asking, so a restore names them."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "approval_grants" not in tables:
        return []
    rows = db.execute(
        "SELECT agent, rule FROM approval_grants WHERE revoked_at IS NULL ORDER BY id"
    ).fetchall()
    return [f"{agent}: {rule}" for agent, rule in rows]


def disarm(path: Path, now: str) -> tuple[list[str], list[str]]:
    """Stop what the restored praetorium at ``path`` would do on its own: each scheduled
    job is kept but disabled (``enabled = 0``, no next run), each standing "Always" grant
    revoked at ``now``. (the jobs, as ``name (schedule): request``; the grants, as
    ``agent: rule``), so that the restore names them. A job or grant in an archive ran or
    was granted as Caesar's; the archive may not be Caesar's."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA trusted_schema = OFF")
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        jobs: list[str] = []
        grants: list[str] = []
        db.execute("BEGIN IMMEDIATE")
        if "jobs" in tables:
            rows = db.execute(
                "SELECT name, kind, cron, run_at, target, request FROM jobs "
                "WHERE enabled OR next_run IS NOT NULL OR run_id IS NOT NULL ORDER BY id"
            ).fetchall()
            for name, kind, cron, run_at, target, request in rows:
                when = f"every {cron!s}" if kind == "cron" else f"once at {run_at!s}"
                jobs.append(f"{name} ({when}, for {target}): {request}")
            db.execute(
                "UPDATE jobs SET enabled = 0, next_run = NULL, run_id = NULL, run_due = NULL, "
                "run_started_at = NULL, running_seq = NULL"
            )
        if "approval_grants" in tables:
            rows = db.execute(
                "SELECT agent, rule FROM approval_grants WHERE revoked_at IS NULL ORDER BY id"
            ).fetchall()
            grants = [f"{agent}: {rule}" for agent, rule in rows]
            db.execute("UPDATE approval_grants SET revoked_at = ? WHERE revoked_at IS NULL", (now,))
        db.execute("COMMIT")
    finally:
        db.close()
    return jobs, grants


# ---------------------------------------------------------------- legio.toml


def _at(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _show(value: Any) -> str:
    """A value as Caesar reads it (every hidden or reordering character made visible)."""
    if value is None or value == "":
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else str(value).replace("'", '"')
    return visible(text, keep="")


def config_differences(text: str, running: Config | None) -> list[str]:
    """The keys that matter where the archive's ``legio.toml`` (``text``) differs from
    ``running`` (None: from Legio's defaults), one line each: ``key: mine → archive's``."""
    try:
        theirs = Config.model_validate(tomllib.loads(text)).model_dump(mode="json")
    except (tomllib.TOMLDecodeError, ValidationError, UnicodeDecodeError) as e:
        first = str(e).splitlines()[0]
        return [f"the archive's legio.toml is not a valid configuration ({first})"]
    mine = (running or Config()).model_dump(mode="json")
    keys = list(WATCHED)
    projects = sorted({*(mine.get("projects") or {}), *(theirs.get("projects") or {})})
    keys += [f"projects.{name}.{key}" for name in projects for key in PROJECT_KEYS]
    lines = []
    for key in keys:
        ours, other = _at(mine, key), _at(theirs, key)
        if key.startswith("projects.") and key.endswith(".path") and other and running:
            base = running.path.parent if running.path else Path.cwd()
            other = str((base / str(other)).resolve())  # as a path beside the running file
        if ours != other:
            lines.append(f"{key}: {_show(ours)} → {_show(other)}")
    return lines


def prompt_differences(names: list[str], restored: Path, running_castra: Path) -> list[str]:
    """The restored prompts (``names`` of the archive's files, under ``restored``) that
    differ from the running castra's: a prompt's frontmatter (tools, cwd, add_dirs, ask)
    shapes what its agent may do."""
    lines = []
    for name in names:
        if not name.endswith("/prompt.md"):
            continue
        mine = running_castra / Path(*PurePosixPath(name).parts[1:])
        shown = visible(name, keep="")
        if not mine.is_file():
            lines.append(f"{shown}: an agent the running castra does not have")
        elif mine.read_bytes() != (restored / name).read_bytes():
            lines.append(f"{shown}: differs from {mine}")
    return lines
