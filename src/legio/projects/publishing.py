"""Publishing an agent's branch into the project: measured first, then fetched by its id.

After each turn (and before ``/diff``, ``/projects`` and ``/drop`` read it), the agent's
branch is brought from its copy into the project with ``git fetch`` run in the project.
Before that, what the fetch would add is measured in the copy: ``git rev-list --objects
--disk-usage <tip>`` minus everything the project's own refs reach (their ids read in the
project, never the copy's ``refs/remotes``, which the agent writes). Over ``[projects]
max_publish_mb`` the branch is not published and the error says so. The fetch then asks
for that very commit (``+<id>:refs/heads/<branch>``), so the branch cannot be moved to a
bigger commit between the measure and the fetch. Both run with no commit-graph (a forged
one names other trees, and would make the measure small) and ``COPY_TIMEOUT_S``. The pack
is kept as received (``fetch.unpackLimit=1``): unpacked, 95 deltas of one 1 MB file would
take 95 MB. After the fetch, the project's branch must name the measured commit (a
``shallow`` file in the copy makes git drop the ref and exit 0): else it is not published.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from legio.errors import ProjectError
from legio.projects import gitsafe
from legio.projects.branchwork import tip_of

logger = logging.getLogger(__name__)

MB = 1024 * 1024
# The copy's side of `git fetch` (upload-pack) gets no settings from the environment
# (git clears them for a local transport): they are given on its command line.
UPLOAD_PACK = (
    "git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c core.alternateRefsCommand= "
    "-c core.commitGraph=false -c core.multiPackIndex=false -c uploadpack.allowFilter=false "
    "-c uploadpack.allowAnySHA1InWant=true upload-pack"
)
# Keep the pack as it came: loose objects are each stored whole (a delta undone).
KEEP_PACK = (("fetch.unpackLimit", "1"), ("transfer.unpackLimit", "1"))
BRANCH = re.compile(r"legio/[a-z][a-z0-9_-]{0,31}/[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")


def agents_branch(branch: str, agent: str) -> bool:
    """Whether ``branch`` is one Legio publishes for ``agent``: ``legio/<agent>/…``, in
    plain characters."""
    return bool(
        BRANCH.fullmatch(branch) and ".." not in branch and branch.startswith(f"legio/{agent}/")
    )


async def copy_tip(copy: Path, branch: str) -> str:
    """The commit ``refs/heads/<branch>`` names in the agent's copy, or ""."""
    out = await gitsafe.run(
        copy,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"refs/heads/{branch}^{{commit}}",
        work_tree=False,
        check=False,
    )
    return out.strip()


async def incoming_bytes(repo: Path, copy: Path, tip: str) -> int:
    """The disk size of the objects ``tip`` reaches in ``copy`` that none of ``repo``'s
    refs reaches: what fetching it would add to ``repo``."""
    refs = await gitsafe.run(
        repo, "for-each-ref", "--format=%(objectname)", hostile=False, work_tree=False
    )
    known = "".join(f"^{oid}\n" for oid in sorted(set(refs.split())))
    out = await gitsafe.run(
        copy,
        "rev-list",
        "--objects",
        "--disk-usage",
        tip,
        "--stdin",
        work_tree=False,
        given=known.encode(),
    )
    try:
        return int(out.strip())
    except ValueError:
        raise ProjectError(f"cannot measure {tip[:12]} in {copy}: git said {out[:200]!r}") from None


async def publish(
    repo: Path, copy: Path, agent: str, branch: str, base: str, max_mb: float
) -> bool:
    """Fetch ``branch`` from ``copy`` into ``repo`` when it moved; whether it did.
    ``ProjectError`` when it cannot be read or is over ``max_mb`` (then it is not)."""
    if not agents_branch(branch, agent):
        return False  # a branch of its own naming: not Legio's to publish
    mine = await copy_tip(copy, branch)
    if not mine:
        return False
    theirs = await tip_of(repo, branch)
    start = await tip_of(repo, base)
    if mine == theirs or (not theirs and mine == start):
        return False
    size = await incoming_bytes(repo, copy, mine)
    if size > max_mb * MB:
        raise ProjectError(
            f"{branch} is not published: its commits would bring {size / MB:,.1f} MB into "
            f"{repo}, over the limit of {max_mb:g} MB ([projects] max_publish_mb in legio.toml)"
        )
    gitsafe.checked(gitsafe.git_dir_of(copy), index=False)  # upload-pack reads it next
    ref = f"refs/heads/{branch}"
    await gitsafe.run(
        repo,
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--no-auto-maintenance",
        "--upload-pack",
        UPLOAD_PACK,
        str(copy),
        f"+{mine}:{ref}",
        hostile=False,
        work_tree=False,
        local_transport=True,
        limit_s=gitsafe.COPY_TIMEOUT_S,
        settings=KEEP_PACK,
    )
    now = await tip_of(repo, branch)
    if now != mine:
        raise ProjectError(
            f"{branch} is not published: git fetched {mine[:12]} from {copy} but "
            f"{repo} names {now[:12] or 'nothing'} (a shallow or broken copy?)"
        )
    logger.info("%s: %s is now in %s (%d bytes brought)", agent, branch, repo, size)
    return True
