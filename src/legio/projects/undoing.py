"""Undoing a turn on a project, in git: the work kept, the branch and copy put back.

``keep`` makes one commit of the copy's work as it is (its HEAD's tree with every
uncommitted change and new file, not the ignored ones), through an index file of Legio's
own (the copy's index untouched), with the turn's tip as its parent, and fetches it into
the project under ``refs/legio/undo/<agent>/<card id>`` — or, when that card's work is
kept there already (an undo, then a 🔀 Try again of the same card), the first free
``…/<card id>-<n>`` (n ≥ 2): a keep never overwrites another, the ref is created only
if it does not exist (``update-ref <ref> <new> ""``). These are refs of Legio's, in
Caesar's repository, which no agent writes. The commit's message names the card, the
branch and the two commits of the turn, so ``kept`` lists them (each with its ref:
``label`` is what ``/undo <label>`` takes) and ``restore`` brings one back without any
other record; ``prune`` goes by each kept commit's own date, never by its name.
``rewind`` moves the copy (``reset --hard`` then ``clean -fd``:
ignored files stay) and the project's branch back to the turn's start; ``fork`` starts a
new branch there instead. ``prune`` removes what was kept longer than ``KEEP_DAYS``.
Every git goes through ``legio.projects.gitsafe`` (no hooks, no filters, no global
config); the project's branch moves only with its old value given (``update-ref <new>
<old>``), so a branch that moved meanwhile is refused, never overwritten.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from legio.errors import ProjectError
from legio.projects import gitsafe
from legio.projects.branchwork import tip_of
from legio.projects.copies import Place
from legio.projects.publishing import KEEP_PACK, MB, UPLOAD_PACK, incoming_bytes

ROOT = "refs/legio/undo"
KEEP_DAYS = 14
IDENTITY = (("user.name", "Legio"), ("user.email", "legio@legio.invalid"))
FIELDS = ("card", "agent", "project", "branch", "from", "to", "uncommitted")


@dataclass(frozen=True)
class Kept:
    """A turn's work kept by an undo (or a Try again): ``commit`` holds it all."""

    card: int
    agent: str
    project: str
    branch: str
    from_tip: str
    to_tip: str
    uncommitted: int  # changes that were not committed (in ``commit`` over ``to_tip``)
    commit: str
    kept_at: float  # seconds since the epoch
    ref: str = ""  # where it is kept (``kept`` reads it; ``keep`` chooses a free one)

    @property
    def nth(self) -> int:
        """Which keep of its card this is: 1 for ``…/<card>``, n for ``…/<card>-<n>``."""
        _, _, n = self.ref.rpartition("/")[2].partition("-")
        return int(n) if n.isdigit() else 1

    @property
    def label(self) -> str:
        """What ``/undo`` takes to bring this one back: ``7``, or ``7-2`` for a second."""
        return str(self.card) if self.nth == 1 else f"{self.card}-{self.nth}"


def ref_of(agent: str, card: int, nth: int = 1) -> str:
    return f"{ROOT}/{agent}/{card}" + (f"-{nth}" if nth > 1 else "")


async def free_ref(repo: Path, agent: str, card: int) -> str:
    """The first ref of card ``card`` nothing is kept under yet in ``repo``."""
    taken = set(
        (await _project(repo, "for-each-ref", "--format=%(refname)", f"{ROOT}/{agent}/")).split()
    )
    nth = 1
    while ref_of(agent, card, nth) in taken:
        nth += 1
    return ref_of(agent, card, nth)


async def _project(repo: Path, *args: str, check: bool = True) -> str:
    return await gitsafe.run(repo, *args, hostile=False, work_tree=False, check=check)


async def head_tip(place: Place) -> str:
    """The commit the copy's HEAD names ("" when it has none)."""
    out = await gitsafe.run(
        place.copy,
        "rev-parse",
        "--verify",
        "--quiet",
        "HEAD^{commit}",
        work_tree=False,
        check=False,
    )
    return out.strip()


