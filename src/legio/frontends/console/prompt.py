"""The console on a terminal: a prompt that always answers (prompt_toolkit).

The line being typed stays put while agents work: answers, streamed text and notices
print above it (``patch_stdout``). A message runs as a task, so ``/stop``, ``/status``
and every other command answer at once. Ctrl-C stops the running turns; with nothing
running, Ctrl-C or Ctrl-D quits. What Caesar typed is kept across runs (a history file
in the castra's state); ``@names`` and ``/commands`` complete with Tab; the bottom line
shows each working agent, what it is doing and for how long. While an agent waits for
an approval or an answer, the prompt asks it (``PromptAsker``): a ``/command`` typed
then still runs as a command.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion, WordCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout

from legio.app import LegioApp
from legio.frontends.admin import COMMANDS, is_command
from legio.frontends.console.asker import PromptAsker
from legio.frontends.views import stop_text

Send = Callable[[str, int], Awaitable[None]]  # a line, and when it arrived
Command = Callable[[str, int], Awaitable[None]]
STATUS_MAX = 48


class Words(Completer):
    """``/commands`` at the start of the line, ``@names`` anywhere."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self.names = names
        self.commands = WordCompleter([f"/{c.name}" for c in COMMANDS] + ["/attach"])

    def get_completions(self, document: Document, complete_event: object) -> Iterable[Completion]:
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("/") and document.text_before_cursor.lstrip() == word:
            yield from self.commands.get_completions(document, complete_event)  # type: ignore[arg-type]
        elif word.startswith("@"):
            for name in ["all", *self.names()]:
                if name.startswith(word[1:]):
                    yield Completion(f"@{name}", start_position=-len(word))


@dataclass
class Board:
    """Each working agent's latest status line and since when it works."""

    doing: dict[str, tuple[str, float]] = field(default_factory=dict)

    def update(self, agent: str, line: str) -> None:
        since = self.doing.get(agent, ("", time.monotonic()))[1]
        self.doing[agent] = (line, since)

    def done(self, agent: str) -> None:
        self.doing.pop(agent, None)

    def text(self) -> str:
        parts = []
        for agent, (line, since) in self.doing.items():
            what = describe(agent, line)
            parts.append(f"{agent}: {what} ({time.monotonic() - since:.0f}s)")
        return " · ".join(parts) if parts else "Tab completes @names and /commands; Ctrl-C stops"


def describe(agent: str, line: str) -> str:
    """A status line made short: ``thinking``, ``Bash: <command>``, ``waiting for approval``."""
    text = line.lstrip("⏳⏸🔧 ").removeprefix(agent).strip(" :")
    if "approval" in line:
        return "waiting for approval"
    if "answer" in line and "waiting" in line:
        return "waiting for your answer"
    if not text or "Thinking" in text or "working" in text:
        return "thinking"
    return text if len(text) <= STATUS_MAX else text[: STATUS_MAX - 1] + "…"


async def run_prompt(
    app: LegioApp,
    history: Path,
    board: Board,
    send: Send,
    command: Command,
    show: Callable[[str], None],
    asker: PromptAsker,
) -> None:
    """Read lines until Ctrl-D (or Ctrl-C with nothing running); ``send`` runs a message
    (as a task), ``command`` a ``/command``."""
    history.parent.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(
        history=FileHistory(str(history)),
        completer=Words(app.agents),
        complete_while_typing=False,
        bottom_toolbar=board.text,
        refresh_interval=0.5,
    )
    running: set[asyncio.Task[None]] = set()

    def start(coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        running.add(task)
        task.add_done_callback(running.discard)

    with patch_stdout(raw=True):
        while True:
            try:
                text = await session.prompt_async(asker.prompt)
            except KeyboardInterrupt:
                stopped = await app.stop_all()
                if stopped:
                    show(
                        stop_text(stopped).removesuffix(".") + " (Ctrl-C again or Ctrl-D to quit)."
                    )
                    continue
                break
            except EOFError:
                break
            if not text.strip():
                continue
            if is_command(text) and text.split()[0] not in ("/attach", "/queue", "/plan"):
                # stamped as it arrives, before its task starts: a stop after it ends it
                start(
                    command(text, app.receive(request=False))
                )  # at once, even while an approval waits
            elif asker.waiting():
                asker.take(text)
            else:
                start(send(text, app.receive()))
        await app.stop_all()
        for task in list(running):
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
