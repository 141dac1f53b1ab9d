"""Projects: Caesar's git repositories, each centurio working in its own copy on its own branch.

A project is a ``[projects.<name>]`` table of ``legio.toml`` (``path``, optional ``base``).
A request is put on one by a ``#name`` in its text (``pick``), else by the agent's
frontmatter ``project:``. The first request that puts centurio ``vorenus`` on project
``app`` makes its copy: ``castra/centuriones/vorenus/projects/app/``, a ``git clone
--shared`` of the project (the project's objects borrowed read-only through
``objects/info/alternates``, so the project's ``.git`` is never in the agent's reach),
on branch ``legio/vorenus/<base>`` (continuing that branch if the project already has
it, from an earlier copy), with the project's own remotes (pushes ask Caesar) and the
agent as the commits' author. The clone is made in a ``.part`` folder and renamed into
place, so a full disk or a kill leaves nothing half-made. After each turn, ``publish``
fetches the agent's branch into the project (``git fetch`` run in the project; the
copy's side runs with its own code switched off): Caesar sees it with his own tools.

Every git command here goes through ``legio.projects.gitsafe`` (the copy is the agent's: nothing
its config names is ever run). See docs/projects.md and docs/security.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import stat
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from legio.castra import Castra
from legio.config import Config
from legio.errors import ProjectError
from legio.fence.policy import Protected
from legio.projects import gitsafe, publishing
from legio.settings.projects import ProjectSettings

logger = logging.getLogger(__name__)

COPIES = "projects"  # castra/centuriones/<agent>/projects/<project>/
ORIGIN = "project"  # the copy's remote that is the project's own checkout
# #name, not glued to a word before it (C#, a#b) nor followed by more of a name
TAG = re.compile(r"(?<![\w#&/])#([A-Za-z][A-Za-z0-9_-]{0,31})(?![\w-])")
# Inside the sandbox, the CLI masks these names in the working directory (with /dev/null,
# so no command can create them): git would show them as new files and `git add -A` take
# them. Ignored in each copy (a tracked file stays tracked).
SANDBOX_EXCLUDES = "".join(
    f"/{name}\n"
    for name in (
        ".bash_profile", ".bashrc", ".claude/", ".gitconfig", ".gitmodules", ".idea",
        ".mcp.json", ".profile", ".ripgreprc", ".vscode", ".zprofile", ".zshrc",
    )
)  # fmt: skip
PLANS = ".plans"  # plan mode's plan files, in the agent's working directory (legio.sessions.spec)
PLANS_EXCLUDE = f"/{PLANS}/\n"  # ignored in each copy: never committed, never on a card
COPY_REASON = (
    "your copy's git settings, hooks and borrowed objects are Legio's to keep: "
    "work on the files and commit; ask Caesar for anything else"
)
CHECKOUT_REASON = (
    "the project's own checkout is Caesar's: you work in your copy (your working "
    "directory), on your branch; Legio shows him your commits"
)


def find_tags(text: str) -> list[str]:
    """The ``#names`` in ``text``, lowercased, first mention first, no repeats."""
    return list(dict.fromkeys(m.group(1).lower() for m in TAG.finditer(text)))


def exclude_plans(copy: Path) -> None:
    """``PLANS_EXCLUDE`` in ``copy``'s ``.git/info/exclude`` if not there yet (no link
    followed; a failure is logged: the plans would then show as new files on its card)."""
    info = copy / ".git" / "info"
    try:
        if not stat.S_ISDIR(os.lstat(info).st_mode):
            raise OSError(f"{info} is not a folder")
        path = info / "exclude"
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
        fd = os.open(path, flags, 0o644)
        with os.fdopen(fd, "r+", encoding="utf-8") as exclude:
            if not stat.S_ISREG(os.fstat(exclude.fileno()).st_mode):
                raise OSError(f"{path} is not a file")
            text = exclude.read()
            if PLANS_EXCLUDE.strip() not in text.splitlines():
                exclude.write(("\n" if text and not text.endswith("\n") else "") + PLANS_EXCLUDE)
    except (OSError, UnicodeDecodeError) as e:
        logger.warning("%s: %s/ not ignored in the copy: %s", copy, PLANS, e)


