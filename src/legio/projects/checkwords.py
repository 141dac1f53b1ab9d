"""A check's result in one line, the words a card, ``/projects`` and a pull request share:
``✅ 212 passed · 41 s``, ``❌ 3 failed of 212 · 38 s``, ``⏳ running``, ``⏱ timed out after
15 min``; the exit code alone when the output held no runner's count, or a count that
contradicts the exit code (the count is the project's own output: ``legio.projects.tally``).
The engine words the pull request's check line with it (``WorkDoor.publish_preview``), so
no front-end's rendering is handed back into what is posted.
"""

from __future__ import annotations

from legio.store.checkstore import CheckRecord
from legio.visible import visible_name


def check_duration(seconds: float) -> str:
    """``41 s``, ``2 min 5 s``, ``15 min``, ``1 h 2 min``."""
    whole = max(round(seconds), 0)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min" + (f" {secs} s" if secs else "")
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h" + (f" {minutes} min" if minutes else "")


def _count(record: CheckRecord) -> str | None:
    """The runner's count in words, or None where the output held none."""
    if record.total is None or record.passed is None or record.failed is None:
        return None
    if record.unit == "packages":
        if record.failed:
            return f"{record.failed} of {record.total} packages failed"
        return f"{record.passed} packages ok"
    if record.failed:
        return f"{record.failed:,} failed of {record.total:,}"
    return f"{record.passed:,} passed"


def _agrees(record: CheckRecord) -> bool:
    """Whether the runner's count agrees with the exit code (the count is the check's own
    output, the exit code is what decided): a pass counts no failure, a failure counts
    one at least. A count that contradicts the exit is not shown."""
    if record.failed is None:
        return False
    return record.failed == 0 if record.state == "passed" else record.failed > 0


def check_badge(record: CheckRecord) -> str:
    """One line for a card or ``/projects``: the state, the count, the time. Never ✅
    beside a failure count, never ❌ beside a bare pass count: a count that contradicts
    the exit code gives way to the exit code."""
    took = f" · {check_duration(record.duration_s)}" if record.duration_s is not None else ""
    count = _count(record)
    if record.state == "running":
        return "⏳ running"
    if record.state == "passed":
        if count is not None and not _agrees(record):
            return f"✅ exit code 0 (its output counted failures: see its last lines){took}"
        return f"✅ {count or 'passed'}{took}"
    if record.state == "failed":
        code = f"exit code {record.exit_code}"
        if count is None:
            return f"❌ failed ({code}){took}"
        if not _agrees(record):  # the runner counted no failure, the command still failed
            return f"❌ {code}{took}"
        return f"❌ {count}{took}"
    if record.state == "timed_out":
        return f"⏱ timed out after {check_duration(record.timeout_s)}"
    if record.state == "interrupted":
        return "⏹ cut off by a restart of Legio"
    if record.state == "cancelled":
        return f"⏹ {visible_name(record.detail or 'cancelled')}"
    return f"⚠️ did not run: {visible_name(record.detail or 'unknown error')}"
