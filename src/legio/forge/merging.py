"""✅ Merge: a pull request Legio opened, merged on the forge after Caesar's confirming tap.

``plan`` reads the pull request and the CI of its head *now*: it refuses (``refusal``, a
sentence) a pull request Legio did not open or that is closed, one whose head or base the
forge names otherwise than Legio recorded when it opened it (``pulls``: the agent's own
``legio/<agent>/…`` branch of the recorded repository, into the recorded base), a CI that
is red, still running or absent, a forge that says the merge is blocked (a required review or check
missing: ``mergeable_state`` "blocked") or conflicts ("dirty"), and a method the
repository does not allow. The method is the project's ``merge`` (legio.toml), else the
forge's: the first the repository allows of merge, squash, rebase (GitHub's own order).
``merge`` plans again, refuses a head that is not the one Caesar was shown (``sha``, the
full id of the commit CI passed on), and asks the forge to merge *that* commit (``sha``
in the request: GitHub answers 409 when the head moved meanwhile). After the merge, the
forge's base is fetched into the project as ``refs/legio/base/<base>`` and the agent's
copy moves onto it — only when the copy is clean, on the merged branch, with nothing
after the merged commit; else it is left as it is, and said why. Every ref written after a
merge is named from the record, never from the forge's answer, and only Legio's: the
agent's branch and ``refs/legio/base/…`` (Caesar's own branches are never written).

``ci_files``: the files of the CI's own configuration (``CI_PATHS``) the head changes since
it left Caesar's base, read with Legio's own git in the project, so a green made by the
agent's edit of the workflow that judged it is said in the confirmation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from legio.errors import ForgeError, ProjectError
from legio.forge.base import Forge, PullRequest
from legio.forge.push import fetch_base, push_target, remote_url
from legio.forge.transport import caesar_waits
from legio.projects import gitsafe
from legio.projects.branchwork import DIFF_FLAGS, tip_of
from legio.projects.copies import Projects
from legio.projects.publishing import agents_branch
from legio.projects.turnwork import uncommitted
from legio.store.pullstore import PullRecord, PullStore
from legio.visible import visible

logger = logging.getLogger(__name__)
ORDER = ("merge", "squash", "rebase")  # the forge's default: its first allowed
CI_PATHS = (  # what configures a forge's or a CI service's runs (a folder: all under it)
    ".github/workflows",
    ".github/actions",
    ".gitlab-ci.yml",
    ".gitlab/ci",
    ".circleci",
    ".travis.yml",
    ".drone.yml",
    ".woodpecker.yml",
    ".woodpecker",
    ".buildkite",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    "Jenkinsfile",
)


@dataclass(frozen=True)
class MergePlan:
    """What ✅ Merge would do (``refusal``: why it will not)."""

    project: str
    number: int
    agent: str = ""
    title: str = ""
    url: str = ""
    branch: str = ""
    base: str = ""
    sha: str = ""  # the head CI passed on: the one merged
    method: str = ""
    refusal: str = ""
    ci_files: tuple[str, ...] = ()  # CI configuration the branch changes (``CI_PATHS``)
    ci_unread: bool = False  # the head is not in the project: ``ci_files`` could not be read


@dataclass(frozen=True)
class Merged:
    plan: MergePlan
    commit: str  # what the merge made on the base
    moved: str  # the agent's copy after it, in a sentence (``move_copy``)


class Merger:
    """See the module docstring."""

    def __init__(
        self,
        projects: Projects,
        forge: Forge | None,
        pulls: PullStore,
        repo_name: Callable[[str], Awaitable[str]],
        token: str,
    ) -> None:
        self.projects = projects
        self.forge = forge
        self.pulls = pulls
        self.repo_name = repo_name  # Publisher.repo_name: project -> "owner/name"
        self.token = token

    async def plan(self, project: str, number: int) -> MergePlan:
        """What merging pull request ``number`` of ``project`` would do, read now."""
        nothing = MergePlan(project, number)
        record = await self.pulls.numbered(project, number)
        if record is None or self.forge is None:
            why = "no forge is configured" if self.forge is None else "Legio did not open it"
            return _refused(nothing, f"Pull request #{number} of #{project}: {why}.")
        with caesar_waits():
            pull = await self.forge.get_pull(record.repo, number)
            plan = MergePlan(
                project,
                number,
                record.agent,
                pull.title,
                pull.url,
                record.branch,
                record.base,
                pull.head_sha,
            )
            if pull.state != "open":
                return _refused(plan, f"#{number} is {'merged' if pull.merged else 'closed'}.")
            mismatch = _mismatch(record, pull)
            if mismatch:
                return _refused(plan, mismatch)
            ci = await self.forge.ci(record.repo, pull.head_sha)
            short = pull.head_sha[:7]
            if ci.failed:
                names = ", ".join(visible(name, keep="") for name in ci.failed[:5])
                return _refused(plan, f"CI failed on {short} ({names}).")
            if not ci.settled:
                return _refused(
                    plan,
                    f"CI has not passed on {short} yet (still running, or none reported on "
                    "this commit): wait for its ✅ line.",
                )
            if pull.mergeable_state == "blocked":
                return _refused(
                    plan,
                    "the forge says it is blocked: a required review (or required check) is "
                    "missing.",
                )
            if pull.mergeable_state == "dirty":
                return _refused(plan, f"it conflicts with {pull.base}: ask the agent to rebase.")
            allowed = (await self.forge.repo(record.repo)).merge_methods or ORDER
        wanted = self.projects.settings(project).merge
        if wanted and wanted not in allowed:
            return _refused(
                plan,
                f"[projects.{project}] merge = {wanted!r}, and {record.repo} allows "
                f"{', '.join(allowed)} only: change it in legio.toml.",
            )
        method: str = wanted or next(m for m in ORDER if m in allowed)
        files, unread = await self._ci_files(project, record.base, pull.head_sha)
        return replace(plan, method=method, ci_files=files, ci_unread=unread)

    async def _ci_files(self, project: str, base: str, head: str) -> tuple[tuple[str, ...], bool]:
        """The CI configuration files ``head`` changes since it left ``base`` (Caesar's
        branch in the project), and whether they could not be read (no such commit)."""
        repo = self.projects.settings(project).path
        try:
            return await ci_changes(repo, base, head), False
        except ProjectError as e:
            logger.warning("#%s: the CI files of %s not read: %s", project, head[:7], e)
            return (), True

    async def merge(self, project: str, number: int, sha: str) -> Merged:
        """Merge it if it is still what Caesar was shown (head ``sha``…, CI green);
        ``ForgeError`` with the reason otherwise."""
        plan = await self.plan(project, number)
        if plan.refusal:
            raise ForgeError(f"Not merged: #{number}", plan.refusal)
        if not sha or plan.sha != sha:
            raise ForgeError(
                f"Not merged: #{number}",
                f"its branch moved since you were asked (it is at {plan.sha[:7]} now, you "
                f"confirmed {sha[:7]}): look at the new commits first.",
            )
        record = await self.pulls.numbered(project, number)
        assert record is not None and self.forge is not None
        with caesar_waits():
            try:
                commit = await self.forge.merge_pull(
                    record.repo, number, sha=plan.sha, method=plan.method
                )
            except ForgeError as e:
                if e.status == 409:
                    raise ForgeError(
                        f"Not merged: #{number}",
                        "its branch moved on the forge meanwhile (the forge refused a head "
                        f"other than {plan.sha[:7]}).",
                        409,
                    ) from e
                raise ForgeError(f"Not merged: #{number}", e.reason, e.status) from e
        await self.pulls.update(record.id, state="merged")
        logger.info("#%s: pull request %d merged by %s", project, number, plan.method)
        return Merged(plan, commit, "")

    async def move_copy(self, plan: MergePlan) -> str:
        """After ``merge``: the agent's copy onto the merged base, when it is safe; said
        either way. The caller holds the agent's turn lock (no turn runs in the copy)."""
        who = f"{plan.agent}'s copy of #{plan.project}"
        try:
            settings = self.projects.settings(plan.project)
            repo = settings.path
            name = await self.repo_name(plan.project)
            url = await remote_url(repo, settings.remote)
            web_host = getattr(self.forge, "web_host", "")
            base_tip = await fetch_base(
                repo, push_target(url, web_host, name), plan.base, self.token
            )
            if not self.projects.copy_dir(plan.agent, plan.project).exists():
                return f"{who} is gone; its next one starts from the new {plan.base}."
            place = await self.projects.place(plan.agent, plan.project)
            head = (
                await gitsafe.run(
                    place.copy,
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    "HEAD",
                    work_tree=False,
                    check=False,
                )
            ).strip()
            left = await uncommitted(place)
            if place.head != plan.branch or head != plan.sha or left.count or left.problem:
                return (
                    f"{who} was left as it is (it holds work after the merged commit, or is on "
                    f"another branch); /drop it to start again from the new {plan.base}."
                )
            await gitsafe.run(place.copy, "reset", "--hard", "--quiet", base_tip)
            tip = await tip_of(repo, plan.branch)
            if tip and agents_branch(plan.branch, plan.agent) and plan.branch != plan.base:
                await gitsafe.run(
                    repo,
                    "update-ref",
                    f"refs/heads/{plan.branch}",
                    base_tip,
                    tip,
                    hostile=False,
                    work_tree=False,
                )
        except (ForgeError, ProjectError) as e:
            logger.warning("%s: not moved after the merge: %s", who, e)
            return f"{who} was not moved onto the new {plan.base}: {e}"
        return f"{who} now starts from the new {plan.base} ({base_tip[:7]})."


