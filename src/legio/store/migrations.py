"""The praetorium's schema: an append-only list of migrations, applied once each.

Each migration is a small function registered with ``@migration``, in the order it is
defined; ``migrate`` applies the ones a database has not had yet, each in one
transaction together with its record in ``_migrations`` (and ``PRAGMA user_version``).
Never edit or reorder a migration that has shipped: append a new one. The first is
the seed's own schema, written with ``IF NOT EXISTS``, so a database made by the seed
system upgrades in place.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import aiosqlite

from legio.errors import PraetoriumError
from legio.timing import now

logger = logging.getLogger(__name__)

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


@migration
async def m007_jobs(db: aiosqlite.Connection) -> None:
    """Scheduled jobs (store/jobs.py): times in UTC ISO; run_* mark a run in progress."""
    await _script(
        db,
        [
            """CREATE TABLE jobs (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                name TEXT NOT NULL,
                owner_chat TEXT,
                target TEXT NOT NULL,
                request TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('once', 'cron')),
                cron TEXT,
                timezone TEXT NOT NULL,
                run_at TEXT,
                created_by TEXT NOT NULL,
                created_at TEXT NOT NULL,
                next_run TEXT,
                last_run TEXT,
                last_outcome TEXT,
                runs INTEGER NOT NULL DEFAULT 0,
                enabled INTEGER NOT NULL DEFAULT 1,
                run_id TEXT,
                run_due TEXT,
                run_started_at TEXT,
                running_seq INTEGER
            )""",
            "CREATE INDEX idx_jobs_next_run ON jobs(enabled, next_run)",
        ],
    )


@migration
async def m008_forwarded(db: aiosqlite.Connection) -> None:
    """Where a message Caesar forwarded (or sent via an inline bot) came from (issue 22)."""
    await _script(db, ["ALTER TABLE nuntii ADD COLUMN forwarded_from TEXT"])


@migration
async def m009_approvals(db: aiosqlite.Connection) -> None:
    """Caesar's durable "always" grants, approval requests (a restart expires the pending
    ones), and the model of each turn (for /usage)."""
    await _script(
        db,
        [
            """CREATE TABLE approval_grants (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                agent TEXT NOT NULL,
                rule TEXT NOT NULL,
                created_at TEXT NOT NULL,
                revoked_at TEXT
            )""",
            """CREATE TABLE approval_requests (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                agent TEXT NOT NULL,
                tool TEXT NOT NULL,
                target TEXT NOT NULL DEFAULT '',
                status TEXT NOT NULL DEFAULT 'pending',
                created_at TEXT NOT NULL,
                decided_at TEXT
            )""",
            "CREATE INDEX idx_approval_requests_pending ON approval_requests(status)",
            "ALTER TABLE turns ADD COLUMN model TEXT",
            "CREATE INDEX idx_turns_created ON turns(created_at)",
        ],
    )


@migration
async def m010_album_parts(db: aiosqlite.Connection) -> None:
    """Several incoming files per message (a Telegram album is one request): pending
    files are keyed by origin and part, and arrive with their nuntius in part order."""
    await _script(
        db,
        [
            "DROP TRIGGER attachments_arrive",
            "ALTER TABLE attachments_pending RENAME TO attachments_pending_old",
            """CREATE TABLE attachments_pending (
                origin TEXT NOT NULL,
                part INTEGER NOT NULL DEFAULT 0,
                text TEXT NOT NULL,
                file_id TEXT,
                kind TEXT NOT NULL,
                mime_type TEXT NOT NULL,
                name TEXT NOT NULL,
                size INTEGER NOT NULL DEFAULT 0,
                sha256 TEXT,
                file_unique_id TEXT,
                created_at TEXT NOT NULL,
                PRIMARY KEY (origin, part)
            )""",
            """INSERT INTO attachments_pending (origin, part, text, file_id, kind, mime_type,
                name, size, sha256, file_unique_id, created_at)
               SELECT origin, 0, text, file_id, kind, mime_type, name, size, sha256,
                file_unique_id, created_at FROM attachments_pending_old""",
            "DROP TABLE attachments_pending_old",
            """CREATE TRIGGER attachments_arrive AFTER INSERT ON nuntii
               WHEN new.origin IS NOT NULL BEGIN
                INSERT INTO attachments (nuntius_seq, direction, kind, mime_type, name, size,
                    sha256, file_unique_id, created_at)
                SELECT new.seq, 'in', kind, mime_type, name, size, sha256, file_unique_id,
                    created_at
                FROM attachments_pending WHERE origin = new.origin AND sha256 IS NOT NULL
                ORDER BY part;
                DELETE FROM attachments_pending WHERE origin = new.origin;
            END""",
        ],
    )


@migration
async def m011_pending_forwards(db: aiosqlite.Connection) -> None:
    """A forwarded file keeps where it came from while its download is pending, so a
    restart records it as a forward too (its caption's @names dispatch nobody)."""
    await _script(db, ["ALTER TABLE attachments_pending ADD COLUMN forwarded_from TEXT"])


@migration
async def m012_projects(db: aiosqlite.Connection) -> None:
    """Which project (``[projects.<name>]``) a nuntius was about: its ``#name``, the
    agent's default project, or the Legatus's dispatch on one."""
    await _script(db, ["ALTER TABLE nuntii ADD COLUMN project TEXT"])


@migration
async def m013_conversations(db: aiosqlite.Connection) -> None:
    """Replies, edits and topics as facts about nuntii (``legio.store.threads``)."""
    await _script(
        db,
        [
            """CREATE TABLE telegram_messages (
                chat_id INTEGER NOT NULL,
                message_id INTEGER NOT NULL,
                seq INTEGER NOT NULL REFERENCES nuntii(seq),
                PRIMARY KEY (chat_id, message_id)
            )""",
            "CREATE INDEX idx_telegram_messages_seq ON telegram_messages(seq)",
            """CREATE TABLE nuntius_links (
                seq INTEGER NOT NULL REFERENCES nuntii(seq),
                kind TEXT NOT NULL CHECK (kind IN ('reply', 'edit_of', 'topic')),
                target_seq INTEGER REFERENCES nuntii(seq),
                quote TEXT,
                quote_sender TEXT,
                PRIMARY KEY (seq, kind)
            )""",
            """CREATE TABLE nuntius_edits (
                seq INTEGER NOT NULL REFERENCES nuntii(seq),
                old_text TEXT NOT NULL,
                new_text TEXT NOT NULL,
                edited_at TEXT NOT NULL
            )""",
            """CREATE TABLE topics (
                chat_id INTEGER NOT NULL,
                agent TEXT NOT NULL,
                thread_id INTEGER NOT NULL,
                name TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (chat_id, agent)
            )""",
            """CREATE TABLE topic_projects (
                chat_id INTEGER NOT NULL,
                thread_id INTEGER NOT NULL,
                project TEXT NOT NULL,
                PRIMARY KEY (chat_id, thread_id)
            )""",
        ],
    )


@migration
async def m014_checks(db: aiosqlite.Connection) -> None:
    """Projects' checks: one row per run of a copy's check (``legio.store.checkstore``)."""
    await _script(
        db,
        [
            """CREATE TABLE checks (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                agent TEXT NOT NULL,
                project TEXT NOT NULL,
                command TEXT NOT NULL,
                commit_id TEXT NOT NULL,
                state TEXT NOT NULL,
                detail TEXT,
                timeout_s REAL NOT NULL,
                started_at TEXT NOT NULL,
                finished_at TEXT,
                exit_code INTEGER,
                duration_s REAL,
                tail TEXT NOT NULL DEFAULT '',
                log_bytes INTEGER NOT NULL DEFAULT 0,
                log_cut INTEGER NOT NULL DEFAULT 0,
                passed INTEGER,
                failed INTEGER,
                skipped INTEGER,
                total INTEGER,
                unit TEXT,
                runner TEXT
            )""",
            "CREATE INDEX idx_checks_copy ON checks(agent, project, id)",
        ],
    )


@migration
async def m015_cards(db: aiosqlite.Connection) -> None:
    """Work cards: what one agent's turn changed on a project (``legio.store.cardstore``)."""
    await _script(
        db,
        [
            """CREATE TABLE cards (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                agent TEXT NOT NULL,
                project TEXT NOT NULL,
                branch TEXT NOT NULL,
                base TEXT NOT NULL,
                from_tip TEXT NOT NULL,
                to_tip TEXT NOT NULL,
                commits INTEGER NOT NULL,
                files INTEGER NOT NULL,
                added INTEGER NOT NULL,
                removed INTEGER NOT NULL,
                uncommitted INTEGER NOT NULL,
                answer_seq INTEGER,
                created_at TEXT NOT NULL,
                check_id INTEGER
            )""",
            "CREATE INDEX idx_cards_copy ON cards(agent, project, id)",
            "CREATE INDEX idx_cards_check ON cards(check_id)",
        ],
    )


@migration
async def m016_pulls(db: aiosqlite.Connection) -> None:
    """Pull requests Legio opened on the forge (``legio.store.pullstore``): followed for CI
    and reviews until merged or closed, across restarts; and the newest issue each agent
    has seen of each project (``forge_new_issues``: the issues opened since)."""
    await _script(
        db,
        [
            """CREATE TABLE pulls (
                id INTEGER PRIMARY KEY,
                project TEXT NOT NULL,
                agent TEXT NOT NULL,
                repo TEXT NOT NULL,
                number INTEGER NOT NULL,
                url TEXT NOT NULL,
                branch TEXT NOT NULL,
                base TEXT NOT NULL,
                head_sha TEXT NOT NULL DEFAULT '',
                state TEXT NOT NULL DEFAULT 'open',
                reported_sha TEXT NOT NULL DEFAULT '',
                reported_review INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                UNIQUE (repo, number)
            )""",
            "CREATE INDEX idx_pulls_state ON pulls(state)",
            """CREATE TABLE forge_seen (
                agent TEXT NOT NULL,
                project TEXT NOT NULL,
                last_issue INTEGER NOT NULL,
                seen_at TEXT NOT NULL,
                PRIMARY KEY (agent, project)
            )""",
        ],
    )


@migration
async def m017_agent_choices(db: aiosqlite.Connection) -> None:
    """Each agent's chosen model and effort (/model, /effort: legio.sessions.choices)."""
    await _script(
        db,
        [
            """CREATE TABLE agent_choices (
                agent TEXT PRIMARY KEY,
                model TEXT,
                effort TEXT,
                updated_at TEXT NOT NULL
            )""",
        ],
    )


@migration
async def m018_request_models(db: aiosqlite.Connection) -> None:
    """The model one request was asked on (``@vorenus:opus``, 🔀 Try again on another model:
    legio.sessions.choices), so /retry and Try again keep it; the model a card's turn ran on."""
    await _script(
        db,
        [
            """CREATE TABLE request_models (
                seq INTEGER NOT NULL,
                agent TEXT NOT NULL,
                model TEXT NOT NULL,
                PRIMARY KEY (seq, agent)
            )""",
            "ALTER TABLE cards ADD COLUMN model TEXT",
        ],
    )


@migration
async def m019_plan_first(db: aiosqlite.Connection) -> None:
    """/plan <agent> on: every request it gets is planned first (legio.sessions.planning);
    a work card's agreed plan (the nuntius it was stored as)."""
    await _script(
        db,
        [
            "ALTER TABLE agent_choices ADD COLUMN plan_first INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE cards ADD COLUMN plan_seq INTEGER",
        ],
    )


async def migrate(db: aiosqlite.Connection) -> None:
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
                (name, now().isoformat()),
            )
            await db.execute(f"PRAGMA user_version = {number}")
            await db.execute("COMMIT")
        except BaseException:
            await db.execute("ROLLBACK")
            raise
        logger.info("praetorium: applied migration %s", name)
