"""Admin commands, the same for every front-end: /history /status /search /stop /reset,
/compact, /context, /retry, /jobs, /cancel, /publish, /issues (``forgelines``), /export,
/restart and /help.

``Admin.run(text)`` parses one command line, asks ``LegioApp`` and returns the answer as
a list of pages (rendered by ``legio.frontends.views``), each short enough for one
Telegram message. Most commands answer at once even while agents work; ``/compact``
(and, for a busy agent, ``/context``) wait for that agent's turn, so front-ends run
them without blocking the others. Bad arguments get an answer that says what is expected.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from legio.app import LegioApp, estimate_tokens
from legio.errors import (
    AgentError,
    AgentInterrupted,
    CastraError,
    LegioError,
    NothingToCompact,
    ProjectError,
    SearchQueryError,
)
from legio.frontends import forgelines, undolines
from legio.frontends.numbers import command_number
from legio.frontends.usage import usage_lines
from legio.frontends.views import (
    agent_header,
    context_lines,
    diff_lines,
    history_lines,
    paginate,
    projects_lines,
    reply_text,
    search_lines,
    status_lines,
    stop_text,
)
from legio.names import BROADCAST, LEGATUS
from legio.operations.export import FORMATS, Format

HISTORY_DEFAULT, HISTORY_MAX = 20, 200
SEARCH_LIMIT = 10
COMMAND = re.compile(r"^/([A-Za-z_]+)(?:@(\w+))?(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True)
class CommandInfo:
    """One admin command: how it is written, what it does, who runs it, whether it waits."""

    name: str
    usage: str
    description: str
    run: Callable[[Admin, str], Awaitable[list[str]]]
    waits: bool = False  # it may wait for an agent: front-ends run it beside the others


def parse_retry(args: str) -> int | str | None:
    """/retry's argument: None (all), a nuntius number, or the message for a bad one."""
    value = args.strip().lstrip("#")
    if not value:
        return None
    return command_number(
        value,
        "Use /retry to run every interrupted request again, or /retry <number> for one "
        "(a request number as /history shows it).",
    )


def command_target(text: str) -> str | None:
    """The bot a command line names (``/status@legio_bot``: ``legio_bot``), if any."""
    match = COMMAND.match(text.strip())
    return match.group(2) if match else None


EXPORT_USAGE = (
    "Use /export [md|html|json] [agent] [since 2026-11-01], e.g. /export md vorenus since "
    "2026-11-01; the default: the whole conversation, as Markdown."
)
DOCUMENT_LIMIT = 50 * 1000 * 1000  # what a bot may send as a document


def parse_export(args: str, agents: list[str]) -> tuple[Format, str | None, str | None, str]:
    """/export's words: format, agent, since (a date) and, when they are wrong, why."""
    fmt: Format = "md"
    agent = since = None
    words = args.lower().split()
    while words:
        word = words.pop(0)
        if word in FORMATS:
            fmt = word
        elif word in agents:
            agent = word
        elif word == "since" and words:
            since = words.pop(0)
        else:
            return fmt, agent, since, f"/export does not know {word[:40]!r}. {EXPORT_USAGE}"
    return fmt, agent, since, ""


class Pages(list[str]):
    """An answer's pages, and documents to send with them: (file name, content, or the
    path of a file on disk, sent from there)."""

    def __init__(
        self, pages: list[str], documents: Sequence[tuple[str, bytes | Path]] | None = None
    ) -> None:
        super().__init__(pages)
        self.documents = list(documents or [])


def is_command(text: str) -> bool:
    return text.lstrip().startswith("/")


