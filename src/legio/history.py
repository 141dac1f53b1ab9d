"""The XML blocks agents are given, built with lxml so text can never become structure.

- ``<praetorium recent="true" viewer="…">`` with one ``<nuntius>`` per message (seed
  000's format, plus ``to``, the audience, so an agent knows who was addressed);
- ``<context_notice>``: the session was restored from the praetorium (seed 001);
- ``<centurio_status>`` (per Legatus query) and ``<centuriones>`` (its system prompt).

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

from legio.praetorium import Nuntius

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
SHORTENED = (
    "\n[… shortened for this context: {total:,} characters in all; "
    "/history and get_history show it whole]"
)


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (characters / 4), as the praetorium holds no tokenizer."""
    return len(text) // CHARS_PER_TOKEN + 1


def fit_to_budget(nuntii: Sequence[Nuntius], budget_tokens: int) -> tuple[list[Nuntius], bool]:
    """The newest ``nuntii`` that fit in ``budget_tokens`` (oldest first), and whether any
    were left out. A nuntius too long for the room left is shortened with a visible
    marker rather than dropped, if it is the newest; older ones that do not fit are left out."""
    kept: list[Nuntius] = []
    left = budget_tokens
    for nuntius in reversed(nuntii):
        cost = estimate_tokens(nuntius.text) + NUNTIUS_OVERHEAD_TOKENS
        if cost <= left:
            kept.append(nuntius)
            left -= cost
            continue
        if not kept and left > NUNTIUS_OVERHEAD_TOKENS * 2:
            marker = SHORTENED.format(total=len(nuntius.text))
            room = (left - NUNTIUS_OVERHEAD_TOKENS) * CHARS_PER_TOKEN - len(marker)
            kept.append(dataclasses.replace(nuntius, text=nuntius.text[: max(0, room)] + marker))
        return list(reversed(kept)), True
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
        element = etree.SubElement(
            root,
            "nuntius",
            id=nuntius.id,
            sender=nuntius.sender,
            to=",".join(nuntius.audience),
            timestamp=nuntius.timestamp.isoformat(timespec="seconds"),
        )
        if nuntius.reply_to:
            element.set("reply_to", nuntius.reply_to)
        element.text = xml_safe(nuntius.text)
        for attachment in (attachments or {}).get(nuntius.seq, ()):
            element.append(copy.copy(attachment))
    return _render(root)


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