def branch_for(agent: str, base: str) -> str:
    return f"legio/{agent}/{base}"


@dataclass(frozen=True)
class Place:
    """An agent on a project: its copy, its branch, and where it started from."""

    project: str
    agent: str
    repo: Path  # the project's own checkout
    base: str
    branch: str  # the agent's branch: what Legio publishes and shows
    copy: Path
    head: str = ""  # the branch the copy is on ("": detached, or HEAD unreadable)

    @property
    def elsewhere(self) -> bool:
        """Whether the copy's HEAD is not on the agent's branch (switched away)."""
        return self.head != self.branch

    def attributes(self) -> dict[str, str]:
        """What the agent's current message says about where it works."""
        return {"project": self.project, "branch": self.branch, "base": self.base}

    def fence(self) -> list[Protected]:
        """What the agent on this copy may read but not write: the project's checkout,
        and its copy's git settings, hooks and borrowed-objects list."""
        git = self.copy / ".git"
        return [
            Protected(self.repo, read=True, write=False, reason=CHECKOUT_REASON, folder=True),
            Protected(git / "config", read=True, write=False, reason=COPY_REASON),
            Protected(git / "hooks", read=True, write=False, reason=COPY_REASON, folder=True),
            Protected(git / "info", read=True, write=False, reason=COPY_REASON, folder=True),
            Protected(
                git / "objects" / "info" / "alternates", read=True, write=False, reason=COPY_REASON
            ),  # git gc writes the rest of objects/info
        ]


def checkout_fence(config: Config) -> list[Protected]:
    """Every project's checkout, read-only for every agent (granted folders included);
    one that is gone has nothing to protect (and a rule for a missing path could keep the
    sandbox from starting)."""
    return [
        Protected(p.path, read=True, write=False, reason=CHECKOUT_REASON, folder=True)
        for p in config.projects.values()
        if p.path.exists()
    ]


def head_of(copy: Path) -> str:
    """The branch the copy's ``.git/HEAD`` names, read without git (no link followed, a
    FIFO not waited on); "" when detached or not a plain file."""
    path = copy / ".git" / "HEAD"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        text = os.read(fd, 4096).decode(errors="replace")
    finally:
        os.close(fd)
    ref = text.strip()
    return ref.removeprefix("ref: refs/heads/") if ref.startswith("ref: refs/heads/") else ""