class Admin:
    """Runs admin commands against a ``LegioApp``."""

    def __init__(self, app: LegioApp) -> None:
        self.app = app
        self.work = app.work  # the rooms its commands use (legio.doors)
        self.operations = app.operations
        self.conversation = app.conversation

    async def run(self, text: str, receipt: int | None = None) -> list[str]:
        """Answer one command line; always at least one page. ``receipt``: when it arrived
        (``LegioApp.receive``): ``/stop`` ends what was asked before it, nothing after."""
        match = COMMAND.match(text.strip())
        if not match:
            return [f"Not a command: {text.strip()[:50]!r}. /help lists the commands."]
        name, args = match.group(1).lower(), (match.group(3) or "").strip()
        command = BY_NAME.get(name)
        if command is None:
            return [f"Unknown command /{name}. /help lists the commands."]
        if name == "stop":  # a stop ends what arrived before it: it needs its receipt
            return await self.cmd_stop(args, receipt)
        return await command.run(self, args)

    # ---------------------------------------------------------- commands

    async def cmd_help(self, args: str) -> list[str]:
        lines = [
            "Legio: write to the Legatus, or start with @name (or @all) to ask centuriones.",
            "",
        ]
        lines += [f"{c.usage} — {c.description}" for c in COMMANDS]
        roster = self.app.roster()
        if roster.centuriones:
            lines += ["", "Centuriones:"]
            lines += [f"@{n} — {p.description}" for n, p in roster.centuriones.items()]
        return paginate(lines)

    async def cmd_restart(self, args: str) -> list[str]:
        """/restart: drain, then start again; with requests running, ask how first."""
        mode = args.strip().lower()
        running = self.operations.running_requests()
        if mode in ("wait", "now"):
            return [await self.app.restart("now" if mode == "now" else "wait")]
        if mode:
            return ["Use /restart, /restart wait (running requests finish first) or /restart now."]
        if not running:
            return [await self.app.restart("wait")]
        return [
            f"{running} request(s) are running. /restart wait lets them finish first (new "
            "requests are refused meanwhile); /restart now stops them and restarts at once."
        ]

    async def cmd_projects(self, args: str) -> list[str]:
        return paginate(projects_lines(await self.work.project_overview()))

    async def cmd_project(self, args: str) -> list[str]:
        return ["/project works inside a Telegram topic: write #name in a message instead."]

    async def cmd_diff(self, args: str) -> list[str]:
        usage = "/diff <agent> <project>, e.g. /diff vorenus #app"
        try:
            target = self.work.project_target(args, usage)
            report = await self.work.project_diff(target)
        except ProjectError as e:
            return [str(e)]
        if report is None:
            return [
                f"{target.agent} has no copy of #{target.project}: it gets one with its "
                f"first request there (@{target.agent} #{target.project} …)."
            ]
        name = f"{target.agent}-{target.project}.diff"
        documents = [(name, report.text.encode())] if report.text.strip() else []
        return Pages(paginate(diff_lines(report)), documents)

    async def cmd_drop(self, args: str) -> list[str]:
        usage = "/drop <agent> <project>, e.g. /drop vorenus #app"
        try:
            target = self.work.project_target(args, usage)
            dropped = await self.work.drop_copy(target)
        except ProjectError as e:
            return [str(e)]
        if dropped is None:
            return [f"{target.agent} has no copy of #{target.project}; nothing to drop."]
        lost = f" {dropped} uncommitted change(s) went with it." if dropped else ""
        return [
            f"Dropped {target.agent}'s copy of #{target.project}. Its branch stays in the "
            f"project; its next request there starts a new copy from that branch.{lost}"
        ]

    async def cmd_history(self, args: str) -> list[str]:
        count = HISTORY_DEFAULT
        if args:
            usage = f"/history takes a number from 1 to {HISTORY_MAX}, e.g. /history 20."
            parsed = command_number(args, usage, lowest=1, highest=HISTORY_MAX)
            if isinstance(parsed, str):
                return [parsed]
            count = parsed
        nuntii = await self.app.history(count)
        if not nuntii:
            return ["No messages yet."]
        files = await self.app.files_of(n.seq for n in nuntii)
        seqs = [n.seq for n in nuntii]
        edited, corrections = await self.conversation.edits_of(seqs)
        return paginate(history_lines(nuntii, files, edited, corrections))

    async def cmd_search(self, args: str) -> list[str]:
        if not args:
            return [
                'Usage: /search <words>, e.g. /search bridge repair, or /search "exact phrase".'
            ]
        named = await self.app.search_files(args, SEARCH_LIMIT)  # "report.pdf" finds its file
        try:
            hits = await self.app.search(args, SEARCH_LIMIT)
        except SearchQueryError as e:
            if not named:
                return [str(e)]
            hits = []
        if not hits and not named:
            return [f"Nothing matches {args!r}."]
        return paginate(search_lines(hits, named))

    async def cmd_status(self, args: str) -> list[str]:
        rows = await self.app.status_rows()
        limit = self.app.max_input_tokens()
        lines = status_lines(rows, limit, self.app.roster().problems)
        return paginate(lines + self.app.sandbox_notes())

    async def cmd_reset(self, args: str) -> list[str]:
        target = args.lower()
        names = self.app.agents()
        if target == BROADCAST:
            done = [n for n in names if await self.app.reset(n)]
            return [f"Reset: {', '.join(done)}." if done else "Nothing to reset."]
        if target not in names:
            choices = ", ".join([*names, "all"])
            shown = f" {args[:40]!r}" if args else ""
            return [f"No agent named{shown}. Use /reset <name> with one of: {choices}."]
        had = await self.app.reset(target)
        return [
            f"Reset {target}: its next message starts a fresh session."
            if had
            else f"{target} had no session; nothing to reset."
        ]

    async def cmd_compact(self, args: str) -> list[str]:
        names = self.app.agents()
        name, _, instructions = args.partition(" ")
        name = name.lower()
        if name not in names:
            shown = f"No agent named {name[:40]!r}. " if name else ""
            return [
                f"{shown}Use /compact <name> [instructions], with one of: {', '.join(names)}; "
                "e.g. /compact vorenus keep the deployment checklist."
            ]
        try:
            record = await self.app.compact(name, instructions.strip() or None)
        except NothingToCompact as e:
            return [f"Nothing to compact: {e.reason}."]
        except AgentInterrupted:
            return [f"Compacting {name} was interrupted; its conversation is unchanged."]
        except AgentError as e:
            return [f"Could not compact {name}: {e.reason}. Its conversation is unchanged."]
        except CastraError as e:
            return [f"Cannot compact {name}: {e}"]
        lines = [
            f"Compacted {name}: {record.tokens_before:,} tokens of conversation summed up in "
            f"~{estimate_tokens(record.summary):,}. Its next message starts a new session with "
            f"this summary and the messages from #{record.first_kept_seq} on.",
            "",
            *record.summary.splitlines(),
        ]
        return paginate(lines)

    async def cmd_context(self, args: str) -> list[str]:
        names = self.app.agents()
        name = (args.split() or [LEGATUS])[0].lower()
        if name not in names:
            return [
                f"No agent named {name[:40]!r}. Use /context <name>, one of: {', '.join(names)}."
            ]
        try:
            view = await self.app.context(name)
        except CastraError as e:
            return [f"Cannot show {name}'s context: {e}"]
        return paginate(context_lines(view.report, view.roster_tokens))

    async def cmd_retry(self, args: str) -> list[str]:
        """Plain-text /retry (the console's); Telegram renders the replies itself."""
        seq = parse_retry(args)
        if isinstance(seq, str):
            return [seq]
        replies = await self.app.retry(seq)
        return [  # who speaks: the Legatus's answer is labelled, a centurio's has its header
            page
            for reply in replies
            for page in paginate(
                (
                    f"legatus: {reply_text(reply, '')}"
                    if reply.agent == LEGATUS and reply.kind != "notice"
                    else reply_text(
                        reply, agent_header(self.app, reply.agent, reply.project, reply.model)
                    )
                ).splitlines()
            )
        ]

    async def cmd_stop(self, args: str, receipt: int | None = None) -> list[str]:
        names = self.app.agents()
        target = args.lower()
        if target and target not in names:
            choices = ", ".join(names)
            return [f"No agent named {args[:40]!r}. Use /stop or /stop <name>, one of: {choices}."]
        stopped = await self.app.stop([target] if target else names, receipt)
        return [stop_text(stopped, target or None)]

    # ---------------------------------------------------------- scheduled jobs

    async def cmd_jobs(self, args: str) -> list[str]:
        lines = await self.app.job_lines()
        return paginate(lines) if lines else ["No job is scheduled. Ask the Legatus to set one."]

    async def cmd_cancel(self, args: str) -> list[str]:
        usage = "Use /cancel <n> with a job number from /jobs, e.g. /cancel 3."
        number = command_number(args.strip().lstrip("#"), usage)
        if isinstance(number, str):
            return [number]
        job = await self.app.cancel_job(number)
        if job is None:
            return [f"No scheduled job #{number}; /jobs lists them."]
        return [f'Cancelled job #{job.id} "{job.name}".']

    # ---------------------------------------------------------- approvals and spending

    async def cmd_approvals(self, args: str) -> list[str]:
        grants = await self.app.approval_grants()
        rules = ", ".join(self.app.ask_rules()) or "none"
        lines = [f"Calls that ask first, for every agent ([approvals] ask): {rules}."]
        lines += [
            f"…and for {name} (its own ask:): {', '.join(own)}."
            for name, own in self.app.own_ask_rules().items()
        ]
        if not grants:
            return paginate([*lines, "No Always grants."])
        lines.append("Always granted (/revoke <id> ends one):")
        lines += [f"#{g.id} {g.agent}: {g.rule} (since {g.created_at:%Y-%m-%d})" for g in grants]
        return paginate(lines)

    async def cmd_revoke(self, args: str) -> list[str]:
        usage = "Use /revoke <id>, with an id from /approvals."
        number = command_number(args.strip().lstrip("#"), usage)
        if isinstance(number, str):
            return [number]
        grant = await self.app.revoke_grant(number)
        if grant is None:
            return [f"No Always grant #{number}; /approvals lists them."]
        return [f"Revoked #{grant.id}: {grant.agent} asks again before {grant.rule}."]

    async def cmd_export(self, args: str) -> list[str]:
        fmt, agent, since, problem = parse_export(args, self.app.agents())
        if problem:
            return [problem]
        try:
            result = await self.operations.export(fmt, agent, since)
        except LegioError as e:
            return [f"Could not export: {e}"]
        size = f"{result.size / 1e6:.1f} MB"
        if result.size > DOCUMENT_LIMIT:
            return [
                f"The export of {result.nuntii:,} messages is {size}, over the 50 MB a bot may "
                f"send: it is on the server at {result.path}. Narrow it (since <date>, an "
                "agent), or run `legio export` there."
            ]
        words = f"Exported {result.nuntii:,} messages ({size})."
        return Pages([words], [(result.path.name, result.path)])

    async def cmd_model(self, args: str) -> list[str]:
        return [await self.operations.choose("model", args)]

    async def cmd_effort(self, args: str) -> list[str]:
        return [await self.operations.choose("effort", args)]

    async def plan_first(self, args: str) -> list[str] | None:
        """``/plan [<agent> [on|off]]``'s answer; None: ``args`` is a request to plan."""
        answer = await self.operations.plan_first(args)
        return [answer] if answer is not None else None

    async def cmd_usage(self, args: str) -> list[str]:
        report = await self.app.usage()
        if report is None:
            return ["No usage records."]
        return paginate(usage_lines(report, self.app.plan_lines()))


