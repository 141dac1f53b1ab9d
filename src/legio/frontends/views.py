"""Pure text rendering of admin answers: pages, durations, status, context, history lines.

Nothing here touches the engine: every function turns values ``legio.app`` hands out
into lines of text for a person, so each is testable on its own. Pages stay under
Telegram's 4096-character limit.
"""

from __future__ import annotations

from legio.app import (
    AgentStatus,
    Attachment,
    CheckRecord,
    Compaction,
    ContextReport,
    LegioApp,
    Nuntius,
    SearchHit,
    StatusRow,
    Stopped,
    estimate_tokens,
    format_line,
)
from legio.frontends.checkviews import check_on, check_part
from legio.names import LEGATUS
from legio.projects.branchwork import FileChange
from legio.projects.checkwords import check_badge
from legio.projects.overview import CopyState, DiffReport, ProjectState
from legio.request import Reply, WorkCard
from legio.visible import visible_name

PAGE_LIMIT = 4000  # under Telegram's 4096, with room for a page marker
LINE_PREVIEW = 200


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


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


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
        lines.append("Then a notice saying the session was restored from Legio's records.")
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


def status_line(status: AgentStatus, limit: int) -> str:
    """One agent's line in /status."""
    icon = {"working": "⚙️", "error": "⚠️"}.get(status.state, "💤")
    line = f"{icon} {status.name}: {status.state}"
    if status.live and status.session_age_s is not None:
        fill = 100 * status.context_tokens / limit if limit else 0
        line += (
            f" · session {duration(status.session_age_s)}, "
            f"{_count(status.turns, 'turn', 'turns')}, "
            f"context {status.context_tokens:,} tokens ({fill:.0f}% of {limit:,}), "
            f"${status.cost_usd:.4f}"
        )
    else:
        line += " · no live session"
    return line


def status_lines(rows: list[StatusRow], limit: int, problems: tuple[str, ...]) -> list[str]:
    """/status: each agent's state, session, latest summary and usage."""
    lines = []
    for row in rows:
        status, usage = row.status, row.usage
        lines.append(status_line(status, limit))
        if row.model:  # /model, /effort
            lines.append(f"   model: {row.model}")
        if row.plan_first:  # /plan <name> on
            lines.append(f"   📋 plan first (/plan {status.name} off ends it)")
        if status.compaction_failure:
            lines.append(
                f"   ⚠️ compaction failed, {status.compaction_failure}; "
                "rebuilt from the recent history instead"
            )
        elif row.compaction is not None:
            lines.append("   last compaction " + compaction_line(row.compaction))
        if usage:
            tokens_in = usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens
            lines.append(
                f"   all time: {_count(usage.turns, 'turn', 'turns')} ({usage.errors} failed), "
                f"{tokens_in:,} "
                f"tokens in, {usage.output_tokens:,} out, ${usage.cost_usd:.4f}"
            )
    if problems:
        lines.append("Not usable: " + "; ".join(problems))
    return lines


def clip_marks(files: dict[int, list[Attachment]], seq: int) -> str:
    """`` 📎 name`` for each file of nuntius ``seq``."""
    return "".join(f" 📎 {a.name}" for a in files.get(seq, []))


def history_lines(
    nuntii: list[Nuntius],
    files: dict[int, list[Attachment]] | None = None,
    edited: dict[int, str] | None = None,
    corrections: dict[int, int] | None = None,
) -> list[str]:
    """/history: one line per nuntius, newest first, its files marked 📎, an edit's first
    words and a correction's request shown."""
    lines = []
    for n in nuntii:
        line = format_line(n, LINE_PREVIEW) + clip_marks(files or {}, n.seq)
        if n.seq in (edited or {}):
            first = " ".join((edited or {})[n.seq].split())
            line += f" (edited; it first said: {first[:200]})"
        if n.seq in (corrections or {}):
            line += f" (a correction of #{(corrections or {})[n.seq]})"
        lines.append(line)
    return lines


def _header(n: Nuntius) -> str:
    tag = f" #{n.project}" if n.project else ""
    return f"#{n.seq} {n.timestamp:%Y-%m-%d %H:%M} {n.sender} → {', '.join(n.audience)}{tag}"


