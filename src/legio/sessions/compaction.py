"""Compaction: an agent sums up its conversation so its next session can start from that.

When an agent's context passes ``max_input_tokens``, on ``/compact <name>``, and when the
model refuses a query because the context is too long, the agent is asked in its
current session for a summary (``<compaction_request>``). The summary is stored as a
compaction record in the praetorium; the next SDK session of that agent starts with
``<compaction_summary>``, then the nuntii it may see from the record's first kept seq
(the recent tail, verbatim, within the token budget), then ``<context_notice>``.
The nuntii themselves are never changed: compaction changes what the next session is
*given*, not what is kept.

This module holds the texts and the steps of one agent's compaction, run in its turn
by the ``SessionManager`` (at the ceiling, on ``/compact``, after an overflow) with what
they need passed in. Detecting an overflow is ``legio.sessions.turn``'s.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from lxml import etree

from legio.errors import AgentError, AgentInterrupted, NothingToCompact
from legio.request import Status, Watch, statuses
from legio.sessions.client import AgentSession, ask, sdk_usage, store_turns
from legio.sessions.history import (
    estimate_tokens,
    fit_to_budget,
    nuntius_share,
    shorten,
    xml_safe,
)
from legio.sessions.slot import AgentSlot, OpenSession
from legio.sessions.spec import AgentSpec
from legio.sessions.turn import notify
from legio.store.praetorium import Praetorium
from legio.store.records import Compaction

logger = logging.getLogger(__name__)

REQUEST = """\
Your conversation is being compacted. Your next session will start from the summary \
you write now, followed by the most recent messages word for word; older messages stay \
in the praetorium (get_history, search_history) but you will not have them in mind.

First, if there are facts worth keeping beyond this conversation (decisions, \
conventions, facts about Caesar's projects), save them with your memoria tools: \
your commentarii, or an actum for what every agent should know.

Then reply with the summary only, no preamble, in short paragraphs or lists:
- decisions taken, and why;
- open tasks and where each stands;
- facts about Caesar's projects and preferences;
- what you promised to do, and for whom;
- anything else you would need to carry on the work.
Do not answer anything else in this reply."""


def format_compaction_request(instructions: str | None = None) -> str:
    """The query asking an agent for its summary (with Caesar's ``/compact`` instructions)."""
    root = etree.Element("compaction_request")
    root.text = REQUEST
    if instructions and instructions.strip():
        element = etree.SubElement(root, "instructions", source="caesar")
        element.text = xml_safe(instructions.strip())
        element.tail = "\n"
    return etree.tostring(root, encoding="unicode")


def format_compaction_summary(compaction: Compaction, max_tokens: int) -> str:
    """``<compaction_summary>`` for a fresh session; a summary longer than ``max_tokens``
    keeps its head and tail around the ``OMITTED`` marker, as a long nuntius does."""
    text = shorten(compaction.summary, max_tokens, "summary")
    root = etree.Element(
        "compaction_summary",
        agent=compaction.agent,
        written=compaction.created_at.isoformat(timespec="seconds"),
        tokens_before=str(compaction.tokens_before),
    )
    root.text = xml_safe(text)
    return etree.tostring(root, encoding="unicode")


async def compact(
    praetorium: Praetorium,
    slot: AgentSlot,
    session: AgentSession,
    spec: AgentSpec,
    reason: str,
    watch: Watch | None,
    instructions: str | None = None,
) -> Compaction:
    """Ask ``session`` for its summary and store it as the agent's compaction record.

    The recent tail (the newest nuntii it may see, within half the history budget) is
    kept word for word in the next session; the record says where it starts. Raises
    ``AgentError`` if no summary comes back.
    """
    name = spec.name
    tokens_before = session.tracker.context_tokens
    if not tokens_before:  # resumed since its last turn: ask the CLI how full it is
        usage, _ = await sdk_usage(session.client, name)
        tokens_before = usage.total_tokens if usage else 0
    tail = await praetorium.get_visible_nuntii(
        name, spec.history_window, before_seq=session.last_seq + 1
    )
    share = nuntius_share(spec.history_token_budget)  # as in the next session's window
    tail, _ = fit_to_budget(tail, spec.history_token_budget // 2, share_tokens=share)
    first_kept = tail[0].seq if tail else session.last_seq + 1
    await notify(watch, Status(name, "compacting"))
    logger.info(
        "%s: compacting (%s) session %s at %s tokens",
        name,
        reason,
        session.session_id,
        f"{tokens_before:,}",
    )
    request = format_compaction_request(instructions)
    summary, _ = await ask(
        session, request, statuses(watch), record=slot.unrecorded.append, seq=None
    )
    if not summary:
        raise AgentError(name, "it answered the request for a summary with nothing")
    record = await praetorium.records.add_compaction(
        name,
        summary,
        first_kept,
        tokens_before,
        session_id=session.session_id,
        reason=reason,
        instructions=instructions or None,
    )
    slot.compaction_failure = None
    logger.info(
        "%s: compaction #%s stored: %s tokens summed up in ~%s; the next session keeps "
        "nuntii from #%s",
        name,
        record.id,
        f"{tokens_before:,}",
        f"{estimate_tokens(summary):,}",
        first_kept,
    )
    return record


async def compact_or_fall_back(
    praetorium: Praetorium,
    slot: AgentSlot,
    session: AgentSession,
    spec: AgentSpec,
    reason: str,
    watch: Watch | None,
) -> None:
    """Compact before a forced rebuild; if that fails, say so and rebuild anyway (the
    new session then starts from the last summary, if any, and the recent window)."""
    try:
        await compact(praetorium, slot, session, spec, reason, watch)
    except AgentInterrupted:
        raise
    except AgentError as e:
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        slot.compaction_failure = f"{when}: {e.reason}"
        logger.warning(
            "%s: compaction failed (%s); rebuilding from the recent history instead",
            spec.name,
            e.reason,
        )


async def session_to_compact(
    praetorium: Praetorium, slot: AgentSlot, spec: AgentSpec, open_session: OpenSession
) -> AgentSession:
    """The session ``/compact`` asks: the live one, else the saved one, resumed."""
    session = slot.session
    if session is not None and not session.broken:
        return session
    checkpoint = await praetorium.records.get_checkpoint(spec.name)
    if checkpoint is None or not checkpoint.session_id:
        raise NothingToCompact(spec.name, f"{spec.name} has no conversation to compact yet")
    await slot.close("rebuild")
    try:
        session = await open_session(checkpoint.session_id)
    except Exception as e:
        raise AgentError(spec.name, f"its session could not be resumed ({e})") from e
    session.last_seq = checkpoint.last_seq
    session.rebuild_key = checkpoint.prompt_hash or spec.rebuild_key
    slot.session = session
    return session


async def compact_now(
    praetorium: Praetorium,
    slot: AgentSlot,
    spec: AgentSpec,
    open_session: OpenSession,
    watch: Watch | None,
    instructions: str | None,
) -> Compaction:
    """``/compact``, in the agent's turn: the summary stored, the session closed (its next
    message starts anew from the summary). The conversation is unchanged on a failure."""
    try:
        slot.state = "working"
        session = await session_to_compact(praetorium, slot, spec, open_session)
        record = await compact(praetorium, slot, session, spec, "command", watch, instructions)
        await slot.close("compacted")
        await praetorium.records.clear_checkpoint(spec.name)
        return record
    finally:
        slot.state = "idle"
        await store_turns(praetorium, slot.unrecorded, spec.name)
