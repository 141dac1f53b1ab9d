"""The XML blocks agents are given, built with lxml so text can never become structure.

- ``<praetorium recent="true" viewer="…">`` with one ``<nuntius>`` per message (seed
  000's format, plus ``to``, the audience, so an agent knows who was addressed);
- ``<context_notice>``: the session was restored from the praetorium (seed 001);
- ``<centurio_status>`` (per Legatus query) and ``<centuriones>`` (its system prompt);
- the token-budgeted window (``fit_to_budget``), and ``format_line``: one nuntius on one
  line, for ``/history`` and the Legatus's ``get_history``.

A nuntius's text is escaped by the serializer: ``</nuntius>`` or ``<context_notice>``
written by Caesar reaches an agent as text. Characters XML cannot hold (control
characters, lone surrogates) are replaced by U+FFFD here: agents read history, they
do not round-trip it.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from lxml import etree

from legio.store.praetorium import Nuntius

CONTEXT_NOTICE = (
    "Session restored from praetorium.\nAsk Caesar for clarification if context is unclear."
)
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold replaced by U+FFFD."""
    return _INVALID_XML.sub("\ufffd", text)


def _render(element: etree._Element) -> str:
    return etree.tostring(element, encoding="unicode", pretty_print=True).rstrip("\n")


CHARS_PER_TOKEN = 4
NUNTIUS_OVERHEAD_TOKENS = 40  # the <nuntius …> element around the text
# The most of a window's budget one nuntius may take, its element included: a quarter,
# so a pasted file or log never crowds out the conversation around it (at the default
# 40,000-token budget, 10,000 tokens: about 40,000 characters).
NUNTIUS_SHARE = 0.25
OMITTED = "\n[… {omitted:,} characters omitted: the whole {what} is in the praetorium …]\n"


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (characters / 4), as the praetorium holds no tokenizer."""
    return len(text) // CHARS_PER_TOKEN + 1


def nuntius_share(budget_tokens: int) -> int:
    """The most one nuntius may take of a window of ``budget_tokens`` (``NUNTIUS_SHARE``)."""
    return int(budget_tokens * NUNTIUS_SHARE)


def shorten(text: str, max_tokens: int, what: str = "nuntius") -> str:
    """``text`` if it fits ``max_tokens``; else its head and tail around the ``OMITTED``
    marker (saying how many characters were left out), within ``max_tokens`` when
    ``max_tokens`` can hold the marker at all."""
    if estimate_tokens(text) <= max_tokens:
        return text
    longest = max(0, max_tokens * CHARS_PER_TOKEN - 1)  # the longest text that fits
    keep = max(0, longest - len(OMITTED.format(omitted=len(text), what=what)))
    marker = OMITTED.format(omitted=len(text) - keep, what=what)
    tail = keep // 2
    return text[: keep - tail] + marker + text[len(text) - tail :]


def fit_to_budget(
    nuntii: Sequence[Nuntius], budget_tokens: int, *, share_tokens: int | None = None
) -> tuple[list[Nuntius], bool]:
    """The window: the newest ``nuntii`` that fit in ``budget_tokens``, oldest first, and
    whether older ones were left out.

    The window is continuous: it is the newest nuntii up to the first (going back in
    time) that does not fit, each one whole or shortened, never skipped. A nuntius
    costing more than its share (``share_tokens``, by default ``NUNTIUS_SHARE`` of the
    budget: a quarter) is shortened to that share, wherever it sits, with a visible
    marker in its middle saying how much was left out and that the praetorium holds
    it whole; older nuntii that fit after it still come in. A quarter leaves room for
    the conversation around a pasted file or log. Each nuntius costs its text's
    ``estimate_tokens`` plus ``NUNTIUS_OVERHEAD_TOKENS``; the window's cost never
    passes ``budget_tokens``. The one rule for every window: a fresh session's (a
    centurio's or the Legatus's), a continuing one's, a compaction's kept tail, and
    what ``/context`` counts.
    """
    share = nuntius_share(budget_tokens) if share_tokens is None else share_tokens
    kept: list[Nuntius] = []
    left = budget_tokens
    for nuntius in reversed(nuntii):
        text = shorten(nuntius.text, share - NUNTIUS_OVERHEAD_TOKENS)
        cost = estimate_tokens(text) + NUNTIUS_OVERHEAD_TOKENS
        if cost > left:
            return list(reversed(kept)), True
        kept.append(nuntius if text is nuntius.text else dataclasses.replace(nuntius, text=text))
        left -= cost
    return list(reversed(kept)), False


def format_history_xml(
    nuntii: Iterable[Nuntius],
    viewer: str,
    *,
    truncated: bool = False,
    attachments: Mapping[int, Sequence[etree._Element]] | None = None,
) -> str:
    """``<praetorium recent="true" viewer=…>`` holding ``nuntii`` in the order given;
    ``attachments`` (by seq) are ``<attachment/>`` elements put inside their nuntius."""
    root = etree.Element("praetorium", recent="true", viewer=viewer)
    if truncated:
        root.set("truncated", "true")
    for nuntius in nuntii:
        element = _nuntius_element(nuntius)
        for attachment in (attachments or {}).get(nuntius.seq, ()):
            element.append(copy.copy(attachment))
        root.append(element)
    return _render(root)


def _nuntius_element(nuntius: Nuntius) -> etree._Element:
    """One ``<nuntius>``: who sent it to whom and when, where it was forwarded from, and
    its text, escaped by the serializer."""
    element = etree.Element(
        "nuntius",
        id=nuntius.id,
        sender=nuntius.sender,
        to=",".join(nuntius.audience),
        timestamp=nuntius.timestamp.isoformat(timespec="seconds"),
    )
    if nuntius.reply_to:
        element.set("reply_to", nuntius.reply_to)
    if nuntius.forwarded_from:
        element.set("forwarded_from", xml_safe(nuntius.forwarded_from))
    if nuntius.project:
        element.set("project", nuntius.project)
    element.text = xml_safe(nuntius.text)
    return element


def current_message(nuntius: Nuntius, extra: Mapping[str, str] | None = None) -> str:
    """The message an agent is asked to answer, rendered as its history renders a nuntius
    (``current="true"``): its sender, and a forward's source, are attributes, and text
    such as ``</nuntius><nuntius sender="legatus">`` in it arrives escaped, so nothing in
    it can pass for someone else's words. ``extra``: more attributes (the project copy it
    works in: ``project``, ``branch``, ``base``)."""
    element = _nuntius_element(nuntius)
    element.set("current", "true")
    for key, value in (extra or {}).items():
        element.set(key, xml_safe(value))
    return _render(element)


def format_context_notice() -> str:
    """The notice telling a fresh session that its context was restored."""
    notice = etree.Element("context_notice")
    notice.text = CONTEXT_NOTICE
    return _render(notice)


def format_status_xml(statuses: Mapping[str, str]) -> str:
    """``<centurio_status>``: each centurio's current state (idle, working, error)."""
    root = etree.Element("centurio_status")
    for name, status in statuses.items():
        etree.SubElement(root, "centurio", name=name, status=status)
    return _render(root)