def note_of(kept: Kept) -> str:
    """The kept commit's message: the card, and the fields ``kept`` reads back."""
    values = (
        kept.card,
        kept.agent,
        kept.project,
        kept.branch,
        kept.from_tip,
        kept.to_tip,
        kept.uncommitted,
    )
    head = f"Legio undo: card {kept.card} of {kept.agent} on #{kept.project}\n\n"
    return head + "".join(f"legio-{n}: {v}\n" for n, v in zip(FIELDS, values, strict=True))


async def snapshot(place: Place, note: str) -> str:
    """One commit of the copy's work as it is (its HEAD's tree with every uncommitted change
    and new file, not the ignored ones; parent HEAD), made through an index of Legio's own
    and written in the copy's objects; its id. ``ProjectError`` when it cannot be."""
    head = await head_tip(place)
    if not head:
        raise ProjectError(f"{place.agent}'s copy of #{place.project} has no commit to keep")
    with tempfile.TemporaryDirectory(prefix="legio-undo-") as folder:
        index = Path(folder) / "index"
        await gitsafe.run(place.copy, "read-tree", head, index=index)
        await gitsafe.run(place.copy, "add", "--all", "--", ".", index=index)
        tree = (await gitsafe.run(place.copy, "write-tree", index=index)).strip()
    out = await gitsafe.run(
        place.copy,
        "commit-tree",
        tree,
        "-p",
        head,
        "-m",
        note,
        work_tree=False,
        settings=IDENTITY,
    )
    return out.strip()


async def tree_of(place: Place, commit: str) -> str:
    """The tree of ``commit`` in the copy ("" if it has none)."""
    out = await gitsafe.run(
        place.copy,
        "rev-parse",
        "--verify",
        "--quiet",
        f"{commit}^{{tree}}",
        work_tree=False,
        check=False,
    )
    return out.strip()


async def unpack(place: Place, commit: str, base: str) -> None:
    """``commit``'s files into the copy as uncommitted work over ``base`` (the copy is clean
    at ``base``): its new files untracked, its changes unstaged."""
    await gitsafe.run(place.copy, "read-tree", "-u", "--reset", commit)
    await gitsafe.run(place.copy, "reset", "--quiet", base)  # the files stay as they are


async def keep(place: Place, kept: Kept, max_mb: float) -> str:
    """The copy's work (committed and not) as one commit, fetched into the project under a
    ref of its own (``free_ref``: never one that keeps something already); its id.
    ``ProjectError`` when it cannot be (then nothing moved)."""
    commit = await snapshot(place, note_of(kept))
    size = await incoming_bytes(place.repo, place.copy, commit)
    if size > max_mb * MB:
        raise ProjectError(
            f"the work of card {kept.card} would bring {size / MB:,.1f} MB into {place.repo}, "
            f"over [projects] max_publish_mb ({max_mb:g} MB): nothing was undone"
        )
    gitsafe.checked(gitsafe.git_dir_of(place.copy), index=False)
    await gitsafe.run(
        place.repo,
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--no-auto-maintenance",
        "--upload-pack",
        UPLOAD_PACK,
        str(place.copy),
        commit,  # its objects only: the ref is created below, never overwritten
        hostile=False,
        work_tree=False,
        local_transport=True,
        limit_s=gitsafe.COPY_TIMEOUT_S,
        settings=KEEP_PACK,
    )
    ref = await free_ref(place.repo, kept.agent, kept.card)
    code, _, err = await gitsafe.run_raw(
        place.repo,
        "update-ref",
        "-m",
        "legio: undo keeps",
        ref,
        commit,
        "",  # only if it does not exist
        hostile=False,
        work_tree=False,
    )
    if code != 0:
        raise ProjectError(f"the work of card {kept.card} could not be kept in {place.repo}: {err}")
    return commit


async def _copy_to(place: Place, commit: str) -> None:
    """The copy's branch, index and files at ``commit``; new files not ignored removed."""
    await gitsafe.run(place.copy, "reset", "--hard", "--quiet", commit)
    await gitsafe.run(place.copy, "clean", "-f", "-d", "-q")


