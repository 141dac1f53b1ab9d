"""Each agent's requests from their arrival to their outcome, and the stops that end them.

A stop must do what Caesar is told, whenever it comes: while a request is still being
received, queued behind another, waiting for its CLI to start, having its query
written, or running. So every arrival — a request or a stop — is stamped with a
*receipt*, a number in the order things arrived (a front-end takes it before it awaits
anything; ``Receipts``), and a stop ends, for each agent it names, every request of that
agent received *before* it, and nothing received after:

- a request not routed yet is born stopped when it is (``AgentErrands.add``), and the
  stop waits a moment for the requests received before it to be routed, so that what it
  says counts them;
- a queued request never starts (its turn comes and goes: ``Errand.check``);
- a request whose query is not written yet is never sent (``check`` just before it);
- a query written is interrupted — by the stop if the query was already written, else
  by the turn itself right after writing it (``Errand.sent``), so the interrupt always
  reaches the CLI *after* the query: the CLI acknowledges and drops an interrupt that
  comes while it is idle (the real CLI 2.1.330 does, and so does the test bench's fake)
  and would then answer the query in full;
- an answer that arrives anyway (the turn ended before the interrupt) is not delivered;
- the interrupt is sent in the background (a stop answers at once, whatever the CLI
  does), and a CLI that has not ended the turn ``STOP_GRACE_S`` later is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from legio.errors import AgentInterrupted

logger = logging.getLogger(__name__)

STOP_GRACE_S = 15.0  # an interrupted CLI that has not ended its turn by then is closed
ROUTING_WAIT_S = 3.0  # how long a stop waits for earlier arrivals to be routed

Interrupt = Callable[[], Awaitable[None]]
Close = Callable[["Errand"], Awaitable[None]]  # close the CLI whose turn ``errand`` is
T = TypeVar("T")


class Receipts:
    """The order in which requests and stops arrived, and the arrivals not routed yet."""

    def __init__(self) -> None:
        self._numbers = itertools.count(1)
        self._open: dict[int, asyncio.Event] = {}

    def take(self, *, routing: bool = False) -> int:
        """A new receipt; ``routing``: it may still become requests (``settle`` it)."""
        receipt = next(self._numbers)
        if routing:
            self._open[receipt] = asyncio.Event()
        return receipt

    def settle(self, receipt: int | None) -> None:
        """The arrival ``receipt`` is routed (or will never be): it makes no more requests."""
        event = self._open.pop(receipt, None) if receipt is not None else None
        if event is not None:
            event.set()

    async def routed_before(self, receipt: int) -> bool:
        """Wait until every arrival before ``receipt`` is routed; False if some still are
        not after ``ROUTING_WAIT_S`` (a file still downloading, a voice note being heard)."""
        waiting = [event.wait() for number, event in self._open.items() if number < receipt]
        if not waiting:
            return True
        try:
            async with asyncio.timeout(ROUTING_WAIT_S):
                await asyncio.gather(*waiting)
        except TimeoutError:
            return False
        return True


def conversation_of(origin: str | None) -> str | None:
    """The conversation a nuntius came from: its origin without the message
    (``telegram:<chat>``; None: the console). A turn's answer goes back there, so a
    message added to the turn (a steer) must come from there too: never a private word
    into a group's turn."""
    return ":".join(origin.split(":")[:2]) if origin else None


