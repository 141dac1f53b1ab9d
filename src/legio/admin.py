"""Admin commands, the same for every front-end: /history /status /search /stop /reset,
/compact, /context, /retry and /help.

``Admin.run(text)`` parses one command line and returns the answer as a list of pages,
each short enough for one Telegram message. Commands never wait for a busy agent:
they read the praetorium and the sessions' state, or act on a session directly.
Bad arguments get an answer that says what is expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from legio.compaction import ContextReport
from legio.errors import CastraError
from legio.history import estimate_tokens
from legio.legatus import LEGATUS, Legatus
from legio.legatus_tools import format_line
from legio.praetorium import Compaction, PraetoriumError
from legio.session import AgentError, AgentInterrupted, AgentStatus, NothingToCompact
from legio.store.attachments import Attachment

PAGE_LIMIT = 4000  # under Telegram's 4096, with room for a page marker
HISTORY_DEFAULT, HISTORY_MAX = 20, 200
SEARCH_LIMIT = 10
LINE_PREVIEW = 200
COMMAND = re.compile(r"^/([A-Za-z_]+)(?:@\w+)?(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True)
class CommandInfo:
    name: str
    usage: str
    description: str


COMMANDS = [
    CommandInfo(
        "history", "/history [n]", "the last n messages, newest first (default 20, at most 200)"
    ),
    CommandInfo("status", "/status", "each agent's state, session, context and spending"),
    CommandInfo("search", "/search <words>", 'search every message ("a phrase", OR)'),
    CommandInfo("stop", "/stop [name]", "interrupt what an agent (or every agent) is doing"),
    CommandInfo(
        "reset", "/reset <name>|all|legatus", "forget an agent's conversation; it starts afresh"
    ),
    CommandInfo(
        "compact",
        "/compact <name> [instructions]",
        "have an agent sum up its conversation; its next session starts from the summary",
    ),
    CommandInfo(
        "context", "/context [name]", "what an agent's next message carries, and why (tokens)"
    ),
    CommandInfo("retry", "/retry [n]", "run again the requests a restart interrupted (or #n)"),
    CommandInfo("help", "/help", "this list"),
]


def paginate(lines: list[str], limit: int = PAGE_LIMIT) -> list[str]:
    """Join lines into pages of at most ``limit`` characters (long lines are cut)."""
    pages: list[str] = []
    current = ""
    for line in lines:
        line = line if len(line) <= limit else line[: limit - 1] + "…"
        if current and len(current) + 1 + len(line) > limit:
            pages.append(current)
            current = line
        else:
            current = f"{current}\n{line}" if current else line
    if current:
        pages.append(current)
    return pages


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def parse_retry(args: str) -> int | str | None:
    """/retry's argument: None (all), a nuntius number, or the message for a bad one."""
    value = args.strip().lstrip("#")
    if not value:
        return None
    if value.isdigit() and len(value) <= 12:
        return int(value)
    return "Use /retry to run every interrupted request again, or /retry <number> for one."


def interruption_notice(seq: int, text: str, agents: list[str]) -> str:
    """What Caesar is told, once, about a request a restart interrupted."""
    preview = " ".join(text.split())
    preview = preview if len(preview) <= 200 else preview[:200] + "…"
    who = ", ".join(agents)
    return (
        f'⚠️ Interrupted by a restart: "{preview}" (#{seq}, no answer from {who}). '
        f"Send /retry to run it again."
    )


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _when(compaction: Compaction) -> str:
    return f"{compaction.created_at:%Y-%m-%d %H:%M} UTC"


def compaction_line(compaction: Compaction) -> str:
    """One compaction record, for /status and /context."""
    return (
        f"#{compaction.id} of {_when(compaction)} ({compaction.reason}): "
        f"{compaction.tokens_before:,} tokens of conversation summed up in "
        f"~{estimate_tokens(compaction.summary):,}; recent messages kept from "
        f"#{compaction.first_kept_seq}"
    )


