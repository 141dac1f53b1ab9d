"""What one turn did to an agent's work on a project: the facts a work card shows.

Before the turn, ``mark`` notes the agent's branch as the project holds it (published
after the previous turn; read by Legio's own git in the project, never in the copy) and a
fingerprint of what the copy holds uncommitted. After the turn, once the branch is
published again, ``measure`` compares: the commits the branch gained (``from_tip`` ..
``to_tip``, read in the project), the files and lines they change, and whether the
uncommitted work changed — and keeps that uncommitted diff as it was then, so a card
tapped later shows this turn's work, not whatever the copy holds by then. Nothing changed:
no card. Git on the copy goes through ``legio.projects.gitsafe`` (checked, bounded, nothing
of the agent's run).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from legio.errors import ProjectError
from legio.projects import gitsafe
from legio.projects.branchwork import DIFF_FLAGS, span, tip_of
from legio.projects.copies import Place

MAX_UNTRACKED = 50  # new files named on a card's diff


@dataclass(frozen=True)
class Mark:
    """The agent's work on a project as a turn found it."""

    tip: str  # the branch in the project ("": not there yet)
    base_tip: str  # the base branch's tip: where a branch not yet published starts
    dirt: str  # a fingerprint of the copy's uncommitted work
    kept: str = ""  # that work as a commit in the copy (legio.projects.undoing), when any

    @property
    def dirty(self) -> bool:
        return self.dirt != Uncommitted().fingerprint


@dataclass(frozen=True)
class Uncommitted:
    """What the copy holds that is not committed, read in the copy (bounded)."""

    count: int = 0  # entries (changed, staged, new)
    diff: bytes = b""  # ``git diff HEAD``: tracked files' changes
    untracked: list[str] = field(default_factory=list)  # new files, by name
    problem: str | None = None

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256(self.diff)
        for name in self.untracked:
            digest.update(b"\0" + name.encode(errors="replace"))
        digest.update(str(self.count).encode())
        return digest.hexdigest()


@dataclass(frozen=True)
class TurnWork:
    """What a turn changed: its commits, and the copy's uncommitted work after it."""

    from_tip: str
    to_tip: str
    commits: int
    files: int
    added: int
    removed: int
    uncommitted: Uncommitted


async def uncommitted(place: Place) -> Uncommitted:
    """The copy's uncommitted work (``git status`` and ``git diff HEAD`` in the copy)."""
    try:
        code, out, err = await gitsafe.run_raw(
            place.copy, "status", "--porcelain=v1", "-z", "--ignore-submodules=all"
        )
        if code != 0:
            return Uncommitted(problem=f"git status failed in {place.copy}: {err}")
        count, untracked = 0, list[str]()
        items = iter(out.split(b"\0"))
        for item in items:
            if len(item) < 4:
                continue
            count += 1
            if item[:1] in (b"R", b"C"):
                next(items, b"")  # a rename's old name
            if item[:2] == b"??" and len(untracked) < MAX_UNTRACKED:
                untracked.append(item[3:].decode(errors="replace"))
        hidden = await _hidden_from_status(place)
        count += len(hidden)
        untracked += [f"{name} (marked unchanged: git status does not show it)" for name in hidden]
        diff = b""
        if count:
            code, diff, err = await gitsafe.run_raw(
                place.copy, "diff", *DIFF_FLAGS, "-M", "-p", "HEAD"
            )
            if code != 0:  # no commit at all yet: nothing tracked to compare
                diff = b""
    except ProjectError as e:
        return Uncommitted(problem=str(e))
    return Uncommitted(count, diff, untracked)


async def _hidden_from_status(place: Place) -> list[str]:
    """Files the copy's index marks ``skip-worktree`` or ``assume-unchanged``: changed or
    not, ``git status`` and ``git diff`` pass them over, so a card names them apart."""
    code, out, _ = await gitsafe.run_raw(place.copy, "ls-files", "-v", "-z")
    if code != 0:
        return []
    found = []
    for item in out.split(b"\0"):
        if len(item) > 2 and (item[:1] == b"S" or item[:1].islower()):
            found.append(item[2:].decode(errors="replace"))
            if len(found) >= MAX_UNTRACKED:
                break
    return found


async def mark(place: Place) -> Mark:
    """The agent's branch and uncommitted work before a turn."""
    return Mark(
        await tip_of(place.repo, place.branch),
        await tip_of(place.repo, place.base),
        (await uncommitted(place)).fingerprint,
    )


async def measure(place: Place, before: Mark) -> TurnWork | None:
    """What the turn changed since ``before`` (the branch published first), or None when it
    changed nothing. ``ProjectError`` when the project cannot be read."""
    tip = await tip_of(place.repo, place.branch)
    after = await uncommitted(place)
    if tip == before.tip and after.fingerprint == before.dirt:
        return None
    start = before.tip or before.base_tip
    if tip and start:
        work = await span(place.repo, start, tip)
        commits, files, added, removed = work.commits, work.file_count, work.added, work.removed
    else:
        commits = files = added = removed = 0
    return TurnWork(start, tip or start, commits, files, added, removed, after)