@dataclass(eq=False)
class Errand:
    """One request for one agent: its place in line, and whether a stop ended it."""

    agent: str
    receipt: int
    ticket: asyncio.Future[None]
    stopped: bool = False
    started: bool = False  # its turn came
    _kicked: bool = False
    interrupt: Interrupt | None = None  # set once its query is written
    close: Close | None = None  # a CLI that does not end an interrupted turn is closed
    woken: asyncio.Event = field(default_factory=asyncio.Event)  # set by a stop
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    kicks: set[asyncio.Task[None]] | None = None  # where its interrupt task is kept
    project: str | None = None  # the project its turn works on (a steer must match it)
    where: str | None = None  # the conversation its request came from (``conversation_of``)
    joined: list[Any] = field(default_factory=list)  # messages added to its turn (steering.Joined)
    plan: int | None = None  # the plan Caesar agreed to in its turn (legio.sessions.planning)

    def stop(self) -> None:
        self.stopped = True
        self.woken.set()

    def check(self) -> None:
        """Raise ``AgentInterrupted`` if a stop ended this request (before it is sent)."""
        if self.stopped:
            raise AgentInterrupted(self.agent, "stopped by Caesar")

    async def until_stopped(self, step: Awaitable[T]) -> T:
        """Await ``step`` (a CLI starting, a plan limit's wait…) unless a stop comes
        first: then ``step`` is cancelled and ``AgentInterrupted`` raised."""
        self.check()
        work = asyncio.ensure_future(step)
        woken = asyncio.ensure_future(self.woken.wait())
        try:
            await asyncio.wait({work, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
        if work.cancelled():
            self.check()
        result = work.result()
        self.check()
        return result

    async def sent(self, interrupt: Interrupt) -> None:
        """Its query is written: a stop from now on interrupts it; one that came while it
        was being written interrupts it now (after the query, never before)."""
        self.interrupt = interrupt
        if self.stopped:
            self.kick()

    def kick(self) -> None:
        """Interrupt its written query in the background (once), and make sure its turn
        ends: a CLI that fails the interrupt or ignores it is closed."""
        if self.interrupt is None or self._kicked:
            return  # not written yet: ``check`` or ``sent`` takes care of it
        self._kicked = True
        task = asyncio.create_task(self._interrupt(self.interrupt))
        if self.kicks is not None:
            self.kicks.add(task)
            task.add_done_callback(self.kicks.discard)

    async def _interrupt(self, interrupt: Interrupt) -> None:
        try:
            async with asyncio.timeout(STOP_GRACE_S):
                await interrupt()
                await self.ended.wait()
        except Exception as e:  # TimeoutError too
            logger.warning(
                "%s: the interrupted turn did not end (%r); closing its CLI", self.agent, e
            )
            if self.close is not None and not self.ended.is_set():
                await self.close(self)


@dataclass(frozen=True)
class Stopped:
    """What one stop ended for one agent."""

    agent: str
    running: bool  # a turn under way was interrupted
    queued: int  # requests dropped before they started (or were routed)


class AgentErrands:
    """Every agent's requests not yet ended, and the stops that end them."""

    def __init__(self, close: Close) -> None:
        self._close = close  # closes the agent's session if ``errand`` is still its turn
        self._of: dict[str, list[Errand]] = {}
        self._stopped_before: dict[str, int] = {}
        self._late: dict[str, list[Errand]] = {}
        self._watchers: set[asyncio.Task[None]] = set()

    def add(self, agent: str, receipt: int, ticket: asyncio.Future[None]) -> Errand:
        """A request routed to ``agent``; born stopped if a later stop named it already."""
        errand = Errand(agent, receipt, ticket, close=self._close, kicks=self._watchers)
        if receipt < self._stopped_before.get(agent, 0):
            errand.stop()
            self._late.setdefault(agent, []).append(errand)
        self._of.setdefault(agent, []).append(errand)
        return errand

    def late(self, agent: str, before: int) -> list[Errand]:
        """The requests routed to ``agent`` after a stop named it, received before
        ``before`` (born stopped), each said once."""
        late = self._late.pop(agent, [])
        said = [e for e in late if e.receipt < before]
        if len(said) < len(late):
            self._late[agent] = [e for e in late if e.receipt >= before]
        return said

    def end(self, errand: Errand) -> None:
        """Its outcome is decided: a stop from now on no longer counts it."""
        errand.ended.set()
        errands = self._of.get(errand.agent, [])
        with contextlib.suppress(ValueError):
            errands.remove(errand)
        if not errands:
            self._of.pop(errand.agent, None)

    def running(self, agent: str) -> Errand | None:
        """The request whose turn ``agent`` is taking, if any."""
        return next((e for e in self._of.get(agent, []) if e.started), None)

    def waiting(self, agent: str) -> int:
        """How many of ``agent``'s requests wait in line (their turn has not come)."""
        return sum(1 for e in self._of.get(agent, []) if not e.started and not e.stopped)

    def mark(self, agent: str, before: int) -> list[Errand]:
        """Stop ``agent``'s requests received before ``before`` (now and when routed)."""
        self._stopped_before[agent] = max(self._stopped_before.get(agent, 0), before)
        hit = [e for e in self._of.get(agent, []) if e.receipt < before and not e.stopped]
        for errand in hit:
            errand.stop()
        return hit

    async def shutdown(self) -> None:
        for watcher in list(self._watchers):
            watcher.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