def context_lines(report: ContextReport, roster_tokens: int = 0) -> list[str]:
    """/context: the breakdown of what an agent's next message carries."""
    name, plan = report.name, report.plan
    lines = [f"🧭 Context of {name}: what its next message carries"]
    if report.session == "live" and not plan.fresh:
        fill = 100 * report.context_tokens / report.max_input_tokens
        lines.append(
            f"Session: live, {_count(report.turns, 'turn', 'turns')}, "
            f"context {report.context_tokens:,} tokens "
            f"({fill:.0f}% of the {report.max_input_tokens:,} ceiling)"
        )
    elif report.session == "live":
        then = (
            "it will first sum up its conversation, then start a new session"
            if report.compacts_first
            else "the next message starts a new session"
        )
        lines.append(f"Session: live, but {report.rebuild_reason}: {then}")
    elif report.session == "resumable":
        lines.append("Session: saved; the next message resumes it (it remembers its conversation)")
    else:
        lines.append("Session: none; the next message starts a new one")
    system = f"System prompt: ~{report.system_prompt_tokens:,} tokens"
    if roster_tokens:
        system += f" (of which the centuriones roster ~{roster_tokens:,})"
    lines.append(system)
    lines.append(f"Tools: {report.tools}")
    if report.prefix_tokens:
        lines.append(f"Status block with each message: ~{report.prefix_tokens:,} tokens")
    latest = report.latest_compaction
    if plan.fresh and plan.compaction is not None:
        lines.append(
            f"Compaction summary, given first: ~{estimate_tokens(plan.summary):,} tokens, "
            + compaction_line(plan.compaction)
        )
    elif latest is not None:
        lines.append(
            "Latest compaction (a new session would start from it): " + compaction_line(latest)
        )
    else:
        lines.append("Compaction summary: none")
    if plan.nuntii:
        first, last = plan.nuntii[0].seq, plan.nuntii[-1].seq
        what = "History given" if plan.fresh else "New history since its last message"
        tokens = plan.history_tokens()
        count = _count(len(plan.nuntii), "nuntius", "nuntii")
        line = f"{what}: {count} (#{first}–#{last}), ~{tokens:,} tokens"
        if plan.truncated:
            line += "; older ones left out to fit the history budget"
        lines.append(line)
    elif plan.fresh:
        lines.append("History given: none (nothing it may see yet)")
    else:
        lines.append("New history since its last message: none")
    if plan.fresh and (plan.nuntii or plan.summary):
        lines.append("Then the <context_notice> saying the session was restored.")
    if report.sdk_usage is not None:
        usage = report.sdk_usage
        parts = " · ".join(f"{n} {t:,}" for n, t in usage.categories if t)
        lines.append(
            f"Claude's own count: {usage.total_tokens:,} of {usage.max_tokens:,} tokens "
            f"({usage.percentage:.1f}%)" + (f": {parts}" if parts else "")
        )
    elif report.sdk_usage_note:
        lines.append(f"Claude's own count: unavailable ({report.sdk_usage_note})")
    if report.compaction_failure:
        lines.append(
            f"⚠️ Last compaction failed, {report.compaction_failure}; "
            "it was rebuilt from the recent history instead."
        )
    return lines


def clip_marks(files: dict[int, list[Attachment]], seq: int) -> str:
    """`` 📎 name`` for each file of nuntius ``seq`` (for /history)."""
    return "".join(f" 📎 {a.name}" for a in files.get(seq, []))


def is_command(text: str) -> bool:
    return text.lstrip().startswith("/")


