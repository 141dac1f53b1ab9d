"""The morning digest against the records: rows inserted in a real SQLite praetorium,
the figures the digest computes compared with them; the optional tables (checks, pull
requests) read only when they exist; the routine's timetable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from legio.frontends.digestview import digest_lines
from legio.operations.digest import AgentDay, StatusCounts, compute_digest
from legio.operations.routine import next_backup, next_digest
from legio.store.praetorium import Praetorium

END = datetime(2026, 11, 25, 7, 0, tzinfo=UTC)
START = END - timedelta(days=1)


def at(hours_before_end: float) -> str:
    return (END - timedelta(hours=hours_before_end)).isoformat()


async def test_digest_figures_match_the_records(tmp_path: Path) -> None:
    async with await Praetorium.open(tmp_path / "p.db") as p:
        db = p.connection
        rows = [  # sender, audience, project, hours before the end
            ("caesar", "legatus", None, 20),
            ("legatus", "caesar", None, 19.9),
            ("caesar", "vorenus", "app", 10),
            ("vorenus", "caesar", "app", 9.9),
            ("caesar", "vorenus", "app", 5),
            ("vorenus", "caesar", "app", 4.9),
            ("caesar", "pullo", "web", 2),
            ("pullo", "caesar", None, 1.9),
            ("caesar", "legatus", None, 30),
            ("legatus", "caesar", None, 29),  # day before
            ("caesar", "legatus", None, -1),  # after the end
        ]
        for number, (sender, to, project, hours) in enumerate(rows):
            await db.execute(
                "INSERT INTO nuntii (id, sender, text, audience, timestamp, project) "
                "VALUES (?, ?, 'x', ?, ?, ?)",
                (f"n{number}", sender, f'["{to}"]', at(hours), project),
            )
        turns = [  # agent, request seq, cost, error, hours before the end
            ("legatus", 1, 0.10, 0, 19.9),
            ("vorenus", 3, 0.50, 0, 9.9),
            ("vorenus", 5, 0.25, 1, 4.9),
            ("pullo", 7, 0.05, 0, 1.9),
            ("legatus", 9, 9.00, 0, 29),  # the day before: not counted
        ]
        for agent, seq, cost, error, hours in turns:
            await db.execute(
                "INSERT INTO turns (agent, nuntius_seq, cost_usd, is_error, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (agent, seq, cost, error, at(hours)),
            )
        for name, outcome, hours in (
            ("report", "error", 3),
            ("ping", "answer", 3),
            ("old", "error", 40),
        ):
            await db.execute(
                "INSERT INTO jobs (name, target, request, kind, timezone, created_by, "
                "created_at, last_run, last_outcome) VALUES (?, 'legatus', 'r', 'once', "
                "'UTC', 'legatus', ?, ?, ?)",
                (name, at(50), at(hours), outcome),
            )
        for tool, status in (("Bash", "timeout"), ("Edit", "once"), ("Bash", "expired")):
            await db.execute(
                "INSERT INTO approval_requests (agent, tool, status, created_at) "
                "VALUES ('vorenus', ?, ?, ?)",
                (tool, status, at(6)),
            )
        for state, hours in (("passed", 8), ("failed", 4), ("failed", 4.5), ("passed", 30)):
            await db.execute(
                "INSERT INTO checks (agent, project, command, commit_id, state, timeout_s, "
                "started_at, finished_at) VALUES ('vorenus', 'app', 'make test', 'c0ffee', "
                "?, 900, ?, ?)",
                (state, at(hours + 0.1), at(hours)),
            )
        last = {"finished": at(1), "archive": "/b/x.tar.gz", "ok": True, "error": None}
        digest = await compute_digest(db, START, END, last)
        assert digest.requests == 4
        assert digest.agents == (
            AgentDay("legatus", 1, (), 1, 0, 0.10),
            AgentDay("pullo", 1, (), 1, 0, 0.05),
            AgentDay("vorenus", 2, (("app", 2),), 2, 1, 0.75),
        )
        assert digest.cost_by_project == (("app", 0.75), ("", 0.10), ("web", 0.05))
        assert abs(digest.total_cost_usd - 0.90) < 1e-9
        assert digest.failed_jobs == (("report", "error"),)
        assert digest.unanswered_approvals == (
            ("vorenus", "Bash", "timeout"),
            ("vorenus", "Bash", "expired"),
        )
        assert digest.tallies == (  # the day's checks; no pull request (a quiet table)
            StatusCounts("checks", (("vorenus", "failed", 2), ("vorenus", "passed", 1))),
        )
        text = "\n".join(digest_lines(digest))
        assert "• vorenus: 2 answers; on #app (2); 2 turns, $0.75; 1 failed." in text
        assert "Cost: $0.90" in text and "#app $0.75" in text
        assert "Failed jobs: report (error)." in text
        assert "Approvals nobody answered in time: vorenus: Bash, vorenus: Bash." in text
        assert "fine." in text

        assert "Checks: vorenus failed 2; vorenus passed 1." in digest_lines(digest)


def test_the_timetable() -> None:
    rome = ZoneInfo("Europe/Rome")
    moment = datetime(2026, 11, 25, 6, 30, tzinfo=UTC)  # 07:30 in Rome
    assert next_digest("", rome, None, moment) is None
    assert next_digest("08:00", rome, None, moment) == datetime(2026, 11, 25, 8, tzinfo=rome)
    assert next_digest("08:00", rome, "2026-11-24", moment) == datetime(
        2026, 11, 25, 8, tzinfo=rome
    )
    later = moment + timedelta(hours=2)  # 09:30: today's went out
    assert next_digest("08:00", rome, "2026-11-25", later) == datetime(2026, 11, 26, 8, tzinfo=rome)
    # sent yesterday, the daemon down at 08:00: it goes out now; never sent: tomorrow's
    assert next_digest("08:00", rome, "2026-11-24", later) == datetime(2026, 11, 25, 8, tzinfo=rome)
    assert next_digest("08:00", rome, None, later) == datetime(2026, 11, 26, 8, tzinfo=rome)
    assert next_backup("off", None, moment) is None
    assert next_backup("daily", None, moment) == moment
    last = {"finished": moment.isoformat()}
    assert next_backup("hourly", last, moment) == moment + timedelta(hours=1)
    assert next_backup("weekly", last, moment) == moment + timedelta(weeks=1)
