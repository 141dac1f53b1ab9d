"""Telegram's gestures as the Legatus understands them: replies, quotes and edits.

- **Replies.** ``Pointer`` is what Caesar's message points at, as plain data from a
  front-end: the nuntius a replied-to message carries (``seq``), the part he quoted, or
  for a message Legio has no record of, its words as Telegram sent them. A reply to an
  agent's message goes to that agent when the text names nobody; the link is stored
  (``legio.store.threads``) and the agent answering gets it (``legio.sessions.pointers``).
- **Edits.** ``edit`` takes Caesar's corrected words for a request: if no agent it
  addresses has started it (their checkpoints are below it), the request carries the new
  words (the old ones are kept); if one has, the correction is a new request to the same
  audience, linked ``edit_of`` the first, answered like any other. The same words again
  do nothing; a message that is not a stored request is not Legio's to correct.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from legio.castra import Roster
from legio.names import BROADCAST, CAESAR, LEGATUS
from legio.request import Pointer
from legio.sessions.history import QUOTE_MAX
from legio.sessions.pointers import nuntius_at
from legio.store.praetorium import Nuntius, Praetorium
from legio.store.threads import Link, ThreadStore

logger = logging.getLogger(__name__)


Dispatched = Callable[[str, str], Awaitable[None]]  # (centurio, its answer to the Legatus)


@dataclass(frozen=True)
class Correction:
    """What an edit became: ``replaced`` (the queued request now says it), ``request``
    (a new request to answer, ``names`` its agents), or ``nothing``."""

    kind: str
    nuntius: Nuntius | None = None
    names: tuple[str, ...] = ()


def bounded(text: str | None) -> str | None:
    return text[: QUOTE_MAX * 2] if text else None


class Conversations:
    """Replies and edits over the praetorium (see the module docstring)."""

    def __init__(self, praetorium: Praetorium) -> None:
        self.praetorium = praetorium
        self.threads = ThreadStore(praetorium)
        self.on_dispatch: Dispatched | None = None  # a front-end shows dispatch answers

    async def dispatched(self, agent: str, text: str) -> None:
        """A centurio answered the Legatus's dispatch: the front-end may show it (a topic
        per agent); a failure there is only logged."""
        if self.on_dispatch is None:
            return
        try:
            await self.on_dispatch(agent, text)
        except Exception:
            logger.exception("showing %s's answer to a dispatch failed", agent)

    async def replied_agent(self, pointer: Pointer | None, roster: Roster) -> str | None:
        """The agent whose message Caesar replied to (a centurio of the roster, or the
        Legatus), if the message names nobody itself."""
        if pointer is None or pointer.seq is None:
            return None
        target = await nuntius_at(self.praetorium, pointer.seq)
        if target is None:
            return None
        if target.sender in roster.centuriones or target.sender == LEGATUS:
            return target.sender
        return None

    async def link(self, nuntius: Nuntius, pointer: Pointer) -> None:
        """Store what ``nuntius`` points at: the replied-to nuntius and the quoted part (a
        quote that is not in that message is dropped: the whole message is what it
        points at), or an unknown message's words; and the topic it was written in."""
        if pointer.topic:
            await self.threads.link(nuntius.seq, Link("topic", None, bounded(pointer.topic)))
        if pointer.seq is not None:
            target = await nuntius_at(self.praetorium, pointer.seq)
            if target is not None:
                quote = pointer.quote if pointer.quote and pointer.quote in target.text else None
                await self.threads.link(nuntius.seq, Link("reply", target.seq, bounded(quote)))
                return
        words = pointer.quote or pointer.text
        if words and words.strip():
            link = Link("reply", None, bounded(words), bounded(pointer.sender))
            await self.threads.link(nuntius.seq, link)

    async def edit(self, origin: str, text: str, roster: Roster) -> Correction:
        """Caesar's new words for the request that came from ``origin``."""
        original = await self.praetorium.get_by_origin(origin)
        if original is None or original.sender != CAESAR:
            return Correction("nothing")
        edited_origin = f"{origin}:edit"
        latest = original
        for n in range(1, 100):  # an earlier edit of it may be the latest words
            found = await self.praetorium.get_by_origin(f"{edited_origin}{n}")
            if found is None:
                edited_origin = f"{edited_origin}{n}"
                break
            latest = found
        if " ".join(text.split()) == " ".join(latest.text.split()):
            return Correction("nothing")  # the same words: nothing to do
        names = self.audience_names(original.audience, roster)
        async with self.threads.edit_lock:
            if not await self._started(original, names) and latest is original:
                await self.threads.replace_text(original.seq, original.text, text)
                return Correction("replaced", original, tuple(names))
            correction = await self.praetorium.post(
                CAESAR, text, original.audience, origin=edited_origin, project=original.project
            )
            await self.threads.link(correction.seq, Link("edit_of", original.seq))
        return Correction("request", correction, tuple(names))

    @staticmethod
    def audience_names(audience: Sequence[str], roster: Roster) -> list[str]:
        if tuple(audience) == (BROADCAST,):
            return roster.names
        return [a for a in audience if a == LEGATUS or a in roster.centuriones]

    async def _started(self, nuntius: Nuntius, names: list[str]) -> bool:
        """Whether any of ``names`` has been given ``nuntius`` (its checkpoint reached it, or
        it answered it: a ``/reset`` clears checkpoints, not answers)."""
        if await self.threads.answered(nuntius.id):
            return True
        for name in names:
            checkpoint = await self.praetorium.records.get_checkpoint(name)
            if checkpoint is not None and checkpoint.last_seq >= nuntius.seq:
                return True
        return False
