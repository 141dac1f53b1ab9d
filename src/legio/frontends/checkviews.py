"""Pure text of projects' checks: the badge a card and ``/projects`` show, and the text the
**Checks** button sends (the tail, made visible).

``check_badge`` is one short line: ``✅ 212 passed · 41 s``, ``❌ 3 failed of 212 · 38 s``,
``⏳ running``, ``⏱ timed out after 15 min``; the exit code alone when the output held no
runner's count or a count that contradicts the exit code (the count is the project's own
output: ``legio.projects.tally``). ``check_part`` is ``/projects``'s piece of a copy's
line; ``check_report`` the whole of one run, its last lines with every hidden character
shown (``⟨U+202E⟩``).
"""

from __future__ import annotations

from legio.app import CheckRecord
from legio.projects.checkwords import check_badge
from legio.visible import visible, visible_name

SHORT_COMMIT = 7


def check_on(record: CheckRecord) -> str:
    """What was checked: ``on c0ffee1`` (a clean tree of that commit), or ``on uncommitted
    work (over c0ffee1)`` for a run asked for on the copy's work tree."""
    short = record.commit[:SHORT_COMMIT] or "?"
    return f"on uncommitted work (over {short})" if record.uncommitted else f"on {short}"


def check_part(record: CheckRecord | None) -> str:
    """``/projects``'s piece about a copy's last check (its project has a check)."""
    if record is None:
        return "check: not run yet"
    return f"check {check_badge(record)} {check_on(record)}"


def check_report(record: CheckRecord, *, agent_project: bool = True) -> str:
    """One run in full, for the **Checks** button: what ran where, how it went, and its
    last lines (bounded when stored), every hidden character shown."""
    where = f"{record.agent} on #{record.project} · " if agent_project else ""
    lines = [
        f"{where}check #{record.id} {check_on(record)}: {check_badge(record)}",
        f"$ {visible_name(record.command)}",
    ]
    if record.detail and record.state in ("failed", "timed_out"):
        lines.append(visible_name(record.detail))
    if record.log_cut:
        lines.append("(its log was cut at its size limit; the last lines below are whole)")
    if record.tail:
        lines += ["", visible(record.tail)]
    elif record.state != "running":
        lines.append("(no output)")
    return "\n".join(lines)
