"""The idle reaper: sessions unused for ``session_idle_timeout_minutes`` are closed.

A reaped session keeps its checkpoint, so the agent's next request resumes it
(``--resume``) with only what it has not seen. A slot whose turn is held is never
reaped. The loop wakes every ``interval_s`` (at most half the timeout) and survives its
own failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from legio.sessions.slot import AgentSlot

logger = logging.getLogger(__name__)


class Reaper:
    """Closes idle sessions of the slots ``slots()`` returns."""

    def __init__(
        self, slots: Callable[[], Iterable[AgentSlot]], idle_timeout_s: float, interval_s: float
    ) -> None:
        self.slots = slots
        self.idle_timeout_s = idle_timeout_s
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    async def reap_idle(self) -> list[str]:
        """Close sessions idle longer than the timeout; return the agents' names."""
        now = time.monotonic()
        reaped = []
        for slot in list(self.slots()):
            if slot.session is None or slot.lock.locked():
                continue
            if now - slot.session.last_active > self.idle_timeout_s:
                await slot.close("idle")
                reaped.append(slot.name)
        if reaped:
            logger.info("reaped idle sessions: %s", ", ".join(reaped))
        return reaped

    async def _loop(self) -> None:
        while True:  # a short timeout is kept within half of itself
            await asyncio.sleep(min(self.interval_s, self.idle_timeout_s / 2))
            try:
                await self.reap_idle()
            except Exception:
                logger.exception("idle reaper failed (will try again)")

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="legio-reaper")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
