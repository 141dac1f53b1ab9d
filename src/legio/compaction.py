"""Compaction: an agent sums up its conversation so its next session can start from that.

When an agent's context passes ``max_input_tokens``, on ``/compact <name>``, and when the
model refuses a query because the context is too long, the agent is asked in its
current session for a summary (``<compaction_request>``). The summary is stored as a
compaction record in the praetorium; the next SDK session of that agent starts with
``<compaction_summary>``, then the nuntii it may see from the record's first kept seq
(the recent tail, verbatim, within the token budget), then ``<context_notice>``.
The nuntii themselves are never changed: compaction changes what the next session is
*given*, not what is kept.

This module holds the texts and the detection of a context overflow; the
``SessionManager`` runs the steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from legio.history import (
    CHARS_PER_TOKEN,
    SHORTENED,
    estimate_tokens,
    format_context_notice,
    format_history_xml,
    xml_safe,
)
from legio.praetorium import Compaction, Nuntius

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

# What the Claude CLI says when the model refuses a prompt for its size. CLI 2.1.330
# (after trying its own compaction) ends the turn with subtype "success", is_error true,
# result "Prompt is too long" and terminal_reason "prompt_too_long"; other versions
# have been seen to leave is_error false, or to pass the API's message on.
_OVERFLOW = re.compile(
    r"prompt is too long|prompt_too_long|context[ _-](?:window|length)[ _-]exceeded"
    r"|exceeds? the (?:model'?s? )?(?:maximum )?context",
    re.IGNORECASE,
)
_OVERFLOW_ANSWER_MAX = 300


def is_context_overflow(text: str | None, *, is_error: bool) -> bool:
    """Whether a turn's result says the context was too long for the model.

    An error result is an overflow when it says so anywhere; a non-error result only
    when its whole (short) text is that message, so an agent *talking about* long
    prompts is never taken for one.
    """
    if not text:
        return False
    if is_error:
        return _OVERFLOW.search(text) is not None
    stripped = text.strip()
    return len(stripped) <= _OVERFLOW_ANSWER_MAX and stripped.lower().startswith(
        "prompt is too long"
    )


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
    """``<compaction_summary>`` for a fresh session, shortened to ``max_tokens`` if needed."""
    text = compaction.summary
    if estimate_tokens(text) > max_tokens:
        marker = SHORTENED.format(total=len(text))
        text = text[: max(0, max_tokens * CHARS_PER_TOKEN - len(marker))] + marker
    root = etree.Element(
        "compaction_summary",
        agent=compaction.agent,
        written=compaction.created_at.isoformat(timespec="seconds"),
        tokens_before=str(compaction.tokens_before),
    )
    root.text = xml_safe(text)
    return etree.tostring(root, encoding="unicode")


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
class ContextUsage:
    """The SDK's own account of a live session's context (``get_context_usage``)."""

    total_tokens: int
    max_tokens: int
    percentage: float
    categories: list[tuple[str, int]]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> ContextUsage | None:
        """From the CLI's answer; None if it holds no totals."""
        try:
            total = int(raw["totalTokens"])
            most = int(raw.get("maxTokens") or 0)
        except (KeyError, TypeError, ValueError):
            return None
        categories = []
        for category in raw.get("categories") or []:
            if not isinstance(category, dict) or not isinstance(category.get("name"), str):
                continue
            if category["name"].lower() != "free space":
                try:
                    categories.append((category["name"], int(category.get("tokens") or 0)))
                except (TypeError, ValueError):
                    continue
        percentage = raw.get("percentage")
        if not isinstance(percentage, int | float):
            percentage = 100 * total / most if most else 0.0
        return cls(total, most, float(percentage), categories)


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