def _refused(plan: MergePlan, why: str) -> MergePlan:
    return replace(plan, refusal=why)


def _mismatch(record: PullRecord, pull: PullRequest) -> str:
    """Why the forge's pull request is not the one Legio opened ("" when it is): its head
    must be the agent's own branch of the recorded repository, into the recorded base."""
    if not agents_branch(record.branch, record.agent) or record.branch == record.base:
        return (
            f"Legio recorded “{visible(record.branch, keep='')}” as its branch, which is not "
            f"{record.agent}'s own (legio/{record.agent}/…): it is not merged from the chat."
        )
    if pull.head != record.branch or pull.head_repo.lower() != record.repo.lower():
        said = f"{pull.head_repo or 'a deleted repository'}:{pull.head}"
        return (
            f"the forge says its head is “{visible(said, keep='')}”, not "
            f"{record.repo}:{record.branch}, the branch Legio published: merge it on the forge "
            "yourself if it is right."
        )
    if pull.base != record.base:
        return (
            f"the forge says its base is “{visible(pull.base, keep='')}”, not {record.base}, "
            "the base Legio opened it against: merge it on the forge yourself if it is right."
        )
    return ""


async def ci_changes(repo: Path, base: str, head: str) -> tuple[str, ...]:
    """The files of ``CI_PATHS`` that ``head`` changes since its merge base with
    ``refs/heads/<base>`` in ``repo`` (renames as the old and the new name).
    ``ProjectError`` when ``repo`` lacks either."""
    start = (
        await gitsafe.run(
            repo,
            "merge-base",
            "--end-of-options",
            f"refs/heads/{base}",
            head,
            hostile=False,
            work_tree=False,
            check=False,
        )
    ).strip()
    if not start:
        raise ProjectError(f"{repo} has no merge base of {base} and {head[:12]}")
    out = await gitsafe.run(
        repo,
        "diff",
        *DIFF_FLAGS,
        "--no-renames",
        "--name-only",
        "-z",
        start,
        head,
        "--",
        *CI_PATHS,
        hostile=False,
        work_tree=False,
    )
    return tuple(name for name in out.split("\0") if name)
