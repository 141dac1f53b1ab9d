"""What Caesar sees of the agents' work on projects: ``/diff``, ``/projects`` and ``legio check``.

``diff`` compares an agent's copy with where its branch left the project's base: the
commits on the branch, and every change to the files since (committed or not; new files
not yet added are named). ``overview`` lists each project with each agent's copy: ahead
and behind the base, uncommitted changes, the last commit. Every git command runs
through ``legio.gitsafe`` (no pager, external diff, textconv, filter or hook of the
agent's runs); the diff itself is made with ``--no-ext-diff --no-textconv``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from legio import gitsafe
from legio.castra import Castra
from legio.config import Config
from legio.errors import ProjectError
from legio.names import NAME
from legio.projects import Place, Projects

MAX_COMMITS = 20
DIFF_FLAGS = ("--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=all")


@dataclass(frozen=True)
class DiffReport:
    """One agent's work on one project, for ``/diff``."""

    place: Place
    commits: list[str]  # "abc1234 subject", newest first (at most MAX_COMMITS)
    ahead: int
    behind: int
    files: int
    added: int
    removed: int
    untracked: list[str]
    text: str  # the full diff (cut at gitsafe.MAX_OUTPUT)
    cut: bool = False


@dataclass(frozen=True)
class CopyState:
    agent: str
    branch: str
    ahead: int
    behind: int
    uncommitted: int
    last: str  # the last commit's subject
    problem: str | None = None


@dataclass(frozen=True)
class ProjectState:
    name: str
    path: Path
    base: str
    copies: list[CopyState] = field(default_factory=list)
    problem: str | None = None


async def _count(copy: Path, spec: str) -> int:
    out = await gitsafe.run(copy, "rev-list", "--count", spec, work_tree=False)
    return int(out.strip() or 0)


async def _fork_point(place: Place) -> tuple[str, str]:
    """The base's commit now, and where the agent's branch left it."""
    base = await Projects.revision(place.repo, f"refs/heads/{place.base}", hostile=False)
    if not base:
        raise ProjectError(f"#{place.project}: the base branch {place.base!r} is gone")
    out = await gitsafe.run(place.copy, "merge-base", base, "HEAD", work_tree=False, check=False)
    return base, out.strip() or base


async def diff(place: Place) -> DiffReport:
    """``/diff``: the agent's copy against the point its branch left the base."""
    base, fork = await _fork_point(place)
    log = await gitsafe.run(
        place.copy,
        "log",
        f"--max-count={MAX_COMMITS}",
        "--format=%h %s",
        "--no-show-signature",
        f"{fork}..HEAD",
        work_tree=False,
    )
    numstat = await gitsafe.run(place.copy, "diff", *DIFF_FLAGS, "--numstat", fork)
    added = removed = files = 0
    for line in numstat.splitlines():
        plus, minus, _ = line.split("\t", 2)
        files += 1
        added += int(plus) if plus.isdigit() else 0
        removed += int(minus) if minus.isdigit() else 0
    code, raw, err = await gitsafe.run_raw(place.copy, "diff", *DIFF_FLAGS, "--stat", "-p", fork)
    if code != 0:
        raise ProjectError(f"git diff failed in {place.copy}: {err}")
    untracked = await gitsafe.run(place.copy, "ls-files", "--others", "--exclude-standard")
    return DiffReport(
        place=place,
        commits=log.splitlines(),
        ahead=await _count(place.copy, f"{fork}..HEAD"),
        behind=await _count(place.copy, f"{fork}..{base}"),
        files=files,
        added=added,
        removed=removed,
        untracked=untracked.splitlines(),
        text=raw.decode(errors="replace"),
        cut=len(raw) >= gitsafe.MAX_OUTPUT,
    )


async def copy_state(place: Place) -> CopyState:
    try:
        base, fork = await _fork_point(place)
        status = await gitsafe.run(place.copy, "status", "--porcelain", "--ignore-submodules=all")
        last = await gitsafe.run(
            place.copy,
            "log",
            "-1",
            "--format=%s",
            "--no-show-signature",
            "HEAD",
            work_tree=False,
            check=False,
        )
        return CopyState(
            agent=place.agent,
            branch=place.branch,
            ahead=await _count(place.copy, f"{fork}..HEAD"),
            behind=await _count(place.copy, f"{fork}..{base}"),
            uncommitted=len(status.splitlines()),
            last=last.strip(),
        )
    except ProjectError as e:
        return CopyState(place.agent, place.branch, 0, 0, 0, "", problem=str(e))


async def overview(projects: Projects) -> list[ProjectState]:
    """``/projects``: every project, and every agent's copy of it."""
    states = []
    for name in projects.names():
        path = projects.settings(name).path
        try:
            repo, base = await projects.repository(name)
        except ProjectError as e:
            states.append(ProjectState(name, path, projects.settings(name).base, problem=str(e)))
            continue
        copies = []
        for agent, _ in projects.copies(name):
            try:
                place = await projects.place(agent, name)
            except ProjectError as e:
                copies.append(CopyState(agent, "", 0, 0, 0, "", problem=str(e)))
                continue
            copies.append(await copy_state(place))
        states.append(ProjectState(name, repo, base, copies))
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
            lines.append(("bad", f"project {e}"))
            continue
        if not os_readable(repo):
            lines.append(("bad", f"project #{name}: {repo} is not readable by Legio's user"))
            continue
        copies = ", ".join(agent for agent, _ in projects.copies(name)) or "no copies yet"
        lines.append(("ok", f"project #{name}: {repo} (base {base}; {copies})"))
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
                    lines.append(("warn", f"{prompt.name}'s add_dirs {folder} holds project "
                                          f"#{name}: read-only to agents; ask for work on it "
                                          f"with #{name}"))  # fmt: skip
    return lines


def os_readable(path: Path) -> bool:
    return os.access(path, os.R_OK | os.X_OK) and os.access(path / ".git", os.R_OK | os.X_OK)
