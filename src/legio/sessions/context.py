"""Window planning: what an agent's next query carries before its text, and ``/context``.

``plan_context`` is the one place that decides it; the query and the ``/context``
report both use it, so the report cannot drift from what is sent:

- a **fresh** SDK session: the agent's ``<compaction_summary>`` if it has one, then the
  nuntii it may see (from the summary's first kept seq, else the last
  ``history_window``), within ``history_token_budget``, then ``<context_notice>``;
- a **continuing** session: only the nuntii it may see with a seq between its
  checkpoint and the message, minus what it already has (``unseen``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lxml import etree

from legio.sessions.client import ContextUsage, sdk_usage
from legio.sessions.compaction import format_compaction_summary
from legio.sessions.delivery import window_elements
from legio.sessions.history import (
    estimate_tokens,
    fit_to_budget,
    format_context_notice,
    format_history_xml,
    nuntius_share,
)
from legio.sessions.slot import AgentSlot
from legio.sessions.spec import AgentSpec
from legio.store.attachments import AttachmentStore
from legio.store.praetorium import Nuntius, Praetorium
from legio.store.records import Compaction

TAIL_ROWS_MAX = 1000  # nuntii read after a compaction's first kept seq (then the token budget)


@dataclass(frozen=True)
class ContextPlan:
    """What an agent's next query carries before the message itself."""

    viewer: str
    fresh: bool
    compaction: Compaction | None = None
    summary: str = ""
    nuntii: list[Nuntius] = field(default_factory=list)
    truncated: bool = False
    attachments: dict[int, list[etree._Element]] = field(default_factory=dict)  # by seq

    def history(self) -> str:
        return format_history_xml(
            self.nuntii, self.viewer, truncated=self.truncated, attachments=self.attachments
        )

    def text(self) -> str:
        """The blocks, joined: summary, history, and the notice when the session is new."""
        blocks = [self.summary] if self.summary else []
        if self.nuntii:
            blocks.append(self.history())
        if self.fresh and blocks:
            blocks.append(format_context_notice())
        return "\n\n".join(blocks)

    def history_tokens(self) -> int:
        return estimate_tokens(self.history()) if self.nuntii else 0


@dataclass(frozen=True)
class ContextReport:
    """``/context``: what an agent's next query would contain, and why."""

    name: str
    session: str  # "live", "resumable" or "new"
    rebuild_reason: str | None
    compacts_first: bool  # the next message first asks for a summary (the token ceiling)
    system_prompt_tokens: int
    prefix_tokens: int
    tools: int
    plan: ContextPlan
    latest_compaction: Compaction | None
    context_tokens: int
    turns: int
    max_input_tokens: int
    sdk_usage: ContextUsage | None
    sdk_usage_note: str | None
    compaction_failure: str | None


def unseen(nuntii: list[Nuntius], viewer: str) -> list[Nuntius]:
    """Drop what a continuing session already has: its own nuntii, and answers to its own
    requests addressed to it alone (the Legatus got those as ``dispatch`` tool results)."""
    own = {n.id for n in nuntii if n.sender == viewer}
    return [
        n
        for n in nuntii
        if n.sender != viewer and not (n.reply_to in own and n.audience == (viewer,))
    ]


async def plan_context(
    praetorium: Praetorium, spec: AgentSpec, *, fresh: bool, last_seq: int, before_seq: int
) -> ContextPlan:
    """What a query before nuntius ``before_seq`` carries ahead of its text.

    A fresh session: the agent's compaction summary, if it has one, then the nuntii it
    may see from the summary's first kept seq on (else the newest ``history_window``),
    within the token budget (the newest win). A continuing one: what it has not been
    given since ``last_seq``, minus its own answers.
    """
    name, window, budget = spec.name, spec.history_window, spec.history_token_budget
    compaction: Compaction | None = None
    summary = ""
    if fresh:
        compaction = await praetorium.records.latest_compaction(name)
        after, limit = None, window
        if compaction is not None:  # everything since the kept tail, within the budget
            summary = format_compaction_summary(compaction, budget // 2)
            budget = max(budget - estimate_tokens(summary), budget // 2)
            after, limit = compaction.first_kept_seq - 1, max(window, TAIL_ROWS_MAX)
        nuntii = await praetorium.get_visible_nuntii(
            name, limit, after_seq=after, before_seq=before_seq
        )
        truncated = False
    else:
        nuntii = await praetorium.get_visible_nuntii(
            name, window + 1, after_seq=last_seq, before_seq=before_seq
        )
        truncated = len(nuntii) > window
        nuntii = unseen(nuntii[-window:], name)
    share = nuntius_share(spec.history_token_budget)  # as in the compaction's tail
    nuntii, cut = fit_to_budget(nuntii, budget, share_tokens=share)
    files = await AttachmentStore(praetorium).of_nuntii(n.seq for n in nuntii)
    elements = window_elements(files, spec.workspace, name)  # the files as elements, no bytes
    return ContextPlan(name, fresh, compaction, summary, nuntii, truncated or cut, elements)


async def context_report(
    praetorium: Praetorium, spec: AgentSpec, slot: AgentSlot, prefix: str, max_input_tokens: int
) -> ContextReport:
    """``/context``: what agent ``spec.name``'s next query would carry (nothing is sent).

    ``prefix`` is what the caller adds to each query (the Legatus's status block).
    """
    name, session = spec.name, slot.session
    rebuild = session.rebuild_reason(spec) if session is not None else None
    if session is not None and (rebuild is None or session.broken):
        state, fresh, last_seq = "live", False, session.last_seq
    else:
        checkpoint = await praetorium.records.get_checkpoint(name)
        resumable = (
            session is None
            and checkpoint is not None
            and bool(checkpoint.session_id)
            and checkpoint.prompt_hash == spec.rebuild_key
        )
        last_seq = checkpoint.last_seq if checkpoint and resumable else 0
        state = "live" if session is not None else ("resumable" if resumable else "new")
        fresh = not resumable
    before = await praetorium.last_seq() + 1
    plan = await plan_context(praetorium, spec, fresh=fresh, last_seq=last_seq, before_seq=before)
    usage, note = None, None
    if session is not None and slot.state == "working":
        note = "it is working; the CLI answers after this turn"
    elif session is not None:
        usage, note = await sdk_usage(session.client, name)
    servers = spec.servers()
    return ContextReport(
        name=name,
        session=state,
        rebuild_reason=rebuild,
        compacts_first=session is not None and session.compacts_first(),
        system_prompt_tokens=estimate_tokens(spec.system_prompt),
        prefix_tokens=estimate_tokens(prefix) if prefix else 0,
        tools=sum(len(tools) for _, tools in servers.values()) + len(spec.tools),
        plan=plan,
        latest_compaction=(
            plan.compaction if plan.fresh else await praetorium.records.latest_compaction(name)
        ),
        context_tokens=session.tracker.context_tokens if session else 0,
        turns=session.tracker.turns if session else 0,
        max_input_tokens=max_input_tokens,
        sdk_usage=usage,
        sdk_usage_note=note,
        compaction_failure=slot.compaction_failure,
    )
