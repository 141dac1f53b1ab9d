"""The terminal front-end: the same Legatus and admin commands, without Telegram.

Reads one message per line from standard input (a terminal or a pipe), shows the
agents' ``⏳`` status lines while they work, prints an answer as it is written (one
agent at a time; see ``legio.console_stream``) or else when it is ready, and exits cleanly on
end of input (Ctrl-D) or Ctrl-C: sessions disconnected, the praetorium closed.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

from legio.admin import Admin, interruption_notice, is_command
from legio.console_stream import StreamPrinter
from legio.legatus import Legatus, Reply
from legio.timing import begin

BANNER = (
    "Legio console: write to the Legatus, @name for a centurio, /help for commands, Ctrl-D to quit."
)


async def _lines(stream: TextIO) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    return reader


async def run_console(
    legatus_factory: Callable[[], Awaitable[Legatus]],
    *,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
) -> None:
    """Chat until end of input; always close the Legatus."""
    legatus = await legatus_factory()
    admin = Admin(legatus)
    interactive = stdin.isatty()

    def show(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    printer = StreamPrinter(out, lambda agent: legatus.header(agent, legatus.castra.roster()))

    async def on_status(agent: str, line: str) -> None:
        if printer.status(agent, line):
            show(f"  [{agent}] {line}")

    async def print_reply(reply: Reply) -> None:
        if printer.reply(reply):
            show(reply.text if reply.agent != "legatus" else f"legatus: {reply.text}")

    try:
        show(BANNER)
        for nuntius, agents in await legatus.notice_interruptions():
            show(interruption_notice(nuntius.seq, nuntius.text, agents))
        reader = await _lines(stdin)
        while True:
            if interactive:
                out.write("caesar> ")
                out.flush()
            raw = await reader.readline()
            if not raw:
                break
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            if not text.strip():
                continue
            if is_command(text):
                for page in await admin.run(text):
                    show(page)
                continue
            with begin("update received"):
                await legatus.handle_message(
                    text, on_status, on_reply=print_reply, on_text=printer.stream
                )
    finally:
        await legatus.close()
        show("Legio console closed.")
