"""What the current message points at, for the agent answering it: the nuntius it replies
to (``in_reply_to``) or corrects (``edit_of``) as attributes of its ``<nuntius>``, and the
words it points at (``<in_reply_to>``) when the agent has not seen them in its session or
Caesar quoted a part. See ``legio.store.threads``.

"Seen" means: the agent may see that nuntius and it is among the ``history_window``
nuntii before this one that it may see (what a fresh session is given, and what a
continuing one was given before). Another agent's answer, something older, or a message
from before a ``/reset`` whose window has passed are carried.
"""

from __future__ import annotations

from legio.sessions.history import format_quoted
from legio.sessions.spec import AgentSpec
from legio.store.praetorium import Nuntius, Praetorium
from legio.store.threads import ThreadStore


async def nuntius_at(praetorium: Praetorium, seq: int) -> Nuntius | None:
    async with praetorium.connection.execute("SELECT id FROM nuntii WHERE seq = ?", (seq,)) as c:
        row = await c.fetchone()
    return await praetorium.get(row["id"]) if row else None


async def pointer_context(
    praetorium: Praetorium, spec: AgentSpec, nuntius: Nuntius
) -> tuple[dict[str, str], str]:
    """The current message's attributes and the ``<in_reply_to>`` element (or "")."""
    attributes: dict[str, str] = {}
    element = ""
    for link in await ThreadStore(praetorium).links_of(nuntius.seq):
        target = await nuntius_at(praetorium, link.target_seq) if link.target_seq else None
        if link.kind == "topic":  # the lane it was asked in
            attributes["topic"] = link.quote or ""
            continue
        if link.kind == "edit_of":
            if target is not None:
                attributes["edit_of"] = target.id
            continue
        if target is None:  # a message Legio has no record of: Telegram's words
            if link.quote:
                element = format_quoted(
                    link.quote, sender=link.quote_sender, nuntius_id=None, part=False, known=False
                )
            continue
        attributes["in_reply_to"] = target.id
        if link.quote:  # the part he selected: what he points at, seen or not
            element = format_quoted(
                link.quote, sender=target.sender, nuntius_id=target.id, part=True, known=True
            )
        elif not await _seen(praetorium, spec, target, nuntius):
            element = format_quoted(
                target.text, sender=target.sender, nuntius_id=target.id, part=False, known=True
            )
    return attributes, element


async def _seen(praetorium: Praetorium, spec: AgentSpec, target: Nuntius, current: Nuntius) -> bool:
    window = await praetorium.get_visible_nuntii(
        spec.name, spec.history_window, before_seq=current.seq
    )
    return any(n.seq == target.seq for n in window)
