"""What merging a branch would bring: its commits, files, lines and diff, read in the
project (Caesar's repository) with Legio's own git.

The diff is the base's tip against the tree ``git merge-tree --write-tree`` makes of the
merge (its objects written to a temporary folder, never the project): a merge-base diff
would lie for a branch with two merge bases (a merge of the base's own history that takes
a fix out shows only what it adds). When the merge conflicts, the diff is the first merge
base's against the tip, and said so. A submodule (gitlink) change is a file change.

This is what Caesar would merge, whatever an agent's copy looks like now: its work tree,
its HEAD (the agent may have switched away, or checked an old file out) and its git
internals (a forged commit-graph, a FIFO) play no part. ``branch_work`` is the one reader:
``/diff``, ``/projects`` and anything that later shows a branch's work use it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from legio.errors import ProjectError
from legio.projects import gitsafe

MAX_COMMITS = 20
MAX_FILES = 200
DIFF_FLAGS = ("--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=none")
GITLINK = "160000"


@dataclass(frozen=True)
class Commit:
    short: str  # abbreviated id
    subject: str
    author: str


@dataclass(frozen=True)
class FileChange:
    path: str
    added: int  # -1: binary (or over core.bigFileThreshold)
    removed: int
    submodule: str = ""  # a gitlink: the commit it names now ("" if removed)
    gitlink: bool = False


@dataclass(frozen=True)
class BranchWork:
    """What merging ``branch`` into ``base`` brings, in one repository."""

    branch: str
    base: str
    tip: str  # the branch's commit (its full id: merge it by id)
    merge_base: str  # "" when they share no history
    ahead: int  # commits on the branch the base does not have
    behind: int  # commits on the base since the branch left it
    commits: list[Commit] = field(default_factory=list)  # newest first, at most MAX_COMMITS
    files: list[FileChange] = field(default_factory=list)  # at most MAX_FILES
    file_count: int = 0
    added: int = 0
    removed: int = 0
    text: str = ""  # the whole diff (cut at gitsafe.MAX_OUTPUT), when asked for
    cut: bool = False
    merge_bases: int = 1  # more than one: a merge-base diff would not be what merging brings
    conflicts: bool = False  # merging conflicts: the diff is merge base..tip instead


async def _git(repo: Path, *args: str) -> str:
    return await gitsafe.run(repo, *args, hostile=False, work_tree=False)


async def tip_of(repo: Path, branch: str) -> str:
    """The commit ``refs/heads/<branch>`` names in ``repo``, or "" if there is none."""
    out = await gitsafe.run(
        repo,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"refs/heads/{branch}^{{commit}}",
        hostile=False,
        work_tree=False,
        check=False,
    )
    return out.strip()


async def agent_branches(repo: Path, agent: str, base: str) -> list[tuple[str, int]]:
    """Every ``legio/<agent>/*`` branch in ``repo`` with how many commits it has that
    ``base`` lacks (at most MAX_COMMITS branches): what Caesar could merge of the agent's."""
    out = await _git(
        repo,
        "for-each-ref",
        f"--count={MAX_COMMITS}",
        "--format=%(refname)",
        f"refs/heads/legio/{agent}/",
    )
    found = []
    for ref in out.splitlines():
        name = ref.removeprefix("refs/heads/")
        count = await _git(repo, "rev-list", "--count", f"refs/heads/{base}..{ref}")
        found.append((name, int(count.strip() or 0)))
    return found


async def branch_work(
    repo: Path, branch: str, base: str, *, text: bool = True
) -> BranchWork | None:
    """What merging ``branch`` into ``base`` would bring, read in ``repo``; None if
    ``repo`` has no such branch. ``text=False`` leaves the diff itself out."""
    tip = await tip_of(repo, branch)
    if not tip:
        return None
    onto = await tip_of(repo, base)
    if not onto:
        raise ProjectError(f"the base branch {base!r} is not in {repo}")
    bases = (
        await gitsafe.run(
            repo, "merge-base", "--all", tip, onto, hostile=False, work_tree=False, check=False
        )
    ).split()
    fork = bases[0] if bases else ""
    counts = await _git(repo, "rev-list", "--count", "--left-right", f"{onto}...{tip}")
    behind, _, ahead = counts.strip().partition("\t")
    log = await _git(
        repo,
        "log",
        f"--max-count={MAX_COMMITS}",
        "--format=%h%x00%an%x00%s",
        "--no-show-signature",
        "-z",
        f"^{onto}",
        tip,
    )
    fields = log.split("\0")
    commits = [
        Commit(fields[i].strip(), fields[i + 2], fields[i + 1])
        for i in range(0, len(fields) - 2, 3)
    ]
    with tempfile.TemporaryDirectory(prefix="legio-merge-") as objects:
        diff = _Differ(repo, Path(objects))
        merged = await diff.merged(onto, tip)
        start, end = (onto, merged) if merged else (fork or gitsafe.EMPTY_TREE, tip)
        numstat = await diff.run("--numstat", "-z", start, end)
        links = _gitlinks(await diff.run("--raw", "-z", "--no-abbrev", start, end))
        raw, cut = b"", False
        if text:
            code, raw, err = await diff.raw("diff", *DIFF_FLAGS, "--stat", "-p", start, end)
            if code != 0:
                raise ProjectError(f"git diff failed in {repo}: {err}")
            cut = len(raw) >= gitsafe.MAX_OUTPUT
    files, added, removed, count = _numstat(numstat, links)
    return BranchWork(
        branch=branch,
        base=base,
        tip=tip,
        merge_base=fork,
        ahead=int(ahead or 0),
        behind=int(behind or 0),
        commits=commits,
        files=files,
        file_count=count,
        added=added,
        removed=removed,
        text=raw.decode(errors="replace"),
        cut=cut,
        merge_bases=len(bases),
        conflicts=not merged,
    )


class _Differ:
    """Diffs of an agent's branch in ``repo``: the short timeout (it chose the content),
    the merge's objects in ``objects``."""

    def __init__(self, repo: Path, objects: Path) -> None:
        self.repo, self.objects = repo, objects

    async def raw(self, *args: str) -> tuple[int, bytes, str]:
        return await gitsafe.run_raw(
            self.repo,
            *args,
            hostile=False,
            work_tree=False,
            limit_s=gitsafe.COPY_TIMEOUT_S,
            objects=self.objects,
        )

    async def run(self, *args: str) -> str:
        code, out, err = await self.raw("diff", *DIFF_FLAGS, *args)
        if code != 0:
            raise ProjectError(f"git diff failed in {self.repo}: {err}")
        return out.decode(errors="replace")

    async def merged(self, onto: str, tip: str) -> str:
        """The tree merging ``tip`` into ``onto`` makes, or "" when it conflicts."""
        code, out, err = await self.raw(
            "merge-tree",
            "--write-tree",
            "--no-messages",
            "--allow-unrelated-histories",
            onto,
            tip,
        )
        if code not in (0, 1):
            raise ProjectError(f"git merge-tree failed in {self.repo}: {err}")
        return out.decode(errors="replace").split("\n", 1)[0].strip() if code == 0 else ""


def _gitlinks(out: str) -> dict[str, str]:
    """``git diff --raw -z``'s submodule entries: path → the commit it names now ("" when
    removed)."""
    links: dict[str, str] = {}
    items = iter(out.split("\0"))
    for item in items:
        if not item.startswith(":"):
            continue
        old_mode, new_mode, _, new, status = item[1:].split(" ", 4)
        path = next(items, "")
        if status[:1] in "RC":
            path = next(items, "")
        if GITLINK in (old_mode, new_mode):
            links[path] = new if new_mode == GITLINK else ""
    return links


def _numstat(out: str, links: dict[str, str]) -> tuple[list[FileChange], int, int, int]:
    """``git diff --numstat -z``: (the first MAX_FILES files, lines added, removed, files).
    A rename is "added\\tremoved\\t" then the old and the new name, each ended by NUL."""
    files: list[FileChange] = []
    added = removed = count = 0
    items = iter(out.split("\0"))
    for item in items:
        if not item:
            continue
        plus, minus, path = item.split("\t", 2)
        if not path:  # a rename: the old name, then the new one
            next(items, "")
            path = next(items, "")
        count += 1
        if path in links:
            if len(files) < MAX_FILES:
                files.append(FileChange(path, 0, 0, links[path], gitlink=True))
            continue
        binary = not plus.isdigit()
        added += 0 if binary else int(plus)
        removed += 0 if binary else int(minus)
        if len(files) < MAX_FILES:
            files.append(
                FileChange(path, -1, -1) if binary else FileChange(path, int(plus), int(minus))
            )
    return files, added, removed, count


@dataclass(frozen=True)
class Span:
    """What changed between two commits of the project (one turn's work)."""

    commits: int
    files: list[FileChange]
    file_count: int
    added: int
    removed: int


async def span(repo: Path, start: str, end: str) -> Span:
    """The commits ``end`` has that ``start`` lacks, and the files and lines from ``start``
    to ``end``, read in ``repo`` (the agent chose the content: the copy's short timeout)."""
    count = await _git(repo, "rev-list", "--count", end, f"^{start}")
    with tempfile.TemporaryDirectory(prefix="legio-span-") as objects:
        diff = _Differ(repo, Path(objects))
        numstat = await diff.run("--numstat", "-z", start, end)
        links = _gitlinks(await diff.run("--raw", "-z", "--no-abbrev", start, end))
    files, added, removed, file_count = _numstat(numstat, links)
    return Span(int(count.strip() or 0), files, file_count, added, removed)


async def span_text(repo: Path, start: str, end: str) -> bytes:
    """The whole diff from ``start`` to ``end`` in ``repo`` (cut at gitsafe.MAX_OUTPUT), as
    git wrote it: bytes, for a renderer to decode file by file."""
    with tempfile.TemporaryDirectory(prefix="legio-span-") as objects:
        code, raw, err = await _Differ(repo, Path(objects)).raw(
            "diff", *DIFF_FLAGS, "-M", "-p", start, end
        )
    if code != 0:
        raise ProjectError(f"git diff failed in {repo}: {err}")
    return raw
