"""What Caesar sees of the agents' work on projects: ``/diff``, ``/projects`` and ``legio check``.

``diff`` shows what Caesar would merge: the agent's branch as published in the project
(brought over first, when it moved), what merging it brings into the base, read in the
project by ``legio.projects.branchwork``; never the copy's HEAD or work tree, which the agent
can move anywhere. What the copy holds that is not committed is listed apart, as such, and
a copy whose HEAD is on another branch says so. ``overview`` lists each project with each
agent's branch the same way (ahead, behind, the last commit), and the agent's other
``legio/<agent>/*`` branches in the project, and each copy's last check
(``legio.projects.checks``) when the project has one. Git on a copy goes through
``legio.projects.gitsafe`` (checked first, a short timeout, nothing of the agent's run).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from legio.castra import Castra
from legio.config import Config
from legio.errors import ProjectError
from legio.fence.checklimits import CheckLimits, limit_support, limits_said
from legio.fence.jail import jail_support
from legio.names import NAME
from legio.projects import gitsafe
from legio.projects.branchwork import BranchWork, agent_branches, branch_work
from legio.projects.checks import Checks
from legio.projects.copies import Place, Projects
from legio.store.checkstore import CheckRecord
from legio.visible import visible_name

MAX_LISTED = 20  # uncommitted entries named


@dataclass(frozen=True)
class CopyWork:
    """What the agent's copy holds beyond its branch: read in the copy, bounded."""

    head: str  # the branch its HEAD is on ("": detached, or HEAD unreadable)
    uncommitted: list[str] = field(default_factory=list)  # "M path", at most MAX_LISTED
    count: int = 0  # every uncommitted entry (changed, staged, new)
    problem: str | None = None  # why it could not be read


@dataclass(frozen=True)
class DiffReport:
    """One agent's work on one project, for ``/diff``."""

    place: Place
    work: BranchWork | None  # the branch in the project; None: it is not there
    copy: CopyWork
    unpublished: str | None = None  # why the copy's branch could not be brought over

    @property
    def text(self) -> str:
        """The diff Caesar would merge (cut at gitsafe.MAX_OUTPUT)."""
        return self.work.text if self.work is not None else ""


@dataclass(frozen=True)
class CopyState:
    """One agent's branch in ``/projects``."""

    agent: str
    branch: str
    ahead: int
    behind: int
    uncommitted: int
    last: str  # the branch's last commit's subject
    problem: str | None = None
    head: str = ""  # the branch the copy is on
    published: bool = False  # the branch is in the project
    unpublished: str | None = None  # why its last publishing failed
    others: list[tuple[str, int]] = field(default_factory=list)  # its other branches, ahead
    check: CheckRecord | None = None  # its last check (when the project has one)


@dataclass(frozen=True)
class ProjectState:
    name: str
    path: Path
    base: str
    copies: list[CopyState] = field(default_factory=list)
    problem: str | None = None
    check: str | None = None  # the project's check command, if it has one


async def copy_work(place: Place) -> CopyWork:
    """The copy's HEAD and what it holds that is not committed (``git status``, bounded)."""
    try:
        code, out, err = await gitsafe.run_raw(
            place.copy, "status", "--porcelain=v1", "-z", "--ignore-submodules=all"
        )
    except ProjectError as e:
        return CopyWork(place.head, problem=str(e))
    if code != 0:
        return CopyWork(place.head, problem=f"git status failed in {place.copy}: {err}")
    listed: list[str] = []
    count = 0
    items = iter(out.decode(errors="replace").split("\0"))
    for item in items:
        if len(item) < 4:
            continue
        count += 1
        if item[0] in "RC":
            next(items, "")  # a rename's old name
        if len(listed) < MAX_LISTED:
            listed.append(f"{item[:2].strip()} {item[3:]}")
    return CopyWork(place.head, listed, count)


async def _publish(projects: Projects, place: Place) -> str | None:
    """The branch brought into the project if it moved; why not, if it could not be."""
    try:
        await projects.publish(place)
    except ProjectError as e:
        return str(e)
    return None


async def diff(projects: Projects, place: Place) -> DiffReport:
    """``/diff``: what merging the agent's branch in the project brings into the base
    (published first), and the copy's uncommitted work apart."""
    unpublished = await _publish(projects, place)
    work = await branch_work(place.repo, place.branch, place.base)
    return DiffReport(place, work, await copy_work(place), unpublished)


async def copy_state(projects: Projects, place: Place) -> CopyState:
    unpublished = await _publish(projects, place)
    try:
        work = await branch_work(place.repo, place.branch, place.base, text=False)
    except ProjectError as e:
        return CopyState(place.agent, place.branch, 0, 0, 0, "", problem=str(e), head=place.head)
    copy = await copy_work(place)
    others = await agent_branches(place.repo, place.agent, place.base)
    return CopyState(
        agent=place.agent,
        branch=place.branch,
        ahead=work.ahead if work else 0,
        behind=work.behind if work else 0,
        uncommitted=copy.count,
        last=work.commits[0].subject if work and work.commits and work.ahead else "",
        problem=copy.problem,
        head=place.head,
        published=work is not None,
        unpublished=unpublished,
        others=[(b, n) for b, n in others if b != place.branch],
    )