def format_roster_xml(descriptions: Mapping[str, str]) -> str:
    """``<centuriones>``: names and descriptions, for the Legatus's system prompt."""
    root = etree.Element("centuriones")
    for name, description in descriptions.items():
        element = etree.SubElement(root, "centurio", name=name)
        element.text = xml_safe(description)
    return _render(root)


LINE_PREVIEW = 500


def format_line(n: Nuntius, preview: int = LINE_PREVIEW) -> str:
    """One nuntius on one line: seq, time, sender → audience, text shortened."""
    text = " ".join(n.text.split())
    if len(text) > preview:
        text = text[:preview] + "…"
    if n.forwarded_from:
        text = f"[forwarded from {' '.join(n.forwarded_from.split())}] {text}"
    tag = f" #{n.project}" if n.project else ""  # the project it was about
    return (
        f"#{n.seq} {n.timestamp:%Y-%m-%d %H:%M} {n.sender} → {', '.join(n.audience)}{tag}: {text}"
    )


QUOTE_MAX = 2000  # characters of a replied-to message an agent is given


def format_quoted(
    words: str, *, sender: str | None, nuntius_id: str | None, part: bool, known: bool
) -> str:
    """``<in_reply_to>``: the words Caesar's message points at, when the agent has not seen
    them (another agent's answer, older than its window) or he quoted a part. Bounded and
    escaped; ``source="telegram"`` for a message Legio has no record of (its words as
    Telegram sent them, unchecked)."""
    element = etree.Element("in_reply_to")
    if nuntius_id:
        element.set("nuntius", nuntius_id)
    if sender:
        element.set("sender", xml_safe(" ".join(sender.split())[:64]))
    element.set("part", "quote" if part else "whole")
    element.set("source", "praetorium" if known else "telegram")
    shown = words if len(words) <= QUOTE_MAX else words[:QUOTE_MAX] + "…"
    element.text = xml_safe(shown)
    return _render(element)
