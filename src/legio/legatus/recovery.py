"""What a restart left: requests an addressed agent never answered, found once at start.

``unanswered`` reads Caesar's and the scheduler's recent requests with who answered each
(one query) and lists those an agent still owes; ``notice_interruptions`` records them as
told to Caesar, so each is said once (``/retry`` runs them again, in the Legatus).
``record_unanswered`` stores the message of a file a restart cut off without answering it:
it is then such a request. Call these at start-up, before new messages arrive: a request
in progress looks the same.
"""

from __future__ import annotations

from legio.castra import Castra
from legio.errors import DuplicateOrigin
from legio.legatus.mentions import NO_MENTIONS, parse_mentions
from legio.names import BROADCAST, CAESAR, LEGATUS, SCHEDULER
from legio.projects.copies import Projects
from legio.request import PendingFile
from legio.store.praetorium import Nuntius, Praetorium


async def unanswered(
    praetorium: Praetorium, castra: Castra, window: int = 200
) -> list[tuple[Nuntius, list[str]]]:
    """Caesar's and the scheduler's recent requests that an addressed agent never answered."""
    roster_names = castra.roster().names
    found = []
    requests = await praetorium.requests_from(CAESAR, SCHEDULER, limit=window)  # one query
    for request in requests:
        if request.noted:
            continue
        nuntius = request.nuntius
        if nuntius.audience == (BROADCAST,):
            expected = roster_names
        else:
            expected = [a for a in nuntius.audience if a == LEGATUS or a in roster_names]
        missing = [a for a in expected if a not in request.repliers]
        if missing:
            found.append((nuntius, missing))
    return found


async def notice_interruptions(
    praetorium: Praetorium, castra: Castra
) -> list[tuple[Nuntius, list[str]]]:
    """``unanswered``, each recorded as told to Caesar (so it is said once)."""
    found = await unanswered(praetorium, castra)
    for nuntius, missing in found:
        await praetorium.note_interruption(nuntius.seq, missing)
    return found


async def record_unanswered(
    praetorium: Praetorium, castra: Castra, projects: Projects, pending: PendingFile
) -> bool:
    """Store Caesar's message of ``pending`` (a file a restart cut off) without answering
    it; False if its nuntius is already stored."""
    forwarded = pending.forwarded_from  # someone else's words: their @names dispatch nobody
    mentions = NO_MENTIONS if forwarded else parse_mentions(pending.text, castra.roster())
    audience = ([BROADCAST] if mentions.broadcast else mentions.names) or [LEGATUS]
    project, _ = (None, None) if forwarded else projects.pick(pending.text)
    try:
        await praetorium.post(
            CAESAR,
            pending.text,
            audience,
            origin=pending.origin,
            forwarded_from=forwarded,
            project=project,
        )
    except DuplicateOrigin:
        return False
    return True
