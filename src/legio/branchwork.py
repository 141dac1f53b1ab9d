"""What merging a branch would bring: its commits, files, lines and diff against its merge
base with the base branch, read in the project (Caesar's repository) with Legio's own git.

This is what Caesar would merge, whatever an agent's copy looks like now: its work tree,
its HEAD (the agent may have switched away, or checked an old file out) and its git
internals (a forged commit-graph, a FIFO) play no part. ``branch_work`` is the one reader:
``/diff``, ``/projects`` and anything that later shows a branch's work use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from legio import gitsafe
from legio.errors import ProjectError

MAX_COMMITS = 20
MAX_FILES = 200
DIFF_FLAGS = ("--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=all")


@dataclass(frozen=True)
class Commit:
    short: str  # abbreviated id
    subject: str
    author: str


@dataclass(frozen=True)
class FileChange:
    path: str
    added: int  # -1: binary
    removed: int


@dataclass(frozen=True)
class BranchWork:
    """``branch`` against its merge base with ``base``, in one repository."""

    branch: str
    base: str
    tip: str  # the branch's commit
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
    fork = (
        await gitsafe.run(
            repo, "merge-base", tip, onto, hostile=False, work_tree=False, check=False
        )
    ).strip()
    since = f"{fork}..{tip}" if fork else tip
    counts = await _git(repo, "rev-list", "--count", "--left-right", f"{onto}...{tip}")
    behind, _, ahead = counts.strip().partition("\t")
    log = await _git(
        repo,
        "log",
        f"--max-count={MAX_COMMITS}",
        "--format=%h%x00%an%x00%s",
        "--no-show-signature",
        "-z",
        since,
    )
    fields = log.split("\0")
    commits = [
        Commit(fields[i].strip(), fields[i + 2], fields[i + 1])
        for i in range(0, len(fields) - 2, 3)
    ]
    start = fork or gitsafe.EMPTY_TREE
    numstat = await _git(repo, "diff", *DIFF_FLAGS, "--numstat", "-z", start, tip)
    files, added, removed, count = _numstat(numstat)
    raw, cut = b"", False
    if text:
        code, raw, err = await gitsafe.run_raw(
            repo, "diff", *DIFF_FLAGS, "--stat", "-p", start, tip, hostile=False, work_tree=False
        )
        if code != 0:
            raise ProjectError(f"git diff failed in {repo}: {err}")
        cut = len(raw) >= gitsafe.MAX_OUTPUT
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
    )


def _numstat(out: str) -> tuple[list[FileChange], int, int, int]:
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
        binary = not plus.isdigit()
        added += 0 if binary else int(plus)
        removed += 0 if binary else int(minus)
        if len(files) < MAX_FILES:
            files.append(
                FileChange(path, -1, -1) if binary else FileChange(path, int(plus), int(minus))
            )
    return files, added, removed, count