def search_lines(
    hits: list[SearchHit], named: list[tuple[Nuntius, Attachment]] | None = None
) -> list[str]:
    """/search: nuntii whose file names match (📎 name), then each hit and its snippet."""
    lines = []
    for n, attachment in named or []:
        lines += [_header(n), f"   📎 {attachment.name}"]
    for hit in hits:
        lines += [_header(hit.nuntius), f"   {' '.join(hit.snippet.split())}"]
    return lines


# ---------------------------------------------------------------- projects


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def elsewhere_line(head: str, branch: str) -> str:
    """Where the copy's HEAD is, when it is not on the agent's branch."""
    where = f"on {visible_name(head)}" if head else "on no branch (a detached HEAD)"
    return (
        f"⚠️ The copy is {where}, not {visible_name(branch)}: its files are not what you "
        "would merge; this shows the branch."
    )


def diff_lines(report: DiffReport) -> list[str]:
    """``/diff``'s summary: the agent's branch in the project (what a merge would bring),
    where the copy is, what is not committed or not published. Every name an agent chose
    (branch, subject, author, file) is shown with its hidden characters made visible."""
    place, work = report.place, report.work
    branch, base = visible_name(place.branch), visible_name(place.base)
    lines = []
    if work is None:
        lines.append(
            f"{place.agent} on #{place.project}: branch {branch} is not in the project "
            f"(no commits on it yet, or never published)"
        )
    else:
        lines.append(
            f"{place.agent} on #{place.project}: branch {branch}, "
            f"{_plural(work.ahead, 'commit')} ahead of {base}"
            + (f", {work.behind} behind (the base moved on)" if work.behind else "")
        )
    if place.elsewhere:
        lines.append(elsewhere_line(place.head, place.branch))
    if report.unpublished:
        lines.append(f"⚠️ Not published: {visible_name(report.unpublished)}")
    if work is not None:
        lines.append(f"Tip {work.tip}: merge it by id (git merge {work.tip[:12]}…), not by name")
        if work.conflicts:
            lines.append(
                f"⚠️ Merging it into {base} conflicts: the files and diff below are the "
                "branch against its merge base, not what a merge would leave"
            )
        if work.merge_bases > 1:
            lines.append(
                f"⚠️ It has {work.merge_bases} merge bases with {base} (a merge of the base's "
                "own history): the diff is what merging brings, not its merge-base diff"
            )
        lines.append(
            f"{_plural(work.file_count, 'file')} changed, +{work.added} −{work.removed} "
            + (
                "(against its merge base)"
                if work.conflicts
                else f"(what merging {branch} would bring)"
            )
        )
        lines += [
            f"  {c.short} {visible_name(c.subject)} — {visible_name(c.author)}"
            for c in work.commits
        ]
        if work.ahead > len(work.commits):
            lines.append(f"  … and {work.ahead - len(work.commits)} earlier")
        lines += [f"  {_file(f)}" for f in work.files[:10]]
        if work.file_count > 10:
            lines.append(f"  … and {work.file_count - 10} more files")
        if work.cut:
            lines.append("The diff was cut at 20 MB.")
    copy = report.copy
    if copy.problem:
        lines.append(f"⚠️ The copy could not be read: {visible_name(copy.problem)}")
    elif copy.count:
        shown = ", ".join(visible_name(entry) for entry in copy.uncommitted[:10])
        more = f" and {copy.count - 10} more" if copy.count > 10 else ""
        lines.append(
            f"Not committed in the copy (not on the branch, not in the diff): {shown}{more}"
        )
    if work is not None and work.ahead and not work.file_count:
        lines.append(f"Its {_plural(work.ahead, 'commit')} change no file in the end.")
    elif (work is None or not work.ahead) and not copy.count and not report.unpublished:
        lines.append(f"Nothing to show: {branch} has no commit that {base} does not have.")
    return lines


def _file(change: FileChange) -> str:
    if change.gitlink:
        now = change.submodule or "removed"
        return f"submodule {visible_name(change.path)} → {now}"
    lines = (
        "binary or over 8 MB (no line diff)"
        if change.added < 0
        else f"+{change.added} −{change.removed}"
    )
    return f"{visible_name(change.path)} {lines}"


def projects_lines(states: list[ProjectState]) -> list[str]:
    """``/projects``: each project, and each agent's copy of it."""
    if not states:
        return [
            'No projects yet: add [projects.<name>] with path = "/path/to/repo" to '
            "legio.toml and restart Legio (docs/projects.md)."
        ]
    lines: list[str] = []
    for state in states:
        base = visible_name(state.base or "?")
        lines.append(f"#{state.name} — {visible_name(str(state.path))} (base {base})")
        if state.problem:
            lines.append(f"  ⚠️ {visible_name(state.problem)}")
            continue
        if not state.copies:
            lines.append("  no agent has worked on it yet")
        for copy in state.copies:
            lines.append(f"  {copy.agent}: " + copy_line(copy, checked=state.check is not None))
    return lines


