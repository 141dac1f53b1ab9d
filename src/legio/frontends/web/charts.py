"""A bar chart as inline SVG markup, no script: one bar per label, its value written
beside it. Labels are escaped; sizes are attributes (the page's CSP allows no inline
style)."""

from __future__ import annotations

from html import escape

from markupsafe import Markup

ROW = 28
WIDTH = 360
LABEL = 110


def bars(values: list[tuple[str, float]], unit: str = "$", label: str = "cost by agent") -> Markup:
    """``values`` (label, amount) as horizontal bars, the largest the full width."""
    if not values:
        return Markup("")
    top = max(v for _, v in values) or 1.0
    room = WIDTH - LABEL - 70
    rows = []
    for i, (name, value) in enumerate(values):
        y = i * ROW
        width = max(1, round(room * value / top))
        rows.append(
            f'<text x="0" y="{y + 18}" class="l">{escape(name[:16])}</text>'
            f'<rect x="{LABEL}" y="{y + 6}" width="{width}" height="16" rx="3" class="b"/>'
            f'<text x="{LABEL + width + 6}" y="{y + 18}" class="v">{unit}{value:,.2f}</text>'
        )
    height = ROW * len(values)
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" '
        f'aria-label="{escape(label)}">{"".join(rows)}</svg>'
    )
