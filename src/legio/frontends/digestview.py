"""Pure text of the operations' messages: the morning digest and a failed backup.

``digest_lines(digest)`` turns the ``Digest`` value (figures from the records) into the
lines of one message; ``backup_failed_text`` says what failed and what to do. Both front-
ends use them; only their sending differs (Telegram sends the digest silently).
"""

from __future__ import annotations

from legio.operations.digest import Digest
from legio.request import BackupFailed


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _backup_line(last: dict[str, object] | None) -> str:
    if not last:
        return "Backups: none recorded (set [backup] every, or run `legio backup`)."
    when = str(last.get("finished", ""))[:16].replace("T", " ")
    if last.get("ok") and last.get("prune_error"):
        return f"Backups: the last one {when} UTC, but older ones stay: {last['prune_error']}"
    if last.get("ok"):
        return f"Backups: the last one {when} UTC, fine."
    return f"Backups: the last one {when} UTC FAILED: {last.get('error')}"


def digest_lines(digest: Digest) -> list[str]:
    """The digest as lines: the day, each agent, cost, failures, backups."""
    day = f"{digest.start:%a %d %b %H:%M} – {digest.end:%a %d %b %H:%M}"
    lines = [f"☀️ Yesterday in the legion ({day})", ""]
    lines.append(f"Caesar: {_count(digest.requests, 'request')}.")
    for a in digest.agents:
        words = [_count(a.answers, "answer")]
        if a.projects:
            words.append("on " + ", ".join(f"#{p} ({n})" for p, n in a.projects))
        if a.turns:
            words.append(f"{_count(a.turns, 'turn')}, {_usd(a.cost_usd)}")
        if a.failed_turns:
            words.append(f"{a.failed_turns} failed")
        lines.append(f"• {a.agent}: " + "; ".join(words) + ".")
    if not digest.agents:
        lines.append("No agent worked.")
    for tally in digest.tallies:
        counts = "; ".join(
            f"{agent or '—'} {status or 'done'} {n}" for agent, status, n in tally.counts
        )
        lines.append(f"{tally.title.capitalize()}: {counts or 'none'}.")
    lines.append("")
    lines.append(f"Cost: {_usd(digest.total_cost_usd)}")
    projects = [f"#{p} {_usd(c)}" for p, c in digest.cost_by_project if p]
    unmarked = sum(c for p, c in digest.cost_by_project if not p)
    if projects:
        lines.append("  by project: " + ", ".join(projects) + f", no project {_usd(unmarked)}")
    if digest.failed_jobs:
        jobs = ", ".join(f"{name} ({outcome})" for name, outcome in digest.failed_jobs)
        lines.append(f"Failed jobs: {jobs}.")
    if digest.unanswered_approvals:
        asks = ", ".join(f"{agent}: {tool}" for agent, tool, _ in digest.unanswered_approvals)
        lines.append(f"Approvals nobody answered in time: {asks}.")
    lines.append(_backup_line(dict(digest.last_backup) if digest.last_backup else None))
    return lines


def backup_failed_text(event: BackupFailed) -> str:
    """A failed automatic backup, said once, with what to do."""
    return (
        f"⚠️ The automatic backup failed: {event.error}. The earlier archives in "
        f"{event.folder} are whole. Check the folder and the disk, then run `legio backup` "
        "on the server to try at once."
    )
