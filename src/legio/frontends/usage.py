"""Pure text for ``/usage``: spend per agent and model, today and over 7 days."""

from __future__ import annotations

from legio.app import UsageRow
from legio.limits.budget import UsageReport


def _rows(title: str, rows: list[UsageRow]) -> list[str]:
    lines = [title]
    if not rows:
        return [*lines, "  nothing spent"]
    for row in rows:
        model = row.model or "default model"
        tokens = row.input_tokens + row.output_tokens
        lines.append(
            f"  {row.agent} · {model}: ${row.cost_usd:,.2f} "
            f"({row.turns} turn{'' if row.turns == 1 else 's'}, {tokens:,} tokens)"
        )
    lines.append(f"  total: ${sum(r.cost_usd for r in rows):,.2f}")
    return lines


def usage_lines(report: UsageReport, plan: list[str] | None = None) -> list[str]:
    """Today, the last 7 days, the daily limit and the plan's windows (if known)."""
    lines = _rows(f"Today (since {report.day_start:%Y-%m-%d %H:%M} {report.zone}):", report.today)
    lines += ["", *_rows("Last 7 days:", report.week)]
    if report.reserved:
        lines += ["", f"Set aside for the turns running now: ${report.reserved:,.2f}."]
    if report.daily_usd:
        lines += ["", f"Daily budget: ${report.daily_usd:,.2f} ([budget] daily_usd)."]
    else:
        lines += ["", "No daily budget: set [budget] daily_usd in legio.toml to cap a day's spend."]
    if plan:
        lines += ["", "Plan:", *plan]
    return lines
