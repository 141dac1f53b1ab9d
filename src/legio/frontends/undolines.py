"""``/undo``: what ↩️ Undo and 🔀 Try again kept, and ``/undo <card>`` to bring one back.

Front-end neutral (pages of text), run by ``legio.frontends.admin``'s table.
"""

from __future__ import annotations

import time

from legio.errors import ProjectError
from legio.frontends.forgelines import HasWork
from legio.frontends.numbers import digits

USAGE = (
    "/undo lists what undo kept; /undo <card> brings card <card>'s work back "
    "(/undo <card>-2: its second keep)"
)


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{max(1, int(seconds // 60))} min ago"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"


async def cmd_undo(admin: HasWork, args: str) -> list[str]:
    words = args.split()
    if words:
        card, dash, which = words[0].lstrip("#").partition("-")
        number, nth = digits(card), digits(which) if dash else 1
        if number is None or nth is None or nth < 1 or len(words) > 1:
            return [f"Use {USAGE}."]
        try:
            return [await admin.work.restore(number, nth)]
        except ProjectError as e:
            return [f"Not restored: {e}"]
    kept = await admin.work.undone()
    if not kept:
        return ["Nothing is kept: no turn was undone in the last 14 days."]
    now = time.time()
    lines = ["Kept by undo (14 days; /undo <card> brings one back):"]
    for k in kept:
        more = f", {k.uncommitted} uncommitted change(s)" if k.uncommitted else ""
        which = f" (its keep {k.nth}: /undo {k.label})" if k.nth > 1 else ""
        lines.append(
            f"card {k.card}{which} · {k.agent} #{k.project} · {k.branch} {k.from_tip[:7]}→"
            f"{k.to_tip[:7]}{more} · kept {_age(now - k.kept_at)}"
        )
    return ["\n".join(lines)]
