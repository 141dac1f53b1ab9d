"""What Caesar reads of a check: the badge (a card, ``/projects``) and the Checks button's
report, for every way a run can end; hidden characters in its output shown."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from legio.frontends.checkviews import check_part, check_report
from legio.projects.checkwords import check_badge, check_duration
from legio.store.checkstore import CheckRecord

START = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)


def record(**changes: Any) -> CheckRecord:
    base = CheckRecord(
        id=7,
        agent="vorenus",
        project="app",
        command="make test",
        commit="c0ffee1234",
        state="passed",
        timeout_s=900,
        started_at=START,
        exit_code=0,
        duration_s=41.2,
    )
    return base.replace(**changes)


COUNT = {"passed": 212, "failed": 0, "skipped": 0, "total": 212, "unit": "tests"}


@pytest.mark.parametrize(
    ("changes", "badge"),
    [
        (COUNT, "✅ 212 passed · 41 s"),
        ({}, "✅ passed · 41 s"),
        (
            {**COUNT, "state": "failed", "passed": 209, "failed": 3, "exit_code": 1},
            "❌ 3 failed of 212 · 41 s",
        ),
        ({"state": "failed", "exit_code": 2, "duration_s": 38}, "❌ failed (exit code 2) · 38 s"),
        # issue 44: a count that contradicts the exit code is not shown, the exit is
        ({**COUNT, "state": "failed", "exit_code": 2}, "❌ exit code 2 · 41 s"),
        (
            {**COUNT, "state": "failed", "passed": 3, "total": 3, "exit_code": 1},
            "❌ exit code 1 · 41 s",
        ),
        (
            {**COUNT, "passed": 5000, "failed": 1, "total": 5001},
            "✅ exit code 0 (its output counted failures: see its last lines) · 41 s",
        ),
        (
            {"passed": 2, "failed": 1, "total": 3, "unit": "packages"},
            "✅ exit code 0 (its output counted failures: see its last lines) · 41 s",
        ),
        (
            {"passed": 2, "failed": 1, "total": 3, "unit": "packages", "state": "failed"},
            "❌ 1 of 3 packages failed · 41 s",
        ),
        ({"passed": 3, "failed": 0, "total": 3, "unit": "packages"}, "✅ 3 packages ok · 41 s"),
        ({"state": "running", "exit_code": None, "duration_s": None}, "⏳ running"),
        ({"state": "timed_out", "duration_s": 900.3}, "⏱ timed out after 15 min"),
        ({"state": "interrupted"}, "⏹ cut off by a restart of Legio"),
        (
            {"state": "cancelled", "detail": "superseded by check #8 (a newer turn)"},
            "⏹ superseded by check #8 (a newer turn)",
        ),
        (
            {"state": "error", "detail": "bubblewrap is not installed: install it"},
            "⚠️ did not run: bubblewrap is not installed: install it",
        ),
    ],
)
def test_each_end_has_its_badge(changes: dict[str, Any], badge: str) -> None:
    assert check_badge(record(**changes)) == badge


def test_durations_read_on_a_phone() -> None:
    assert [check_duration(s) for s in (0.4, 41.2, 60, 125, 3600, 3725)] == [
        "0 s",
        "41 s",
        "1 min",
        "2 min 5 s",
        "1 h",
        "1 h 2 min",
    ]


def test_the_projects_piece_and_the_report() -> None:
    assert check_part(None) == "check: not run yet"
    assert check_part(record(**COUNT)) == "check ✅ 212 passed · 41 s on c0ffee1"
    failed = record(
        state="failed",
        exit_code=1,
        detail="exit code 1",
        tail="FAILED test_x.py::test_a \u202eexe.py\n\x1b[31m1 failed\n3 failed in 1s",
        log_cut=True,
    )
    text = check_report(failed)
    assert text.startswith("vorenus on #app · check #7 on c0ffee1: ❌ failed (exit code 1) · 41 s")
    assert "$ make test" in text and "exit code 1" in text
    assert "its log was cut" in text
    assert "⟨U+202E⟩exe.py" in text and "\u202e" not in text  # hidden characters shown
    assert "⟨U+001B⟩[31m1 failed" in text
    assert check_report(record(tail="")).endswith("(no output)")