class Admin:
    """Runs admin commands against a ``Legatus``."""

    def __init__(self, legatus: Legatus) -> None:
        self.legatus = legatus

    def agents(self) -> list[str]:
        return [LEGATUS, *self.legatus.castra.roster().names]

    async def run(self, text: str) -> list[str]:
        """Answer one command line; always at least one page."""
        match = COMMAND.match(text.strip())
        if not match:
            return [f"Not a command: {text.strip()[:50]!r}. /help lists the commands."]
        name, args = match.group(1).lower(), (match.group(2) or "").strip()
        handler = getattr(self, f"cmd_{name}", None)
        if handler is None:
            return [f"Unknown command /{name}. /help lists the commands."]
        pages: list[str] = await handler(args)
        return pages

    # ---------------------------------------------------------- commands

    async def cmd_help(self, args: str) -> list[str]:
        lines = [
            "Legio: write to the Legatus, or start with @name (or @all) to ask centuriones.",
            "",
        ]
        lines += [f"{c.usage} — {c.description}" for c in COMMANDS]
        roster = self.legatus.castra.roster()
        if roster.centuriones:
            lines += ["", "Centuriones:"]
            lines += [f"@{n} — {p.description}" for n, p in roster.centuriones.items()]
        return paginate(lines)

    async def cmd_start(self, args: str) -> list[str]:
        return await self.cmd_help(args)

    async def cmd_history(self, args: str) -> list[str]:
        count = HISTORY_DEFAULT
        if args:
            if not re.fullmatch(r"\d{1,6}", args) or not 1 <= int(args) <= HISTORY_MAX:
                return [f"/history takes a number from 1 to {HISTORY_MAX}, e.g. /history 20."]
            count = int(args)
        nuntii = await self.legatus.praetorium.get_history(count)
        if not nuntii:
            return ["No messages yet."]
        files = await self.legatus.sessions.attachments.of_nuntii(n.seq for n in nuntii)
        return paginate([format_line(n, LINE_PREVIEW) + clip_marks(files, n.seq) for n in nuntii])

    async def cmd_search(self, args: str) -> list[str]:
        if not args:
            return [
                'Usage: /search <words>, e.g. /search bridge repair, or /search "exact phrase".'
            ]
        named = await self.legatus.sessions.attachments.search_names(args, SEARCH_LIMIT)
        try:
            hits = await self.legatus.praetorium.search(args, "caesar", SEARCH_LIMIT)
        except PraetoriumError as e:
            if not named:
                return [str(e)]
            hits = []
        if not hits and not named:
            return [f"Nothing matches {args!r}."]
        lines = []
        for attachment in named:  # a file name matched: its nuntius
            found = await self.legatus.praetorium.get_history(1, attachment.nuntius_seq + 1)
            for n in found:
                lines.append(
                    f"#{n.seq} {n.timestamp:%Y-%m-%d %H:%M} {n.sender} → {', '.join(n.audience)}"
                )
                lines.append(f"   📎 {attachment.name}")
        for hit in hits:
            n = hit.nuntius
            lines.append(
                f"#{n.seq} {n.timestamp:%Y-%m-%d %H:%M} {n.sender} → {', '.join(n.audience)}"
            )
            lines.append(f"   {' '.join(hit.snippet.split())}")
        return paginate(lines)

    async def cmd_status(self, args: str) -> list[str]:
        names = self.agents()
        totals = await self.legatus.praetorium.usage_totals()
        limit = self.legatus.config.max_input_tokens
        lines = []
        for status in self.legatus.sessions.status(names):
            lines.append(self._status_line(status, limit))
            if status.compaction_failure:
                lines.append(
                    f"   ⚠️ compaction failed, {status.compaction_failure}; "
                    "rebuilt from the recent history instead"
                )
            else:
                compaction = await self.legatus.praetorium.latest_compaction(status.name)
                if compaction is not None:
                    lines.append("   last compaction " + compaction_line(compaction))
            usage = totals.get(status.name)
            if usage:
                tokens_in = (
                    usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens
                )
                lines.append(
                    f"   all time: {usage.turns} turns ({usage.errors} failed), {tokens_in:,} "
                    f"tokens in, {usage.output_tokens:,} out, ${usage.cost_usd:.4f}"
                )
        problems = self.legatus.castra.roster().problems
        if problems:
            lines.append("Not usable: " + "; ".join(problems))
        return paginate(lines)

    @staticmethod
    def _status_line(status: AgentStatus, limit: int) -> str:
        icon = {"working": "⚙️", "error": "⚠️"}.get(status.state, "💤")
        line = f"{icon} {status.name}: {status.state}"
        if status.live and status.session_age_s is not None:
            fill = 100 * status.context_tokens / limit if limit else 0
            line += (
                f" · session {_duration(status.session_age_s)}, {status.turns} turns, "
                f"context {status.context_tokens:,} tokens ({fill:.0f}% of {limit:,}), "
                f"${status.cost_usd:.4f}"
            )
        else:
            line += " · no live session"
        return line

    async def cmd_reset(self, args: str) -> list[str]:
        target = args.lower()
        names = self.agents()
        if target == "all":
            done = [n for n in names if await self.legatus.sessions.reset(n)]
            return [f"Reset: {', '.join(done)}." if done else "Nothing to reset."]
        if target not in names:
            choices = ", ".join([*names, "all"])
            shown = f" {args[:40]!r}" if args else ""
            return [f"No agent named{shown}. Use /reset <name> with one of: {choices}."]
        had = await self.legatus.sessions.reset(target)
        return [
            f"Reset {target}: its next message starts a fresh session."
            if had
            else f"{target} had no session; nothing to reset."
        ]

    async def cmd_compact(self, args: str) -> list[str]:
        names = self.agents()
        name, _, instructions = args.partition(" ")
        name = name.lower()
        if name not in names:
            shown = f"No agent named {name[:40]!r}. " if name else ""
            return [
                f"{shown}Use /compact <name> [instructions], with one of: {', '.join(names)}; "
                "e.g. /compact vorenus keep the deployment checklist."
            ]
        try:
            record = await self.legatus.sessions.compact(name, instructions.strip() or None)
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
        names = self.agents()
        name = (args.split() or [LEGATUS])[0].lower()
        if name not in names:
            return [
                f"No agent named {name[:40]!r}. Use /context <name>, one of: {', '.join(names)}."
            ]
        prefix = self.legatus.status_xml() if name == LEGATUS else ""
        try:
            report = await self.legatus.sessions.context_report(name, prefix)
        except CastraError as e:
            return [f"Cannot show {name}'s context: {e}"]
        roster = estimate_tokens(self.legatus.roster_xml()) if name == LEGATUS else 0
        return paginate(context_lines(report, roster))

    async def cmd_retry(self, args: str) -> list[str]:
        """Plain-text /retry (the console's); Telegram renders the replies itself."""
        seq = parse_retry(args)
        if isinstance(seq, str):
            return [seq]
        replies = await self.legatus.retry(seq)
        return [page for reply in replies for page in paginate(reply.text.splitlines())]

    async def cmd_stop(self, args: str) -> list[str]:
        names = self.agents()
        target = args.lower()
        if target and target not in names:
            choices = ", ".join(names)
            return [f"No agent named {args[:40]!r}. Use /stop or /stop <name>, one of: {choices}."]
        stopped = [
            n for n in ([target] if target else names) if await self.legatus.sessions.interrupt(n)
        ]
        if not stopped:
            return [f"{target} is not working on anything." if target else "Nothing is running."]
        return [f"Stopping {', '.join(stopped)}."]
