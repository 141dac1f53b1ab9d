"""``WorkDoor``: what the door answers about the agents' work on projects: ``/diff``,
``/projects``, ``/drop``, work cards and their checks, and the forge (Publish, CI events,
issues). ``LegioApp.work``; the front-end parts that show this work are given it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from legio.config import Config
from legio.engine import Engine
from legio.errors import ProjectError
from legio.forge.asks import fix_text
from legio.forge.base import Issue
from legio.forge.merging import Merged, MergePlan
from legio.forge.publish import Published, PublishPreview, PullWords
from legio.projects.checks import Checks
from legio.projects.checkwords import check_badge
from legio.projects.overview import DiffReport, ProjectState
from legio.projects.undoing import Kept
from legio.request import (
    CardDiff,
    ForgeEvent,
    Reply,
    Request,
    Watch,
    WorkCard,
)
from legio.sessions.desk import ProjectDesk, Target
from legio.sessions.manager import SessionManager
from legio.sessions.turnback import TurnBack, UndoAsk
from legio.store.checkstore import CheckRecord

Handle = Callable[[Request, Watch], Awaitable[list[Reply]]]  # ``LegioApp.handle_message``


class WorkDoor:
    """Projects, cards, checks and the forge, for the front-ends."""

    def __init__(self, engine: Engine, handle: Handle) -> None:
        self.engine = engine
        self.handle = handle
        self.config: Config = engine.config
        self.sessions: SessionManager = engine.sessions
        self.projects: ProjectDesk = engine.projects
        self.checks: Checks = engine.checks
        self.turnback = TurnBack(engine.sessions, engine.forge.pulls, engine.checks)

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

    async def card_plan(self, card_id: int) -> str | None:
        """📋 Plan: the plan Caesar agreed to before card ``card_id``'s turn (None: none)."""
        return await self.sessions.cards.plan(card_id)

    async def fix_request(self, card_id: int) -> Request | None:
        """🛠 Fix: a request asking card ``card_id``'s agent to fix its failed check, on its
        project, with the failing output (bounded, escaped); None if there is nothing to fix."""
        return await self.sessions.cards.fix_request(card_id)

    async def fix_elsewhere(self, card_id: int) -> str:
        """🛠 Fix asked on a page that shows no answers (the cockpit): the request goes to
        the card's agent now (not awaited), shown where Caesar reads answers
        (``Events.requested``: that agent's lane in Telegram, the console). What to say."""
        card = await self.card(card_id)
        request = await self.fix_request(card_id) if card is not None else None
        if card is None or request is None:
            return "Its check did not fail: nothing to fix."

        async def run(watch: Watch) -> list[Reply]:
            return await self.handle(request, watch)

        self.engine.operations.spawn(
            self.engine.audience.requested(card.agent, run), f"legio-fix-{card_id}"
        )
        return f"🛠 Asked {card.agent} to fix it: the answer comes where you read its answers."

    async def publish_preview(self, card_id: int) -> PublishPreview:
        """What 🚀 Publish of card ``card_id`` would post, nothing pushed: exactly the commit
        that card showed (never newer unseen commits), the pull request's title and body
        (the agent's answer to that turn, made inert and visible) and its check's line,
        worded here and posted only when that check ran on that very commit.
        ``ProjectError`` (no such card), ``ForgeError``."""
        card = await self.sessions.cards.card(card_id)
        if card is None:
            raise ProjectError(f"there is no work card {card_id}")
        check = await self.checks.get(card.check_id) if card.check_id is not None else None
        words = PullWords(
            summary=await self.sessions.cards.summary(card_id),
            check=check_badge(check) if check is not None else "",
            check_commit=check.commit if check is not None and not check.uncommitted else "",
            commit=card.tip,
        )
        return await self.engine.forge.preview(card.agent, card.project, words)

    async def branch_preview(self, agent: str, project: str) -> PublishPreview:
        """What ``/publish <agent> #project`` would post: the agent's branch as it is now,
        its commits' words (no card, so no answer and no check of its)."""
        return await self.engine.forge.preview(agent, project, PullWords())

    async def publish(self, preview: PublishPreview, force: bool = False) -> Published:
        """🚀 Post: push exactly the previewed commit and open or update the pull request
        with exactly the previewed title and body (what Caesar saw and confirmed); refused
        if the branch, its base or the repository changed since. ``force`` only after
        Caesar confirmed a force-push (a ``PushRejected`` with ``non_fast_forward``).
        ``ForgeError``/``ProjectError``."""
        return await self.engine.forge.publish(preview, force=force)

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

    # ---------------------------------------------------------- undo, try again, merge

    async def undo_ask(self, card_id: int) -> UndoAsk:
        """↩️ Undo's question: what undoing card ``card_id`` would do, whether its branch
        is on the forge (ask again, naming it), or why it will not."""
        return await self.turnback.ask(card_id)

    async def undo(self, card_id: int, confirmed: bool = False) -> str:
        """↩️ Undo card ``card_id``'s turn (its work kept); ``confirmed``: Caesar said yes
        to the second question of a published branch. ``ProjectError`` with the reason."""
        return await self.turnback.undo(card_id, confirmed=confirmed)

    async def undone(self) -> list[Kept]:
        """``/undo``: what undo and Try again kept (14 days), newest first."""
        return await self.turnback.kept()

    async def restore(self, card_id: int, nth: int = 1) -> str:
        """``/undo <n>``: card ``n``'s kept work back (``/undo <n>-<nth>``: its ``nth``
        keep, when a Try again kept more of it); ``ProjectError`` with the reason."""
        return await self.turnback.restore(card_id, nth)

    async def try_again(self, card_id: int, model: str | None = None) -> tuple[str, Request]:
        """🔀 Try again: a new branch from card ``card_id``'s start, and its request to
        send again (run it like any request) on ``model`` (a [models] name; None: the
        model that turn was asked on)."""
        return await self.turnback.again(card_id, model)

    async def try_again_models(self, card_id: int) -> tuple[str | None, list[str]]:
        """What 🔀 Try again offers: the model card ``card_id``'s turn was asked on (None:
        the agent's own), and every ``[models]`` name (``ProjectError``: no such card)."""
        return await self.turnback.models(card_id)

    async def merge_plan(self, project: str, number: int) -> MergePlan:
        """✅ Merge's question: the pull request's title, method and head, or the reason
        it will not be merged (CI red or pending, blocked, closed)."""
        return await self.engine.forge.merge_plan(project, number)

    async def merge(self, project: str, number: int, sha: str) -> Merged:
        """✅ Merge after Caesar's confirming tap, for head ``sha`` (its full id) only:
        ``ForgeError`` with the reason when it moved, or CI is not green."""
        merged = await self.engine.forge.merge(project, number, sha)
        plan = merged.plan
        try:  # the copy moves onto the new base between the agent's turns only
            async with self.turnback.idle(plan.agent):
                moved = await self.engine.forge.merger.move_copy(plan)
        except ProjectError as e:
            moved = f"{plan.agent}'s copy of #{project} was not moved onto the new {plan.base}: {e}"
        return replace(merged, moved=moved)