# Every admin command, in the order /help and the menu list them; one place.
COMMANDS = [
    CommandInfo(
        "history",
        "/history [n]",
        "the last n messages, newest first (default 20, at most 200)",
        Admin.cmd_history,
    ),
    CommandInfo(
        "status", "/status", "each agent's state, session, context and spending", Admin.cmd_status
    ),
    CommandInfo(
        "search", "/search <words>", 'search every message ("a phrase", OR)', Admin.cmd_search
    ),
    CommandInfo(
        "stop",
        "/stop [name]",
        "end what an agent (or every agent) was asked: running and queued",
        Admin.cmd_stop,
    ),
    CommandInfo(
        "reset",
        "/reset <name>|all|legatus",
        "forget an agent's conversation; it starts afresh",
        Admin.cmd_reset,
    ),
    CommandInfo(
        "compact",
        "/compact <name> [instructions]",
        "have an agent sum up its conversation; its next session starts from the summary",
        Admin.cmd_compact,
        waits=True,
    ),
    CommandInfo(
        "context",
        "/context [name]",
        "what an agent's next message carries, and why (tokens)",
        Admin.cmd_context,
        waits=True,
    ),
    CommandInfo(
        "approvals",
        "/approvals",
        "the rules an agent may use without asking (Always)",
        Admin.cmd_approvals,
    ),
    CommandInfo(
        "revoke", "/revoke <id>", "end an Always grant: that agent asks again", Admin.cmd_revoke
    ),
    CommandInfo(
        "model",
        "/model <name> opus|sonnet|haiku|default",
        "the model an agent's session runs on (@name:opus for one request)",
        Admin.cmd_model,
    ),
    CommandInfo(
        "effort",
        "/effort <name> low|medium|high|default",
        "how hard an agent's session thinks",
        Admin.cmd_effort,
    ),
    CommandInfo(
        "usage", "/usage", "spending today and over 7 days, per agent and model", Admin.cmd_usage
    ),
    CommandInfo(
        "retry",
        "/retry [n]",
        "run again the requests a restart interrupted (or #n)",
        Admin.cmd_retry,
        waits=True,
    ),
    CommandInfo("jobs", "/jobs", "scheduled jobs, with their next run", Admin.cmd_jobs),
    CommandInfo("cancel", "/cancel <n>", "cancel scheduled job #n", Admin.cmd_cancel),
    CommandInfo(
        "projects",
        "/projects",
        "each project, and each agent's branch and copy of it",
        Admin.cmd_projects,
        waits=True,
    ),
    CommandInfo(
        "project",
        "/project <name>|off",
        "in a topic: every request there is on that project",
        Admin.cmd_project,
    ),
    CommandInfo(
        "diff",
        "/diff <agent> <project>",
        "an agent's work on a project: summary and .diff file",
        Admin.cmd_diff,
        waits=True,
    ),
    CommandInfo(
        "drop",
        "/drop <agent> <project>",
        "remove an agent's copy (its branch stays in the project)",
        Admin.cmd_drop,
        waits=True,
    ),
    CommandInfo(
        "undo",
        "/undo [card]",
        "what ↩️ Undo kept (14 days); /undo <card> brings that turn's work back",
        undolines.cmd_undo,
        waits=True,
    ),
    CommandInfo(
        "publish",
        "/publish <agent> <project>",
        "show what would be posted, then push an agent's branch and open (or update) its "
        "pull request",
        forgelines.cmd_publish,
        waits=True,
    ),
    CommandInfo(
        "issues",
        "/issues #project",
        "a project's open issues on the forge",
        forgelines.cmd_issues,
        waits=True,  # the forge may be slow or rate-limited: never hold the other updates
    ),
    CommandInfo(
        "export",
        "/export [md|html|json] [agent] [since date]",
        "the conversation as a file (Markdown, HTML or JSON Lines)",
        Admin.cmd_export,
        waits=True,
    ),
    CommandInfo(
        "restart",
        "/restart [wait|now]",
        "start Legio again in place (an upgrade): running requests finish, or stop with now",
        Admin.cmd_restart,
    ),
    CommandInfo(
        "queue",
        "/queue [@name] <message>",
        "a request for after the agent's running turn (else a message joins that turn ➕)",
        Admin.cmd_help,  # the front-ends take it as a request
        waits=True,
    ),
    CommandInfo(
        "plan",
        "/plan [@name] <message> · /plan <name> on|off",
        "a request the agent plans first: you get its plan with ✅ Go, ✏️ Change, ✖ Drop "
        "(on: every request to that agent)",
        Admin.cmd_help,  # the front-ends take it as a request
        waits=True,
    ),
    CommandInfo("help", "/help", "this list", Admin.cmd_help),
]
BY_NAME = {c.name: c for c in COMMANDS}
BY_NAME["start"] = CommandInfo("start", "/start", "this list", Admin.cmd_help)  # Telegram's first
