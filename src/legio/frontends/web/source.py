"""Every door call the cockpit makes, in one place: the pages and actions ask ``Source``,
never ``LegioApp`` directly, so a change of the door is mended here alone.

It also holds what the door does not keep for the cockpit: the live view (``Live``,
attached as the app's ``Events``; each request's watch observed through ``observe``) and
the approvals waiting on the page (``Approvals``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from legio.app import (
    Attachment,
    CheckRecord,
    LegioApp,
    PullRecord,
    SearchHit,
    Stopped,
    Target,
)
from legio.forge.publish import Published, PublishPreview
from legio.frontends.web.live import Live
from legio.frontends.web.sharing import Approvals, Observed
from legio.limits.budget import UsageReport
from legio.memoria.store import Listing
from legio.request import CardDiff, Watch, WorkCard

JOB_ID = re.compile(r"#(\d+) ")
PREVIEWS_KEPT = 16


class Source:
    """The cockpit's view of the door; see the module docstring."""

    def __init__(self, app: LegioApp, live: Live | None = None) -> None:
        self.app = app
        # the door's rooms this needs (tests/test_structure.py: no app.<room>.<method>)
        self.work = app.work
        self.operations = app.operations
        self.views = app.cockpit
        self.live = live or Live()
        self.approvals = Approvals(self.live)
        self._detach: list[Callable[[], Any]] = []
        self.previews: dict[str, PublishPreview] = {}  # shown on a card's page, by digest

    # ---------------------------------------------------------- wiring

    async def attach(self) -> None:
        """Feed ``live`` with what belongs to no request (``LegioApp.attach``)."""
        self._detach.append(await self.app.attach(self.live))

    def observe(self, watch: Watch) -> Watch:
        """A request's ``watch`` told as before, and the page too (its approvals on both)."""
        return Observed(watch, self.live, self.approvals)

    def detach(self) -> None:
        for undo in self._detach:
            undo()
        self._detach.clear()

    def answer_on_socket(self, request: str, answer: Any) -> None:
        self.operations.answer_on_socket(request, answer)

    # ---------------------------------------------------------- Now

    def agents(self) -> list[str]:
        return self.app.agents()

    async def status(self) -> dict[str, Any]:
        return await self.operations.status_report()

    async def stop(self, agent: str) -> list[Stopped]:
        return await self.app.stop([agent])

    def pending_asks(self) -> list[dict[str, Any]]:
        return self.approvals.pending()

    def decide(self, ask_id: int, choice: str) -> bool:
        return self.approvals.decide(ask_id, choice)

    # ---------------------------------------------------------- Work

    async def cards(self, limit: int = 50) -> list[WorkCard]:
        return await self.views.recent_cards(limit)

    async def card(self, card_id: int) -> WorkCard | None:
        return await self.work.card(card_id)

    async def card_diff(self, card_id: int) -> CardDiff | None:
        return await self.work.card_diff(card_id)

    async def check(self, run_id: int) -> CheckRecord | None:
        return await self.work.check(run_id)

    def check_log(self, run_id: int) -> Path | None:
        return self.work.check_log(run_id)

    async def publish_preview(self, card: WorkCard) -> PublishPreview:
        """What 🚀 Publish would post for the card, nothing pushed (as the card's button
        shows it). The preview is pinned here by its digest until it is posted or
        ``PREVIEWS_KEPT`` newer ones come."""
        preview = await self.work.publish_preview(card.id)
        self.previews[preview.digest] = preview
        while len(self.previews) > PREVIEWS_KEPT:
            self.previews.pop(next(iter(self.previews)))
        return preview

    def take_preview(self, digest: str) -> PublishPreview | None:
        """The pinned preview Caesar confirms, once (None: posted already, or gone)."""
        return self.previews.pop(digest, None)

    def pin_preview(self, preview: PublishPreview) -> None:
        """Pinned again, for the force question after a refused push."""
        self.previews[preview.digest] = preview

    async def publish(self, preview: PublishPreview, *, force: bool = False) -> Published:
        """Post exactly ``preview`` (``PushRejected``, ``ForgeError``, ``ProjectError``)."""
        return await self.work.publish(preview, force=force)

    async def fix(self, card: WorkCard) -> str:
        """🛠 Fix: the card's agent asked to fix its failed check, answered in the chat."""
        return await self.work.fix_elsewhere(card.id)

    async def drop(self, card: WorkCard) -> int | None:
        """🗑 Drop the card's copy (its branch published first; ``ProjectError``)."""
        return await self.work.drop_copy(Target(card.agent, card.project))

    async def pulls(self) -> list[PullRecord]:
        return await self.views.open_pulls()

    # ---------------------------------------------------------- History, Memoria

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        return await self.app.search(query, limit)

    async def history(self, count: int) -> list[Any]:
        return await self.app.history(count)

    async def files_of(self, seqs: list[int]) -> dict[int, list[Attachment]]:
        return await self.app.files_of(seqs)

    async def memoria(self, layer: str, centurio: str | None = None) -> Listing:
        return await self.views.memoria_listing(layer, centurio)

    def centuriones(self) -> list[str]:
        return list(self.app.roster().names)

    # ---------------------------------------------------------- Jobs, Spend

    async def jobs(self) -> list[tuple[int, str]]:
        """Each scheduled job: its number and its line (as ``/jobs`` says it)."""
        found = []
        for line in await self.app.job_lines():
            match = JOB_ID.match(line)
            if match:
                found.append((int(match.group(1)), line))
        return found

    async def cancel_job(self, job_id: int) -> bool:
        return await self.app.cancel_job(job_id) is not None

    async def usage(self) -> UsageReport | None:
        return await self.app.usage()

    async def spend_by_day(self, days: int = 14) -> list[tuple[str, str, float]]:
        return await self.views.spend_by_day(days)