async def _move_branch(repo: Path, branch: str, new: str, old: str) -> None:
    """``refs/heads/<branch>`` from ``old`` to ``new`` in the project, or ``ProjectError``
    if it no longer names ``old``. A branch not in the project (never published: no turn
    committed on it) stays absent."""
    if not old:
        return
    code, _, err = await gitsafe.run_raw(
        repo,
        "update-ref",
        "-m",
        "legio: undo",
        f"refs/heads/{branch}",
        new,
        old,
        hostile=False,
        work_tree=False,
    )
    if code != 0:
        raise ProjectError(f"{branch} moved in {repo} meanwhile: {err}")


async def rewind(place: Place, kept: Kept) -> None:
    """The branch (in the copy and the project) and the copy's files back at the turn's
    start. The caller checked the copy is on the branch at ``kept.to_tip``."""
    published = await tip_of(place.repo, kept.branch)
    old = kept.to_tip if published else ""  # moved meanwhile: update-ref refuses, stop
    await _move_branch(place.repo, kept.branch, kept.from_tip, old)
    await _copy_to(place, kept.from_tip)


async def fork(place: Place, start: str, agent: str) -> str:
    """A new branch ``legio/<agent>/try-<n>`` at ``start`` (the first free ``n`` ≥ 2), the
    copy switched to it with its files at ``start``; its name."""
    taken = await _project(
        place.repo, "for-each-ref", "--format=%(refname:short)", f"refs/heads/legio/{agent}/"
    )
    n = 2
    while f"legio/{agent}/try-{n}" in taken.split() or await _copy_has(place, agent, n):
        n += 1
    branch = f"legio/{agent}/try-{n}"
    await _copy_to(place, "HEAD")
    await gitsafe.run(place.copy, "checkout", "--quiet", "--no-track", "-b", branch, start)
    return branch


async def _copy_has(place: Place, agent: str, n: int) -> bool:
    out = await gitsafe.run(
        place.copy,
        "rev-parse",
        "--verify",
        "--quiet",
        f"refs/heads/legio/{agent}/try-{n}",
        work_tree=False,
        check=False,
    )
    return bool(out.strip())


async def restore(place: Place, kept: Kept) -> None:
    """Card ``kept.card``'s work back: its branch at the turn's end in the project and the
    copy (checked out), its uncommitted work uncommitted again, the kept ref removed. The
    caller checked the copy is clean and the branch is where the undo left it."""
    now = await tip_of(place.repo, kept.branch)
    await gitsafe.run(place.copy, "checkout", "--quiet", "-B", kept.branch, kept.to_tip)
    await _copy_to(place, kept.to_tip)
    if kept.uncommitted:
        await unpack(place, kept.commit, kept.to_tip)
    await _move_branch(place.repo, kept.branch, kept.to_tip, now)
    await drop(place.repo, kept.ref)


async def drop(repo: Path, ref: str) -> None:
    await _project(repo, "update-ref", "-d", ref)


async def kept(repo: Path) -> list[Kept]:
    """Everything kept in ``repo``, newest first."""
    out = await _project(
        repo,
        "for-each-ref",
        "--sort=-committerdate",
        "--format=%(refname) %(objectname) %(committerdate:unix)%00%(contents)%00",
        ROOT,
    )
    found = []
    parts = out.split("\0")
    for i in range(0, len(parts) - 1, 2):
        ref, commit, when = [*parts[i].strip().split(" "), "", ""][:3]
        values = dict(
            line.removeprefix("legio-").split(": ", 1)
            for line in parts[i + 1].splitlines()
            if line.startswith("legio-") and ": " in line
        )
        if any(name not in values for name in FIELDS):
            continue
        try:
            found.append(
                Kept(
                    int(values["card"]),
                    values["agent"],
                    values["project"],
                    values["branch"],
                    values["from"],
                    values["to"],
                    int(values["uncommitted"]),
                    commit,
                    float(when or 0),
                    ref,
                )
            )
        except ValueError:
            continue
    return found


async def prune(repo: Path, now: float | None = None, days: float = KEEP_DAYS) -> int:
    """Remove what ``repo`` kept longer than ``days``; how many."""
    limit = (time.time() if now is None else now) - days * 86400
    gone = 0
    for item in await kept(repo):
        if item.kept_at < limit:
            await drop(repo, item.ref)
            gone += 1
    return gone
