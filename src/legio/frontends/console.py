"""The terminal front-end: the same ``LegioApp`` and admin commands, without Telegram.

Reads one message per line from standard input (a terminal or a pipe), shows the
agents' ``⏳`` status lines while they work, prints an answer as it is written (one
agent at a time; see ``legio.frontends.console_stream``) or else when it is ready,
runs scheduled jobs in the same terminal, and exits cleanly on end of input (Ctrl-D)
or Ctrl-C: the scheduler stopped, sessions disconnected, the praetorium closed.
``/attach PATH [text]`` gives a file of this machine like a Telegram upload; files the
agents send are printed as paths.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

from legio.admin import Admin, is_command
from legio.app import Job, JobRun, LegioApp, PendingFile, Reply
from legio.errors import AttachmentError
from legio.frontends.console_asker import ConsoleAsker
from legio.frontends.console_stream import StreamPrinter
from legio.frontends.views import interruption_notice
from legio.names import LEGATUS
from legio.timing import begin

BANNER = (
    "Legio console: write to the Legatus, @name for a centurio, /attach PATH [text] for a "
    "file, /help for commands, Ctrl-D to quit."
)
ATTACH_USAGE = "Usage: /attach PATH [text], e.g. /attach ~/report.pdf @vorenus review this"


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

    printer = StreamPrinter(out, app.header)

    async def on_status(agent: str, line: str) -> None:
        if printer.status(agent, line):
            show(f"  [{agent}] {line}")

    async def print_reply(reply: Reply) -> None:
        if printer.reply(reply):
            show(reply.text if reply.agent != LEGATUS else f"legatus: {reply.text}")
        for file in reply.files:
            show(f"📎 {file.sender or reply.agent} sent {file.name}: {file.path}")

    async def present_job(job: Job, run: JobRun) -> object:
        return await run(on_status, print_reply, None)  # printed whole, after its ⏰ mark

    try:
        show(BANNER)
        for nuntius, agents in await app.notice_interruptions():
            show(interruption_notice(nuntius.seq, nuntius.text, agents))
        await app.start_jobs(present_job)  # after the interruptions were noted
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
            attachments: list[PendingFile] = []
            if text.split(maxsplit=1)[0] == "/attach":
                parts = text.split(maxsplit=2)
                if len(parts) < 2:
                    show(ATTACH_USAGE)
                    continue
                try:
                    attachments = [await app.attach_local(parts[1])]
                except AttachmentError as e:
                    show(f"⚠️ {e}")
                    continue
                text = parts[2] if len(parts) > 2 else ""
            elif is_command(text):
                for page in await admin.run(text):
                    show(page)
                continue
            with begin("update received"):
                await app.handle_message(
                    text,
                    on_status,
                    on_reply=print_reply,
                    on_text=printer.stream,
                    attachments=attachments,
                )
    finally:
        await app.close()
        show("Legio console closed.")
