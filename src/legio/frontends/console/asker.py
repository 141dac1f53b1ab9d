"""The console's way of asking Caesar: approvals and agents' questions on the terminal.

Approvals: ``o`` (once), ``s`` (this session), ``a`` (always), ``d`` or an empty line
(deny), ``x`` (deny and stop); any other text denies with that text as the reason.
Questions: the numbers of the chosen options (``1,3``), or free text. A ``/command``
typed while a request waits runs as a command; it never answers the request.

- ``PromptAsker`` (a terminal): the prompt itself asks; the console's prompt loop hands
  it the next line that is not a command (``take``).
- ``ConsoleAsker`` (piped input, line by line): the asker reads the next line itself,
  and hands a ``/command`` line to ``on_command``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from legio.frontends.admin import is_command
from legio.frontends.numbers import digits
from legio.request import ApprovalRequest, Decision, QuestionRequest
from legio.shell.rules import shorten_middle
from legio.visible import visible

KEYS = {"o": "once", "y": "once", "s": "session", "a": "always", "d": "deny", "n": "deny"}
KEYS["x"] = "stop"
CHOICES = (
    "Allow [o]nce, for this [s]ession, [a]lways; [d]eny, or deny and stop [x]; "
    "or write why you deny it."
)


def approval_lines(request: ApprovalRequest) -> str:
    """What the call will run (start and end of a long one), then the agent's own words."""
    shown = shorten_middle(request.full_target or request.target)
    lines = f"⚔️ {request.agent} asks to use {request.tool}:\n{shown}"
    if request.description.strip():
        lines += (
            f"\n  the agent describes it as (its own words, not checked): {request.description!r}"
        )
    return f"{lines}\n  ({request.why_asked()})\n  {CHOICES}"


def decision(answer: str) -> Decision:
    choice = KEYS.get(answer.strip().lower())
    if choice is None:
        return Decision("deny", answer.strip())
    return Decision(choice)  # type: ignore[arg-type]


def question_lines(agent: str, item: dict[str, Any]) -> tuple[str, list[str]]:
    """A question with its numbered options (and their descriptions), and the labels."""
    options = [o for o in item.get("options") or [] if isinstance(o, dict)]
    labels = [str(o.get("label", "")) for o in options]
    lines = [f"⚔️ {agent} asks: {visible(str(item.get('question', '')))}"]
    for number, option in enumerate(options, start=1):
        about = str(option.get("description") or "").strip()
        lines.append(f"  {number}. {option.get('label', '')}" + (f" — {about}" if about else ""))
    several = " (several: 1,3)" if item.get("multiSelect") else ""
    lines.append(f"  Your choice{several}, or your own answer:")
    return "\n".join(lines), labels


def chosen(text: str, labels: list[str]) -> str:
    numbers = [digits(p.strip()) for p in text.split(",")]
    picked = [labels[n - 1] for n in numbers if n is not None and 1 <= n <= len(labels)]
    return ", ".join(picked) if text and len(picked) == len(numbers) else text


class PromptAsker:
    """Asks at the prompt: the next line Caesar types that is not a ``/command`` answers
    the oldest request waiting."""

    def __init__(self, show: Callable[[str], None]) -> None:
        self.show = show
        self._waiting: deque[tuple[str, asyncio.Future[str]]] = deque()

    def prompt(self) -> str:
        return f"{self._waiting[0][0]}> " if self._waiting else "caesar> "

    def waiting(self) -> bool:
        return bool(self._waiting)

    def take(self, text: str) -> None:
        _, future = self._waiting.popleft()
        if not future.done():
            future.set_result(text)

    async def _ask(self, label: str, text: str) -> str:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        entry = (label, future)
        self._waiting.append(entry)
        self.show(text)
        try:
            return await future
        except asyncio.CancelledError:
            if entry in self._waiting:
                self._waiting.remove(entry)
            raise

    async def approve(self, request: ApprovalRequest) -> Decision:
        try:
            answer = await self._ask(f"allow {request.agent}? [o/s/a/d/x]", approval_lines(request))
        except asyncio.CancelledError:
            late = request.outcome == "timeout"
            self.show(
                f"  ({request.agent}: no answer in time: denied)" if late else "  (cancelled)"
            )
            raise
        return decision(answer)

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        answers: dict[str, str] = {}
        for item in request.questions:
            text, labels = question_lines(request.agent, item)
            answers[str(item.get("question", ""))] = chosen(
                await self._ask(f"answer {request.agent}", text), labels
            )
        return answers if any(answers.values()) else None


class ConsoleAsker:
    """Asks on piped input; register with ``LegioApp.set_asker``."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        show: Callable[[str], None],
        on_command: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.reader = reader
        self.show = show
        self.on_command = on_command
        self._lock = asyncio.Lock()

    async def _line(self) -> str:
        while True:
            raw = await self.reader.readline()
            line = raw.decode("utf-8", errors="replace").strip()
            if raw and is_command(line) and self.on_command is not None:
                await self.on_command(line)  # a command typed meanwhile runs as one
                continue
            return line

    async def approve(self, request: ApprovalRequest) -> Decision:
        async with self._lock:
            self.show(approval_lines(request))
            try:
                answer = await self._line()
            except asyncio.CancelledError:
                late = request.outcome == "timeout"
                self.show("  (no answer in time: denied)" if late else "  (cancelled)")
                raise
        return decision(answer)

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        answers: dict[str, str] = {}
        async with self._lock:
            for item in request.questions:
                text, labels = question_lines(request.agent, item)
                self.show(text)
                answers[str(item.get("question", ""))] = chosen(await self._line(), labels)
        return answers if any(answers.values()) else None