async def _state_of(projects: Projects, agent: str, name: str) -> CopyState:
    try:
        place = await projects.place(agent, name)
    except ProjectError as e:
        return CopyState(agent, "", 0, 0, 0, "", problem=str(e))
    return await copy_state(projects, place)


async def _with_check(state: CopyState, checks: Checks | None, name: str) -> CopyState:
    """``state`` with the copy's last check, when the project has a check."""
    if checks is None or not checks.configured(name):
        return state
    return dataclasses.replace(state, check=await checks.last(state.agent, name))


async def overview(projects: Projects, checks: Checks | None = None) -> list[ProjectState]:
    """``/projects``: every project, and every agent's branch in it (copies read in
    parallel: one slow copy holds up no other), with each copy's last check."""
    states = []
    for name in projects.names():
        path = projects.settings(name).path
        command = checks.command(name) if checks is not None else None
        try:
            repo, base = await projects.repository(name)
        except ProjectError as e:
            states.append(ProjectState(name, path, projects.settings(name).base, problem=str(e)))
            continue
        agents = [agent for agent, _ in projects.copies(name)]
        copies = await asyncio.gather(*(_state_of(projects, a, name) for a in agents))
        copies = [await _with_check(c, checks, name) for c in copies]
        states.append(ProjectState(name, repo, base, copies, check=command))
    return states


async def check_projects(config: Config, castra: Castra) -> list[tuple[str, str]]:
    """``legio check``'s lines about ``[projects]``, as (mark, text)."""
    projects = Projects(config, castra)
    lines: list[tuple[str, str]] = []
    root = castra.root.resolve()
    for name in projects.names():
        path = projects.settings(name).path
        if path == root or root in path.parents or path in root.parents:
            lines.append(
                (
                    "bad",
                    f"project #{name}: {path} overlaps the castra; "
                    "a project must be a repository outside it",
                )
            )
            continue
        try:
            repo, base = await projects.repository(name)
        except ProjectError as e:
            lines.append(("bad", visible_name(f"project {e}")))
            continue
        if not os_readable(repo):
            lines.append(("bad", f"project #{name}: {repo} is not readable by Legio's user"))
            continue
        copies = ", ".join(agent for agent, _ in projects.copies(name)) or "no copies yet"
        lines.append(("ok", visible_name(f"project #{name}: {repo} (base {base}; {copies})")))
        lines += check_line(projects, name)
    lines += granted_projects(castra, projects)
    for prompt in castra.roster().centuriones.values():
        wanted = prompt.settings.project
        if wanted and wanted not in config.projects:
            lines.append(
                (
                    "bad",
                    f"{prompt.path}: project {wanted!r} is not in [projects] "
                    f"(the projects: {projects.listing()})",
                )
            )
        elif wanted and not NAME.match(wanted):
            lines.append(("bad", f"{prompt.path}: project {wanted!r} is not a project name"))
    return lines


def check_line(projects: Projects, name: str) -> list[tuple[str, str]]:
    """``legio check``'s line about project ``name``'s check: the command and its time,
    or why it cannot run (no bubblewrap: checks never run unsandboxed)."""
    settings = projects.settings(name)
    if not settings.check:
        return []
    support = jail_support()
    timeout = f"{settings.check_timeout:g} min"
    if not support.available:
        return [("bad", f"project #{name}: its check cannot run: {support.detail}")]
    held = limit_support(support.detail, support.userns)
    whole = held.processes and held.memory and held.tmp
    return [
        (
            "ok",
            visible_name(
                f"project #{name}: check `{settings.check}` (on a clean tree of the commit, "
                f"sandboxed, no network, killed after {timeout})"
            ),
        ),
        (
            "ok" if whole else "warn",
            f"project #{name}: its check's {limits_said(CheckLimits.of(projects.config), held)}",
        ),
    ]


def granted_projects(castra: Castra, projects: Projects) -> list[tuple[str, str]]:
    """A project inside (or holding) a folder an agent's ``add_dirs`` grants: read-only
    to agents now, which its owner should know."""
    lines = []
    for prompt in castra.roster().centuriones.values():
        for folder in prompt.settings.add_dirs:
            granted = Path(folder).expanduser().resolve()
            for name in projects.names():
                path = projects.settings(name).path
                if granted == path or path in granted.parents or granted in path.parents:
                    lines.append(
                        (
                            "warn",
                            f"{prompt.name}'s add_dirs {folder} holds project "
                            f"#{name}: read-only to agents; ask for work on it "
                            f"with #{name}",
                        )
                    )
    return lines


def os_readable(path: Path) -> bool:
    return os.access(path, os.R_OK | os.X_OK) and os.access(path / ".git", os.R_OK | os.X_OK)