def copy_line(copy: CopyState, *, checked: bool = False) -> str:
    """One agent's branch in ``/projects``: the branch in the project, ahead and behind,
    what the copy holds apart, where its HEAD is, why it is not published, and (when the
    project has a check, ``checked``) its last check."""
    if copy.problem and not copy.branch:
        return f"⚠️ {visible_name(copy.problem)}"
    parts = [visible_name(copy.branch)]
    if copy.published:
        parts.append(f"{copy.ahead} ahead")
    else:
        parts.append("not in the project yet")
    if copy.behind:
        parts.append(f"{copy.behind} behind")
    if copy.uncommitted:
        parts.append(f"{copy.uncommitted} uncommitted")
    if copy.last:
        parts.append(f"last: {visible_name(copy.last)}")
    if copy.head != copy.branch:
        where = visible_name(copy.head) if copy.head else "no branch (detached)"
        parts.append(f"⚠️ the copy is on {where}, not {visible_name(copy.branch)}")
    for other, ahead in copy.others:
        parts.append(f"also in the project: {visible_name(other)}, {ahead} ahead")
    if copy.unpublished:
        parts.append(f"⚠️ not published: {visible_name(copy.unpublished)}")
    if copy.problem:
        parts.append(f"⚠️ {visible_name(copy.problem)}")
    if checked:
        parts.append(check_part(copy.check))
    return ", ".join(parts)


def stop_text(stopped: list[Stopped], target: str | None = None) -> str:
    """What a stop ended: the turns interrupted, the queued requests dropped, or nothing."""
    if not stopped:
        return f"{target} is not working on anything." if target else "Nothing is running."
    parts = []
    for each in stopped:
        plural = "" if each.queued == 1 else "s"
        dropped = f" ({each.queued} queued request{plural} dropped)" if each.queued else ""
        parts.append(each.agent + dropped)
    return f"Stopping {', '.join(parts)}."


RULE = "━━━━━━━━━━━━"


def agent_header(
    app: LegioApp, agent: str, project: str | None = None, model: str | None = None
) -> str:
    """The attribution line a centurio's answer (and its live draft) starts with, on
    ``project``, written by ``model``: ``⚔️ vorenus #app · opus — <description>`` and a
    rule; none for the Legatus."""
    if agent == LEGATUS:
        return ""
    description = app.description(agent)
    tag = (f" #{project}" if project else "") + (f" · {model}" if model else "")
    return f"⚔️ {agent}{tag}{f' — {description}' if description else ''}\n{RULE}\n"


def card_text(card: WorkCard, check: CheckRecord | None = None) -> str:
    """A work card: ``🗂 vorenus #app · legio/vorenus/main`` (`` · opus``: the model its turn
    ran on, when known) then what the turn changed
    (``2 new commits · 4 files +120 −30``) and its check (``check``: its run as it is now;
    none given while a run is named: ``⏳ running``)."""
    changed = []
    if card.commits:
        changed.append(_plural(card.commits, "new commit"))
    if card.files:
        changed.append(f"{_plural(card.files, 'file')} +{card.added} −{card.removed}")
    if card.uncommitted:
        changed.append(f"{card.uncommitted} not committed")
    if not changed:
        changed.append("no new commit")
    if check is not None:
        changed.append(f"{check_badge(check)} {check_on(check)}")
    elif card.check_id is not None:
        changed.append("⏳ running")
    model = f" · {card.model}" if card.model else ""
    planned = f"\n📋 after the plan you agreed to (#{card.plan_seq})" if card.plan_seq else ""
    return (
        f"🗂 {card.agent} #{card.project} · {card.branch}{model}\n" + " · ".join(changed) + planned
    )


def reply_text(reply: Reply, header: str) -> str:
    """What Caesar reads of a reply: a scheduled job's ⏰ mark, the agent's ``header``
    (``LegioApp.header``: none for the Legatus; none on a request held before it started,
    which is Legio's word, not the agent's), then its words."""
    mark = f"⏰ {reply.job}\n" if reply.job else ""
    return mark + ("" if reply.kind == "held" else header) + reply.text
