"""The projects desk: what ``/diff``, ``/projects`` and ``/drop`` ask of the engine.

``resolve`` turns Caesar's words (``vorenus #app``, ``app vorenus``, or fewer when only
one agent or one project fits) into an agent and a project, or says what is missing.
``drop`` refuses while the agent works in that copy (``/stop`` it first) and closes its
CLI when it was started there, so the next request starts it in the new copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from legio.errors import ProjectError
from legio.projects.checks import Checks
from legio.projects.copies import Projects
from legio.projects.overview import DiffReport, ProjectState, copy_work, diff, overview
from legio.sessions.manager import SessionManager


@dataclass(frozen=True)
class Target:
    agent: str
    project: str


class ProjectDesk:
    """Admin commands about projects, over the sessions' ``Projects``."""

    def __init__(self, sessions: SessionManager, checks: Checks | None = None) -> None:
        self.sessions = sessions
        self.projects: Projects = sessions.projects
        self.checks = checks  # each copy's last check, in /projects

    def names(self) -> list[str]:
        return self.projects.names()

    def resolve(self, words: str, usage: str) -> Target:
        """The agent and project ``words`` name; ``ProjectError`` (with ``usage``) if
        they name none, or too few to tell."""
        if not self.projects.names():
            raise ProjectError(
                "No projects yet: add one to legio.toml ([projects.<name>] with path = "
                '"/path/to/repo") and restart Legio. docs/projects.md shows how.'
            )
        roster = self.sessions.castra.roster().names
        agent = project = None
        for word in words.split():
            name = word.lstrip("#@").lower()
            if word.startswith("#") or (name in self.projects.names() and not word.startswith("@")):
                if name not in self.projects.names():
                    raise ProjectError(
                        f"#{name} is not a project; the projects: {self.projects.listing()}"
                    )
                project = name
            elif name in roster:
                agent = name
            else:
                raise ProjectError(
                    f"{word!r} is neither a centurio ({', '.join(roster) or 'none'}) nor a "
                    f"project ({self.projects.listing()}). Use {usage}"
                )
        if project is None:
            if len(self.projects.names()) != 1:
                raise ProjectError(f"Which project: {self.projects.listing()}? Use {usage}")
            project = self.projects.names()[0]
        if agent is None:
            having = [a for a, _ in self.projects.copies(project)]
            if len(having) != 1:
                who = ", ".join(having) if having else "no centurio has a copy yet"
                raise ProjectError(f"Whose work on #{project} ({who})? Use {usage}")
            agent = having[0]
        return Target(agent, project)

    async def diff(self, target: Target) -> DiffReport | None:
        """``/diff``: the agent's work on the project, or None if it has no copy of it."""
        if not self.projects.copy_dir(target.agent, target.project).exists():
            return None
        return await diff(self.projects, await self.projects.place(target.agent, target.project))

    async def overview(self) -> list[ProjectState]:
        return await overview(self.projects, self.checks)

    async def drop(self, target: Target) -> int | None:
        """``/drop``: remove the agent's copy, its branch published into the project first
        (so no commit is lost); None if it had none, else how many uncommitted changes went
        with it. ``ProjectError`` while the agent works in it."""
        copy = self.projects.copy_dir(target.agent, target.project)
        slot = self.sessions.slot(target.agent)
        here = slot.session is not None and slot.session.cwd == copy
        if here and slot.state == "working":
            raise ProjectError(
                f"{target.agent} is working in its copy of #{target.project} now: "
                f"/stop {target.agent} first, or wait for its answer"
            )
        if not copy.exists():
            return None
        if here:
            await slot.close("its project copy was dropped")
        if self.checks is not None:  # its check would run on files that go now
            await self.checks.cancel(target.agent, target.project, "its copy was dropped")
        place = await self.projects.place(target.agent, target.project)
        await self.projects.publish(place)  # a ProjectError keeps the copy
        left = await copy_work(place)
        await self.projects.drop(target.agent, target.project)
        return left.count
