"""The console's way of asking Caesar: approvals and agents' questions on the terminal.

While an agent waits, the console is inside ``handle_message`` and not reading input,
so the asker reads the next line itself (one question at a time). Approvals: ``o``
(once), ``s`` (this session), ``a`` (always), ``d`` or an empty line (deny), ``x``
(deny and stop); any other text denies with that text as the reason. Questions: the
numbers of the chosen options (``1,3``), or free text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from legio.app import ApprovalRequest, Decision, QuestionRequest, shorten_middle

KEYS = {"o": "once", "y": "once", "s": "session", "a": "always", "d": "deny", "n": "deny"}
KEYS["x"] = "stop"


def approval_lines(request: ApprovalRequest) -> str:
    """What the call will run (start and end of a long one), then the agent's own words."""
    shown = shorten_middle(request.full_target or request.target)
    lines = f"⚔️ {request.agent} asks to use {request.tool}:\n{shown}"
    if request.description.strip():
        lines += (
            f"\n  the agent describes it as (its own words, not checked): {request.description!r}"
        )
    return lines


class ConsoleAsker:
    """Asks on the terminal; register with ``LegioApp.set_asker``."""

    def __init__(self, reader: asyncio.StreamReader, show: Callable[[str], None]) -> None:
        self.reader = reader
        self.show = show
        self._lock = asyncio.Lock()

    async def _line(self) -> str:
        raw = await self.reader.readline()
        return raw.decode("utf-8", errors="replace").strip()

    async def approve(self, request: ApprovalRequest) -> Decision:
        async with self._lock:
            self.show(approval_lines(request))
            self.show(
                f"  ({request.why_asked()}) allow [o]nce, this [s]ession, [a]lways, "
                "[d]eny, deny and stop [x], or type a reason to deny:"
            )
            try:
                answer = await self._line()
            except asyncio.CancelledError:
                self.show(
                    "  (no answer in time: denied)"
                    if request.outcome == "timeout"
                    else "  (cancelled)"
                )
                raise
        choice = KEYS.get(answer.lower())
        if choice is None:
            return Decision("deny", answer)
        return Decision(choice)  # type: ignore[arg-type]

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        answers: dict[str, str] = {}
        async with self._lock:
            for item in request.questions:
                labels = [str(o.get("label", "")) for o in item.get("options") or []]
                self.show(f"⚔️ {request.agent} asks: {item.get('question', '')}")
                for number, label in enumerate(labels, start=1):
                    self.show(f"  {number}. {label}")
                several = " (several: 1,3)" if item.get("multiSelect") else ""
                self.show(f"  your choice{several}, or your own answer:")
                text = await self._line()
                numbers = [p.strip() for p in text.split(",")]
                if text and all(p.isdigit() and 1 <= int(p) <= len(labels) for p in numbers):
                    text = ", ".join(labels[int(p) - 1] for p in numbers)
                answers[str(item.get("question", ""))] = text
        return answers if any(answers.values()) else None
