"""The console's live answers: an agent's text printed as it is written.

One agent holds the terminal at a time (the first to write); the others' answers are
printed whole when ready, as before. The holder's text is printed as it grows; when
its answer arrives it is not printed again (unless the final text differs from the
streamed one: then it is printed whole). A status line that merely previews streamed
text is not shown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from legio.frontends.statusview import previews
from legio.names import LEGATUS
from legio.request import Reply, Status


class StreamPrinter:
    """Prints streamed text to ``out``; ``header(agent)`` is a centurio's attribution."""

    def __init__(self, out: TextIO, header: Callable[[str], str]) -> None:
        self.out = out
        self.header = header
        self.holder: str | None = None
        self.current = ""  # the holder's current message, as far as printed
        self.line_open = False  # the cursor is after streamed text, not at a line start

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self.line_open = not text.endswith("\n")

    def _end_line(self) -> None:
        if self.line_open:
            self._write("\n")

    async def stream(self, agent: str, text: str) -> None:
        """``text`` is ``agent``'s current message so far (the watch's ``stream``)."""
        if self.holder is None:
            self.holder, self.current = agent, ""
            self._write("legatus: " if agent == LEGATUS else self.header(agent))
        if agent != self.holder:
            return
        if text.startswith(self.current):
            self._write(text[len(self.current) :])
        else:  # a new message in the same turn (after a tool): on a fresh line
            self._end_line()
            self._write(text)
        self.current = text

    def status(self, status: Status) -> bool:
        """Whether to show a status (the caller prints it on a line of its own)."""
        if status.agent == self.holder and previews(status, self.current):
            return False
        self._end_line()
        return True

    def reply(self, reply: Reply) -> bool:
        """Whether to print ``reply`` whole (False: the stream has shown it)."""
        self._end_line()
        if reply.agent != self.holder:
            return True
        streamed, self.holder, self.current = self.current.strip(), None, ""
        return not (streamed and reply.text.rstrip().endswith(streamed))
