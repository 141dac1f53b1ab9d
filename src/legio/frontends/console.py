"""The terminal front-end: the same ``LegioApp`` and admin commands, without Telegram.

Reads one message per line from standard input (a terminal or a pipe), shows the
agents' ``⏳`` status lines while they work, prints each reply, and exits cleanly on
end of input (Ctrl-D) or Ctrl-C: sessions disconnected, the praetorium closed.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

from legio.admin import Admin, is_command
from legio.app import LegioApp, Reply
from legio.frontends.console_asker import ConsoleAsker
from legio.frontends.views import interruption_notice
from legio.names import LEGATUS

BANNER = (
    "Legio console: write to the Legatus, @name for a centurio, /help for commands, Ctrl-D to quit."
)


async def _lines(stream: TextIO) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    return reader


async def run_console(
    app_factory: Callable[[], Awaitable[LegioApp]],
    *,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
) -> None:
    """Chat until end of input; always close the engine."""
    app = await app_factory()
    admin = Admin(app)
    interactive = stdin.isatty()

    def show(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    async def on_status(agent: str, line: str) -> None:
        show(f"  [{agent}] {line}")

    async def print_reply(reply: Reply) -> None:
        show(reply.text if reply.agent != LEGATUS else f"legatus: {reply.text}")

    try:
        show(BANNER)
        for nuntius, agents in await app.notice_interruptions():
            show(interruption_notice(nuntius.seq, nuntius.text, agents))
        reader = await _lines(stdin)
        app.set_asker(ConsoleAsker(reader, show))  # approvals and questions on the terminal

        async def notice(text: str) -> None:
            show(text)

        app.set_notifier(notice)  # budget warnings, plan limits
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
            await app.handle_message(text, on_status, on_reply=print_reply)
    finally:
        await app.close()
        show("Legio console closed.")
