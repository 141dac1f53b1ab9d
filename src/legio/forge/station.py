"""The forge, wired: the client, the pull requests' store, Publish and the CI follower.

``ForgeStation.open(config, projects, praetorium)`` makes the GitHub client when
``[forge]`` is configured (the token from ``legio.fence.vault``, read once), else a
station that answers every forge question with a ``ForgeError`` naming the fix. The CI
follower starts with the first subscriber (``follow``): an event is never told to nobody
(the pull requests wait in the store until someone listens, after a restart too). What
Caesar waits for (Publish, issues) runs in ``caesar_waits()``: a long rate limit is an
answer saying until when, not a wait; the follower alone waits it out.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from legio.config import Config
from legio.errors import ForgeError
from legio.fence.vault import forge_token
from legio.forge.base import Forge, Issue
from legio.forge.ci import CiFollower
from legio.forge.forgetools import Confirm, forge_tools
from legio.forge.github import GitHub
from legio.forge.merging import Merged, MergePlan, Merger
from legio.forge.publish import Published, Publisher, PublishPreview, PullWords
from legio.forge.transport import caesar_waits
from legio.projects.copies import Projects
from legio.request import ForgeCallback
from legio.store.praetorium import Praetorium
from legio.store.pullstore import PullStore

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import SdkMcpTool

logger = logging.getLogger(__name__)

Notify = Callable[[str], Awaitable[None]]
NO_FORGE = "no forge: add [forge] to legio.toml (docs/configuration.md) and restart"


class ForgeStation:
    """See the module docstring."""

    def __init__(
        self, config: Config, projects: Projects, pulls: PullStore, forge: Forge | None, token: str
    ) -> None:
        self.config = config
        self.projects = projects
        self.pulls = pulls
        self.forge = forge
        self.publisher = Publisher(config, projects, forge, pulls, token)
        self.merger = Merger(projects, forge, pulls, self.publisher.repo_name, token)  # ✅ Merge
        self.follower: CiFollower | None = None
        if forge is not None and config.forge is not None:
            self.follower = CiFollower(
                forge,
                pulls,
                interval_s=config.forge.poll_seconds,
                max_interval_s=max(config.forge.max_poll_seconds, config.forge.poll_seconds),
            )
        self.notify: Notify | None = None
        self.confirm: Confirm | None = None  # the approval gate's (legio.engine): writes ask
        self._started = False

    @classmethod
    def open(cls, config: Config, projects: Projects, praetorium: Praetorium) -> ForgeStation:
        token = forge_token(config)
        forge: Forge | None = None
        if config.forge is not None:
            forge = GitHub(config.forge.api_url, token, notify=None)
        station = cls(config, projects, PullStore(praetorium), forge, token)
        if isinstance(forge, GitHub):
            forge.set_notify(station._notice)
        return station

    async def _notice(self, text: str) -> None:
        if self.notify is not None:
            await self.notify(text)

    def required(self) -> Forge:
        if self.forge is None:
            raise ForgeError("", NO_FORGE)
        return self.forge

    async def publish(self, preview: PublishPreview, *, force: bool = False) -> Published:
        """Post exactly ``preview`` (``Publisher.publish``) and follow its pull request."""
        self.required()
        with caesar_waits():
            done = await self.publisher.publish(preview, force=force)
        if self.follower is not None and self._started and done.record is not None:
            self.follower.follow(done.record)
        return done

    async def preview(self, agent: str, project: str, words: PullWords) -> PublishPreview:
        """What ``publish`` would post (``Publisher.preview``): nothing pushed."""
        self.required()
        with caesar_waits():
            return await self.publisher.preview(agent, project, words)

    async def merge_plan(self, project: str, number: int) -> MergePlan:
        """What ✅ Merge would do (``Merger.plan``): nothing merged."""
        return await self.merger.plan(project, number)

    async def merge(self, project: str, number: int, sha: str) -> Merged:
        """✅ Merge, confirmed by Caesar for head ``sha`` (``Merger.merge``)."""
        return await self.merger.merge(project, number, sha)

    async def follow(self, callback: ForgeCallback) -> Callable[[], None]:
        """Subscribe ``callback`` to forge events; the follower starts with the first."""
        if self.follower is None:
            return lambda: None
        unsubscribe = self.follower.subscribe(callback)
        if not self._started:
            self._started = True
            await self.follower.start()
        return unsubscribe

    async def issues(self, project: str, *, since: str = "", limit: int = 30) -> list[Issue]:
        forge = self.required()
        with caesar_waits():
            name = await self.publisher.repo_name(project)
            return await forge.issues(name, since=since, limit=limit)

    async def issue(self, project: str, number: int) -> Issue:
        forge = self.required()
        with caesar_waits():
            return await forge.issue(await self.publisher.repo_name(project), number)

    def tools_for(self, agent: str, project: str) -> list[SdkMcpTool[Any]]:
        """The read-only forge tools of an agent working on ``project`` (none without a
        forge or for an unknown project)."""
        if self.forge is None or project not in self.config.projects:
            return []
        return forge_tools(
            self.forge, project, self.publisher.repo_name, agent, self.pulls, self.confirm
        )

    async def close(self) -> None:
        if self.follower is not None:
            await self.follower.stop()
        if self.forge is not None:
            await self.forge.close()
