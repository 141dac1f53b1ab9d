"""``WorkDoor``: what the door answers about the agents' work on projects: ``/diff``,
``/projects``, ``/drop``, work cards and their checks, and the forge (Publish, CI events,
issues). ``LegioApp.work``; the front-end parts that show this work are given it.
"""

from __future__ import annotations

from pathlib import Path

from legio.config import Config
from legio.engine import Engine
from legio.forge.asks import fix_text
from legio.forge.base import Issue
from legio.forge.publish import Published, PublishPreview
from legio.projects.checks import Checks
from legio.projects.overview import DiffReport, ProjectState
from legio.request import (
    CardDiff,
    ForgeEvent,
    Request,
    WorkCard,
)
from legio.sessions.desk import ProjectDesk, Target
from legio.sessions.manager import SessionManager
from legio.store.checkstore import CheckRecord


class WorkDoor:
    """Projects, cards, checks and the forge, for the front-ends."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.config: Config = engine.config
        self.sessions: SessionManager = engine.sessions
        self.projects: ProjectDesk = engine.projects
        self.checks: Checks = engine.checks

    def project_names(self) -> list[str]:
        return self.projects.names()

    async def project_overview(self) -> list[ProjectState]:
        """``/projects``: every agent's copy of every project."""
        return await self.projects.overview()

    def project_target(self, words: str, usage: str) -> Target:
        """The agent and project ``words`` name (``ProjectError`` with ``usage`` if not)."""
        return self.projects.resolve(words, usage)

    async def project_diff(self, target: Target) -> DiffReport | None:
        """``/diff``: what Caesar would merge of the agent's branch; None without a copy."""
        return await self.projects.diff(target)

    async def drop_copy(self, target: Target) -> int | None:
        """``/drop``: the copy removed (its branch published first); see ``ProjectDesk``."""
        return await self.projects.drop(target)

    async def card(self, card_id: int) -> WorkCard | None:
        """Work card ``card_id`` as it is now (its check's latest state)."""
        return await self.sessions.cards.card(card_id)

    async def card_diff(self, card_id: int) -> CardDiff | None:
        """What card ``card_id``'s turn changed, and what moved since (None: no such card)."""
        return await self.sessions.cards.diff(card_id)

    async def check(self, run_id: int) -> CheckRecord | None:
        """A project check's run (a card's 🧪 line), as it is now."""
        return await self.checks.get(run_id)

    def check_log(self, run_id: int) -> Path | None:
        """A check run's whole log, while it is kept."""
        return self.checks.log_path(run_id)

    async def card_summary(self, card_id: int) -> str:
        """The answer of card ``card_id``'s turn: the agent's own summary of its work."""
        return await self.sessions.cards.summary(card_id)

    async def fix_request(self, card_id: int) -> Request | None:
        """🛠 Fix: a request asking card ``card_id``'s agent to fix its failed check, on its
        project, with the failing output (bounded, escaped); None if there is nothing to fix."""
        return await self.sessions.cards.fix_request(card_id)

    async def publish(
        self,
        agent: str,
        project: str,
        *,
        force: bool = False,
        summary: str = "",
        check: str = "",
        commit: str = "",
        preview: PublishPreview | None = None,
    ) -> Published:
        """🚀 Publish: push the agent's branch (``legio/<agent>/…``) and open or update its
        pull request (``legio.forge.publish``). ``force`` only after Caesar confirmed a
        force-push (a ``PushRejected`` with ``non_fast_forward``); ``summary``: the PR's
        title and body; ``check``: the last check's line; ``commit``: exactly that commit of
        the branch (a card's), not its newest; ``preview``: the one Caesar was shown and
        confirmed, posted exactly (the others are then not read). ``ForgeError``/
        ``ProjectError``."""
        return await self.engine.forge.publish(
            agent,
            project,
            force=force,
            summary=summary,
            check=check,
            commit=commit,
            preview=preview,
        )

    async def publish_preview(
        self, agent: str, project: str, *, summary: str = "", check: str = "", commit: str = ""
    ) -> PublishPreview:
        """What 🚀 Publish would post, nothing pushed: the pull request's title and body
        exactly (the agent's words made inert and visible), its branch, base and commit.
        A front-end shows it and passes it back to ``publish`` on Caesar's confirming tap."""
        return await self.engine.forge.publish_preview(
            agent, project, summary=summary, check=check, commit=commit
        )

    def forge_request(self, event: ForgeEvent) -> Request:
        """🛠 Fix / 💬 Address: the request for the agent, in its lane, on the project (the
        forge's words bounded, escaped and marked as not Caesar's)."""
        return Request(fix_text(event), lane=event.agent, project=event.project)

    def forge_follows_reviews(self) -> bool:
        """``[forge] follow_reviews``: a review asking for changes is sent to the agent at
        once (as if 💬 Address were tapped)."""
        return self.config.forge is not None and self.config.forge.follow_reviews

    async def forge_issues(self, project: str, limit: int = 30) -> list[Issue]:
        """``/issues #project``: its open issues, newest first (``ForgeError``)."""
        return await self.engine.forge.issues(project, limit=limit)