class Projects:
    """The configured projects and the agents' copies of them."""

    def __init__(self, config: Config, castra: Castra) -> None:
        self.config = config
        self.castra = castra
        gitsafe.set_memory_limit(config.project_options.git_memory_mb)
        self._locks: defaultdict[tuple[str, str], asyncio.Lock] = defaultdict(asyncio.Lock)
        self._unpublished: dict[tuple[str, str], str] = {}  # why a branch is not published

    def names(self) -> list[str]:
        return sorted(self.config.projects)

    def listing(self) -> str:
        return ", ".join(f"#{n}" for n in self.names()) or "none"

    def pick(self, text: str) -> tuple[str | None, str | None]:
        """The project a message's ``#name`` puts it on, and what is wrong (unknown or
        several names). Without configured projects, a ``#word`` is just a word."""
        if not self.config.projects:
            return None, None
        tags = find_tags(text)
        unknown = [t for t in tags if t not in self.config.projects]
        known = [t for t in tags if t in self.config.projects]
        if unknown:
            which = ", ".join(f"#{t}" for t in unknown)
            return None, (
                f"{which} is not a project. The projects: {self.listing()} "
                "([projects.<name>] in legio.toml). Nothing was sent."
            )
        if len(known) > 1:
            return None, (
                f"One project per request, not {', '.join(f'#{t}' for t in known)}: "
                "send one message for each."
            )
        return (known[0] if known else None), None

    def settings(self, name: str) -> ProjectSettings:
        try:
            return self.config.projects[name]
        except KeyError:
            raise ProjectError(
                f"#{name} is not a project; the projects: {self.listing()} "
                "([projects.<name>] in legio.toml)"
            ) from None

    def copy_dir(self, agent: str, name: str) -> Path:
        return self.castra.centurio_dir(agent).resolve() / COPIES / name

    def unlinked(self, agent: str, name: str) -> Path:
        """``copy_dir``, each part of it below the centurio's folder looked at (``lstat``):
        ``ProjectError`` naming one that is a link (the agent swapped its copy for a link to
        another repository) or not a folder."""
        copy = self.copy_dir(agent, name)
        for part in (copy.parent, copy):
            try:
                mode = os.lstat(part).st_mode
            except FileNotFoundError:
                break
            except OSError as e:
                raise ProjectError(f"{part} cannot be read ({e.strerror})") from e
            if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
                what = "a link" if stat.S_ISLNK(mode) else "not a folder"
                raise ProjectError(
                    f"{part} is {what}: Legio does not follow it (a copy is a folder in the "
                    f"agent's own; remove it, or /drop {agent} {name})"
                )
        return copy

    def copies(self, name: str) -> list[tuple[str, Path]]:
        """(agent, copy) of every copy of project ``name`` there is."""
        found = []
        for folder in sorted(self.castra.centuriones_dir.glob(f"*/{COPIES}/{name}")):
            if folder.is_dir():
                found.append((folder.parent.parent.name, folder.resolve()))
        return found

    async def repository(self, name: str) -> tuple[Path, str]:
        """Project ``name``'s checkout and base branch, checked: ``ProjectError`` if the
        path is gone, no repository, or has no such base branch."""
        settings = self.settings(name)
        repo = settings.path
        if not repo.is_dir():
            raise ProjectError(f"#{name}: {repo} is gone; fix [projects.{name}] path in legio.toml")
        try:
            gitsafe.git_dir_of(repo)
        except ProjectError as e:
            raise ProjectError(f"#{name}: {e}; fix [projects.{name}] path in legio.toml") from e
        base = settings.base
        if not base:
            base = (
                await gitsafe.run(
                    repo,
                    "symbolic-ref",
                    "--quiet",
                    "--short",
                    "HEAD",
                    hostile=False,
                    work_tree=False,
                    check=False,
                )
            ).strip()
            if not base:
                raise ProjectError(
                    f"#{name}: {repo} is on no branch (detached HEAD); set "
                    f'[projects.{name}] base = "main" (or another branch) in legio.toml'
                )
        if not await self.revision(repo, f"refs/heads/{base}", hostile=False):
            raise ProjectError(f"#{name}: the base branch {base!r} is not in {repo}")
        return repo, base

    @staticmethod
    async def revision(repo: Path, ref: str, *, hostile: bool = True) -> str:
        """The commit ``ref`` names in ``repo``, or "" if none."""
        out = await gitsafe.run(
            repo,
            "rev-parse",
            "--verify",
            "--quiet",
            f"{ref}^{{commit}}",
            hostile=hostile,
            work_tree=False,
            check=False,
        )
        return out.strip()

    async def place(self, agent: str, name: str) -> Place:
        """Agent ``agent``'s copy of project ``name``, made if it has none yet."""
        async with self._locks[agent, name]:
            repo, base = await self.repository(name)
            copy = self.unlinked(agent, name)
            if copy.exists():
                gitsafe.git_dir_of(copy)  # a broken copy says so (and /drop starts over)
                exclude_plans(copy)  # a copy made before plans were written in it
                head = head_of(copy)
                branch = head if publishing.agents_branch(head, agent) else branch_for(agent, base)
                return Place(name, agent, repo, base, branch, copy, head)
            return await self._make_copy(agent, name, repo, base, copy)

    async def _make_copy(self, agent: str, name: str, repo: Path, base: str, copy: Path) -> Place:
        branch = branch_for(agent, base)
        copy.parent.mkdir(parents=True, exist_ok=True)
        for stale in copy.parent.glob(f".{name}.part-*"):  # a clone a kill cut off
            shutil.rmtree(stale, ignore_errors=True)
        part = copy.parent / f".{name}.part-{uuid.uuid4().hex[:8]}"
        try:
            await gitsafe.clone_shared(repo, part, ORIGIN)
            kept = await self.revision(part, f"refs/remotes/{ORIGIN}/{branch}", hostile=False)
            start = f"{ORIGIN}/{branch}" if kept else f"{ORIGIN}/{base}"
            code, _, err = await gitsafe.run_raw(
                part, "checkout", "--quiet", "--no-track", "-b", branch, start
            )  # hostile: the agent wrote the files of a branch it kept
            if code != 0 or "error:" in err:  # git 2.39 says a missing object and exits 0
                raise ProjectError(f"checking out {start} in a copy of #{name} failed: {err}")
            settings = [("user.name", f"{agent} (Legio)"), ("user.email", f"{agent}@legio.invalid")]
            for remote, url in await self._remotes(repo):
                if remote != ORIGIN:
                    settings.append((f"remote.{remote}.url", url))
                    settings.append(
                        (f"remote.{remote}.fetch", f"+refs/heads/*:refs/remotes/{remote}/*")
                    )
            for key, value in settings:
                await gitsafe.run(part, "config", key, value, hostile=False, work_tree=False)
            with (part / ".git" / "info" / "exclude").open("a", encoding="utf-8") as exclude:
                exclude.write(SANDBOX_EXCLUDES + PLANS_EXCLUDE)
            os.rename(part, copy)
        except BaseException:
            shutil.rmtree(part, ignore_errors=True)
            raise
        logger.info("%s: made its copy of #%s on %s (from %s)", agent, name, branch, start)
        return Place(name, agent, repo, base, branch, copy, branch)

    @staticmethod
    async def _remotes(repo: Path) -> list[tuple[str, str]]:
        out = await gitsafe.run(
            repo,
            "config",
            "--get-regexp",
            r"^remote\..*\.url$",
            hostile=False,
            work_tree=False,
            check=False,
        )
        found = []
        for line in out.splitlines():
            key, _, url = line.partition(" ")
            found.append((key.removeprefix("remote.").removesuffix(".url"), url))
        return found

    async def publish(self, place: Place) -> bool:
        """Bring the agent's branch into the project when it moved (a turn committed);
        whether it did (``legio.projects.publishing``). The copy's branch is the agent's own: a
        rewritten history replaces the project's copy of that branch, never any other
        branch. ``ProjectError`` (kept for ``unpublished``) when it cannot be, or is too big."""
        key = place.agent, place.project
        async with self._locks[key]:
            try:
                limit = self.config.project_options.max_publish_mb
                done = await publishing.publish(
                    place.repo, place.copy, place.agent, place.branch, place.base, limit
                )
            except ProjectError as e:
                self._unpublished[key] = str(e)
                raise
            self._unpublished.pop(key, None)
            return done

    def unpublished(self, agent: str, name: str) -> str | None:
        """Why the agent's last publishing on project ``name`` failed, if it did."""
        return self._unpublished.get((agent, name))

    async def publish_quietly(self, place: Place) -> None:
        """``publish``, a failure only logged (Caesar checked the branch out, say) and
        kept for ``/projects`` and ``/diff``."""
        try:
            await self.publish(place)
        except ProjectError as e:
            logger.warning("%s: its branch is not in #%s: %s", place.agent, place.project, e)

    async def drop(self, agent: str, name: str) -> bool:
        """Remove agent's copy of project ``name`` (its branch stays in the project)."""
        self.settings(name)
        async with self._locks[agent, name]:
            copy = self.copy_dir(agent, name)
            if copy.is_symlink():  # the link goes, never what it points at
                try:
                    self.unlinked(agent, name)
                except ProjectError as e:
                    if not str(e).startswith(f"{copy} is a link"):
                        raise  # its projects folder is a link too: touch nothing
                copy.unlink()
                return True
            self.unlinked(agent, name)  # never a folder reached through a link
            if not copy.exists():
                return False
            trash = copy.parent / f".{name}.part-drop-{uuid.uuid4().hex[:8]}"
            os.rename(copy, trash)  # gone at once; the files go after
            await asyncio.to_thread(shutil.rmtree, trash, True)
            return True
