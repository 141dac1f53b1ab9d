"""The terminal front-end: the same ``LegioApp`` and admin commands, without Telegram.

On a terminal the prompt always answers (``legio.frontends.console.prompt``): messages
run while Caesar types, commands answer at once, Ctrl-C stops the running turns. With
piped input it reads one line at a time, each answered before the next (scripts stay
deterministic). Either way: the agents' status lines, an answer printed as it is written
(one agent at a time; see ``legio.frontends.console.stream``) or else when ready,
scheduled jobs in the same terminal, and a clean close on end of input (Ctrl-D): the
scheduler stopped, sessions disconnected, the praetorium closed, "Legio console closed."
said once. ``/attach PATH [text]`` (a path with spaces in quotes) gives a file of this
machine like a Telegram upload; files the agents send are printed as paths.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

from legio.app import DOWNLOAD_LIMIT, Job, JobRun, LegioApp
from legio.audience import Operation, Quiet
from legio.errors import AttachmentError
from legio.frontends.admin import Admin, is_command
from legio.frontends.console.asker import ConsoleAsker, PromptAsker
from legio.frontends.console.stream import StreamPrinter
from legio.frontends.digestview import backup_failed_text, digest_lines
from legio.frontends.statusview import status_text
from legio.frontends.views import agent_header, card_text, interruption_notice, reply_text
from legio.names import LEGATUS
from legio.operations.digest import DigestReady
from legio.request import (
    Added,
    Asker,
    Callbacks,
    PendingFile,
    Reply,
    Request,
    Status,
    Stuck,
    Watch,
    WorkCard,
)
from legio.timing import begin
from legio.visible import visible

BANNER = (
    "Legio console: write to the Legatus, @name for a centurio, /attach PATH [text] for a "
    "file, /help for commands, Ctrl-D to quit."
)
ATTACH_USAGE = (
    "Usage: /attach PATH [text], e.g. /attach ~/report.pdf @vorenus review this "
    f'(a path with spaces in quotes: /attach "my notes.txt"; up to {DOWNLOAD_LIMIT >> 20} MB)'
)
CLOSED = "Legio console closed."


async def _lines(stream: TextIO) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    return reader


def split_attach(text: str) -> tuple[str, str] | str:
    """``/attach PATH [text]``: (path, text), or the usage line."""
    rest = text.split(maxsplit=1)[1] if len(text.split(maxsplit=1)) > 1 else ""
    if not rest.strip():
        return ATTACH_USAGE
    if rest[0] in "'\"":  # a quoted path may hold spaces
        end = rest.find(rest[0], 1)
        return ATTACH_USAGE if end < 0 else (rest[1:end], rest[end + 1 :].strip())
    path, _, words = rest.partition(" ")
    return path, words.strip()


async def run_console(
    app_factory: Callable[[], Awaitable[LegioApp]],
    *,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
    note: str = "",
    observe: Callable[[Watch], Watch] = lambda watch: watch,
) -> None:
    """Chat until end of input; always close the engine. ``observe``: each request's
    watch, seen elsewhere too (the cockpit's page, ``Cockpit.observe``)."""
    from legio.frontends.console.prompt import Board, run_prompt

    app = await app_factory()
    admin = Admin(app)
    inbox = app.inbox  # /attach's files
    board = Board()

    def show(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    printer = StreamPrinter(out, functools.partial(agent_header, app))

    async def on_status(status: Status) -> None:
        line = status_text(status)
        board.update(status.agent, line)
        if printer.status(status):
            show(f"  [{status.agent}] {line}")

    async def print_reply(reply: Reply) -> None:
        board.done(reply.agent)
        if printer.reply(reply):
            text = reply_text(reply, agent_header(app, reply.agent, reply.project, reply.model))
            show(text if reply.agent != LEGATUS else f"legatus: {text}")
        for file in reply.files:
            show(f"📎 {file.sender or reply.agent} sent {file.name}: {file.path}")

    async def print_card(card: WorkCard) -> None:
        board.done(card.agent)
        show(card_text(card))

    async def present_job(job: Job | None, run: JobRun) -> object:
        return await run(observe(Callbacks(on_status, None, print_reply, print_card)))

    async def command(text: str, receipt: int | None = None) -> None:
        pages = await admin.run(text, receipt)
        for page in pages:
            show(page)
        for name, content in getattr(pages, "documents", ()):  # /diff's diff, in full
            if isinstance(content, Path):  # /export's file: where it is
                show(f"── {name} ── written to {content}")
                continue
            show(f"── {name} ──\n{visible(content.decode(errors='replace')).rstrip()}")
        if text.split()[0] == "/help":
            show(ATTACH_USAGE.replace("Usage: ", "In this console: "))

    async def joined(added: Added) -> None:  # a line typed while the agent works
        show(f"➕ added to {added.agent}'s turn (/queue <message>: after the turn instead)")

    async def send(text: str, receipt: int | None = None) -> None:
        receipt = receipt if receipt is not None else app.receive()
        try:
            attachments: list[PendingFile] = []
            if text.split(maxsplit=1)[0] == "/attach":
                parsed = split_attach(text)
                if isinstance(parsed, str):
                    show(parsed)
                    return
                try:
                    attachments = [await inbox.attach_local(parsed[0])]
                except AttachmentError as e:
                    show(f"⚠️ {e}")
                    return
                text = parsed[1]
            first = text.split(maxsplit=1)[0]
            queue, plan = first == "/queue", first == "/plan"  # ⏭ after the turn; plan first
            text = text.split(maxsplit=1)[1] if (queue or plan) and " " in text.strip() else text
            toggled = (
                await admin.plan_first("" if text.strip() == first else text) if plan else None
            )
            if toggled is not None:  # /plan [<agent> [on|off]]: who plans first
                for page in toggled:
                    show(page)
                return
            with begin("update received"):  # each agent leaves the status line with its reply
                await app.handle_message(
                    Request(
                        text,
                        attachments=tuple(attachments),
                        receipt=receipt,
                        queue=queue,
                        plan=plan,
                    ),
                    observe(
                        Callbacks(on_status, printer.stream, print_reply, print_card, None, joined)
                    ),
                )
        finally:
            app.settle(receipt)

    try:
        show(BANNER)
        if note:
            show(note)
        for nuntius, agents in await app.notice_interruptions():
            show(interruption_notice(nuntius.seq, nuntius.text, agents))
        events = ConsoleEvents(show, present_job)
        await app.attach(events)  # notices, backups, the digest, stuck turns, jobs
        await app.start_jobs()  # after the interruptions were noted
        if stdin.isatty() and out.isatty():
            history = app.console_history_path()
            events.asking = PromptAsker(show)  # approvals at the prompt
            await run_prompt(app, history, board, send, command, show, events.asking)
        else:
            reader = await _lines(stdin)
            events.asking = ConsoleAsker(reader, show, command)  # approvals on the same input
            while raw := await reader.readline():
                text = raw.decode("utf-8", errors="replace").rstrip("\n")
                if not text.strip():
                    continue
                if is_command(text) and text.split()[0] not in ("/attach", "/queue", "/plan"):
                    await command(text)
                else:
                    await send(text)
    finally:
        await app.close()
        show(CLOSED)


class ConsoleEvents(Quiet):
    """What belongs to no request, printed: notices, a failed backup, the digest, a stuck
    turn; a scheduled job's run or the cockpit's request (🛠 Fix) printed like a request;
    approvals asked by ``asking``."""

    def __init__(
        self,
        show: Callable[[str], None],
        present: Callable[[Job | None, JobRun], Awaitable[object]],
    ) -> None:
        self.show, self.present = show, present
        self.asking: Asker | None = None

    def asker(self) -> Asker | None:
        return self.asking

    async def notice(self, text: str) -> None:  # budget warnings, plan limits, a low disk
        self.show(text)

    async def operation(self, event: Operation) -> None:
        if isinstance(event, DigestReady):
            self.show("\n".join(digest_lines(event.digest)))
        else:
            self.show(backup_failed_text(event))

    async def stuck(self, stuck: Stuck) -> None:  # a silent turn: /stop ends it
        on = f" on #{stuck.seq}" if stuck.seq else ""
        self.show(
            f"⚠️ {stuck.agent} has sent nothing for {stuck.silent_for_s / 60:.0f} min{on}: "
            f"its turn may be stuck (/stop {stuck.agent} ends it)."
        )

    async def job(self, job: Job, run: JobRun) -> bool:
        await self.present(job, run)
        return True

    async def requested(self, agent: str, run: JobRun) -> bool:
        await self.present(None, run)
        return True
