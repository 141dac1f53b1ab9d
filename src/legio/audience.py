"""What belongs to no request, told to the front-ends: one ``Events`` protocol, attached once.

A request's feedback goes to its ``Watch`` (``legio.request``). Everything else the engine
has to say goes here: a notice (a budget warning, a plan limit, a disk running low, the
forge's rate limit), a centurio's answer to the Legatus's dispatch, a work card nobody's
request showed (or one whose check ended), the forge's events, a stuck turn, a failed
backup or the morning digest, a scheduled job's run, and a request Caesar made on a page
that shows no answers (the cockpit's 🛠 Fix). A front-end implements the
methods it shows (``Quiet`` does nothing for the rest) and attaches once
(``LegioApp.attach``). Several may attach (Telegram and the cockpit): each is told every
event; a job's run or a page's request is shown by the first that takes it, and a tool
call outside any request is asked by the first that has an asker.

A new kind of feedback that belongs to no request is one method here (with its no-op in
``Quiet``) and one call where the engine knows it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from legio.legatus.scheduling import JobRun
from legio.operations.digest import DigestReady
from legio.request import (
    UNWATCHED,
    Asker,
    BackupFailed,
    ForgeEvent,
    Stuck,
    WorkCard,
)
from legio.store.jobstore import Job

logger = logging.getLogger(__name__)

Operation = BackupFailed | DigestReady


class Events(Protocol):
    """What a front-end is told of that belongs to no request."""

    def asker(self) -> Asker | None:
        """Who asks Caesar about a tool call outside any request (None: not this one)."""

    async def notice(self, text: str) -> None:
        """Words for Caesar nobody asked for: a budget warning, a plan limit, a low disk."""

    async def dispatched(self, agent: str, text: str) -> None:
        """``agent``'s answer to the Legatus's dispatch (a topic per agent shows it)."""

    async def card(self, card: WorkCard, new: bool) -> None:
        """A work card outside a request (``new``: a dispatch's), or one that changed."""

    async def forge(self, event: ForgeEvent) -> None:
        """CI settled, a review, a pull request merged or closed."""

    async def stuck(self, stuck: Stuck) -> None:
        """A turn whose CLI has said nothing for ``[sessions] stuck_minutes``."""

    async def operation(self, event: Operation) -> None:
        """A failed automatic backup, or the morning digest."""

    async def job(self, job: Job, run: JobRun) -> bool:
        """Show a scheduled job's run (``run(watch)`` answers it); False: not here."""

    async def requested(self, agent: str, run: JobRun) -> bool:
        """Show a request to ``agent`` that Caesar made where answers are not shown (the
        cockpit's 🛠 Fix) like one of his own (``run(watch)`` answers it); False: not here."""


class Quiet:
    """An ``Events`` that shows nothing: a front-end overrides what it shows."""

    def asker(self) -> Asker | None:
        return None

    async def notice(self, text: str) -> None:
        return None

    async def dispatched(self, agent: str, text: str) -> None:
        return None

    async def card(self, card: WorkCard, new: bool) -> None:
        return None

    async def forge(self, event: ForgeEvent) -> None:
        return None

    async def stuck(self, stuck: Stuck) -> None:
        return None

    async def operation(self, event: Operation) -> None:
        return None

    async def job(self, job: Job, run: JobRun) -> bool:
        return False

    async def requested(self, agent: str, run: JobRun) -> bool:
        return False


class Audience:
    """The attached front-ends, told as one; see the module docstring."""

    def __init__(self) -> None:
        self.attached: list[Events] = []

    def attach(self, events: Events) -> Callable[[], None]:
        """Tell ``events`` from now on; returns the detach."""
        self.attached.append(events)

        def detach() -> None:
            if events in self.attached:
                self.attached.remove(events)

        return detach

    def asker(self) -> Asker | None:
        return next((a for e in self.attached if (a := e.asker()) is not None), None)

    async def _each(self, what: str, tell: Callable[[Events], Awaitable[None]]) -> None:
        for events in list(self.attached):
            try:
                await tell(events)
            except Exception:
                logger.exception("a front-end could not show %s", what)

    async def notice(self, text: str) -> None:
        await self._each("a notice", lambda e: e.notice(text))

    async def dispatched(self, agent: str, text: str) -> None:
        await self._each(f"{agent}'s answer to a dispatch", lambda e: e.dispatched(agent, text))

    async def card(self, card: WorkCard, new: bool) -> None:
        await self._each(f"work card {card.id}", lambda e: e.card(card, new))

    async def forge(self, event: ForgeEvent) -> None:
        await self._each(f"a forge event ({event.kind})", lambda e: e.forge(event))

    async def stuck(self, stuck: Stuck) -> None:
        await self._each(f"{stuck.agent}'s stuck turn", lambda e: e.stuck(stuck))

    async def operation(self, event: Operation) -> None:
        await self._each(type(event).__name__, lambda e: e.operation(event))

    async def job(self, job: Job, run: JobRun) -> object:
        """The job's run, shown by the first front-end that takes it (else unseen)."""
        for events in list(self.attached):
            if await events.job(job, run):
                return None
        return await run(UNWATCHED)

    async def requested(self, agent: str, run: JobRun) -> object:
        """A page's request to ``agent``, shown by the first front-end that takes it (else
        answered unseen: its answer is in the history and on the cockpit's page)."""
        for events in list(self.attached):
            if await events.requested(agent, run):
                return None
        return await run(UNWATCHED)
