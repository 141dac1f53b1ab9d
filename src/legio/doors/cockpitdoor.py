"""``CockpitDoor``: what the cockpit (``legio.frontends.web``) reads that no chat command
asks for: the newest work cards, the pull requests Legio follows, the memoria read-only.
``LegioApp.cockpit``; given to the cockpit's ``Source``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from legio.engine import Engine
from legio.errors import MemoriaError
from legio.memoria.store import Listing
from legio.request import WorkCard
from legio.store.pullstore import PullRecord, PullStore


class CockpitDoor:
    """Read-only views for the cockpit."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def recent_cards(self, limit: int = 50) -> list[WorkCard]:
        """The newest ``limit`` work cards, newest first (their check as it is now)."""
        return await self.engine.sessions.cards.recent(limit)

    async def open_pulls(self) -> list[PullRecord]:
        """The pull requests Legio opened that are still open (and followed)."""
        return await PullStore(self.engine.praetorium).following()

    async def spend_by_day(self, days: int = 14) -> list[tuple[str, str, float]]:
        """(UTC day, project or "", cost) over the last ``days`` days."""
        since = datetime.now(UTC) - timedelta(days=days)
        return await self.engine.praetorium.records.spend_by_day(since)

    async def memoria_listing(self, layer: str, centurio: str | None = None) -> Listing:
        """``edicta``, ``acta`` or a centurio's ``commentarii``, read in a worker thread
        (``MemoriaError`` for an unknown layer or centurio)."""
        memoria = self.engine.memoria
        if layer == "edicta":
            return await asyncio.to_thread(memoria.list_edicta)
        if layer == "acta":
            return await asyncio.to_thread(memoria.list_acta)
        if layer == "commentarii" and centurio:
            return await asyncio.to_thread(memoria.list_commentarii, centurio)
        raise MemoriaError(f"no memoria layer {layer!r}: edicta, acta or a centurio's commentarii")
