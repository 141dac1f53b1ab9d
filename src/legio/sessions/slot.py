"""Per-agent state in one place: the ``AgentSlot``, its session's life, and the turn lock.

One slot per agent the ``SessionManager`` has served: its turn lock, its state
(idle, working, error), its live session if any, the watch of the turn it
is running, and the last compaction failure to show in ``/status``. ``ensure`` gives
a slot a usable session before a query: the live one, else a rebuilt one (a changed
prompt, the token ceiling after a summary, a crashed CLI), resumed from the saved
checkpoint when it still fits the prompt, else a fresh one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from legio.fence.policy import hidden_now
from legio.request import Watch
from legio.sessions.client import AgentSession, close
from legio.sessions.spec import AgentSpec
from legio.store.praetorium import Praetorium
from legio.store.records import QueryUsage

logger = logging.getLogger(__name__)

OpenSession = Callable[[str | None], Awaitable[AgentSession]]  # resume this id, or None: new
BeforeRebuild = Callable[[AgentSession], Awaitable[None]]  # e.g. compaction at the ceiling


class TicketLock:
    """A lock served in the order places were *reserved* (synchronously), not awaited.

    ``ticket()`` takes a place in line at once; awaiting the ticket waits for the turn;
    ``release()`` passes the turn on. A cancelled ticket gives its place up.
    """

    def __init__(self) -> None:
        self._line: deque[asyncio.Future[None]] = deque()
        self._held = False

    def ticket(self) -> asyncio.Future[None]:
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(turn)
        self._grant()
        return turn

    def _grant(self) -> None:
        while not self._held and self._line:
            turn = self._line.popleft()
            if not turn.done():
                turn.set_result(None)
                self._held = True

    def release(self) -> None:
        self._held = False
        self._grant()

    def locked(self) -> bool:
        return self._held


@dataclass
class AgentSlot:
    """One agent, as the ``SessionManager`` keeps it."""

    name: str
    lock: TicketLock = field(default_factory=TicketLock)
    state: str = "idle"  # idle, working or error
    session: AgentSession | None = None
    watch: Watch | None = None  # the request's watch while it runs a turn (its approvals)
    compaction_failure: str | None = None
    unrecorded: list[QueryUsage] = field(default_factory=list)  # usage not stored yet

    async def close(self, why: str) -> None:
        """Disconnect the live session, if any (its checkpoint stays)."""
        session, self.session = self.session, None
        if session is not None:
            await close(session, why)


async def ensure(
    slot: AgentSlot,
    spec: AgentSpec,
    *,
    praetorium: Praetorium,
    open_session: OpenSession,
    before_rebuild: BeforeRebuild,
) -> AgentSession:
    """The slot's session, fit for the next query: live, rebuilt, resumed or new."""
    name = spec.name
    session = slot.session
    if session is not None:
        reason = session.rebuild_reason(spec)
        moved = session.cwd != spec.cwd  # to or from a project copy
        effort = session.effort != spec.effort  # the CLI's --effort: fixed at its start
        if reason is None and not moved and not effort and session.hidden == hidden_now():
            return session
        if reason is None:  # the same session, on a CLI in its new place or hiding a new entry
            why = (
                "it moves to " + str(spec.cwd)
                if moved
                else f"its effort is now {spec.effort or 'the default'}"
                if effort
                else "a ~/.claude* entry or socket came or went"
            )
            logger.info("%s: restarting its CLI: %s", name, why)
            await slot.close("moved" if moved else "effort" if effort else "~/.claude* changed")
            session = None
    if session is not None and reason is not None:
        logger.info("%s: rebuilding the session because %s", name, reason)
        crashed = session.broken  # a crashed CLI's session is resumed; the rest start anew
        if session.compacts_first():
            await before_rebuild(session)
        await slot.close("rebuild")
        if not crashed:
            await praetorium.records.clear_checkpoint(name)
    checkpoint = await praetorium.records.get_checkpoint(name)
    if checkpoint and checkpoint.session_id and checkpoint.prompt_hash == spec.rebuild_key:
        try:
            session = await open_session(checkpoint.session_id)
        except Exception as e:
            logger.warning(
                "%s: could not resume SDK session %s (%s); starting a fresh session "
                "with history from the praetorium",
                name,
                checkpoint.session_id,
                e,
            )
        else:
            session.last_seq = checkpoint.last_seq
            slot.session = session
            logger.info("%s: resumed SDK session %s", name, session.session_id)
            return session
    slot.session = session = await open_session(None)
    logger.info("%s: started SDK session %s", name, session.session_id)
    return session


@dataclass(frozen=True)
class AgentStatus:
    """One agent, for ``/status``."""

    name: str
    state: str
    live: bool
    session_age_s: float | None
    context_tokens: int
    turns: int
    cost_usd: float
    compaction_failure: str | None = None
    model: str | None = None  # the model its live CLI is on, if set

    @classmethod
    def of(cls, slot: AgentSlot) -> AgentStatus:
        session = slot.session
        return cls(
            name=slot.name,
            state=slot.state,
            live=session is not None,
            session_age_s=(time.monotonic() - session.created) if session else None,
            context_tokens=session.tracker.context_tokens if session else 0,
            turns=session.tracker.turns if session else 0,
            cost_usd=session.cost if session else 0.0,
            compaction_failure=slot.compaction_failure,
            model=session.model if session else None,
        )
