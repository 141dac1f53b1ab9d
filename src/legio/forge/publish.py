"""Publish: an agent's branch pushed to the forge and its pull request opened or updated,
by Legio, outside every sandbox, after Caesar's tap.

``Publisher.publish(agent, project)``: the agent's branch is brought from its copy into the
project first (``Projects.publish``, as after every turn), then Legio's own git pushes
*that* commit, read in the project, to ``refs/heads/legio/<agent>/…`` of the project's
remote (``legio.forge.push``: never another branch, never forced unless ``force``). Then
the open pull request of that branch is found (``head=owner:branch``) and updated, or one
is opened against the base; a 422 "already exists" (opened meanwhile) is found and updated.
Title and body come from the caller's summary, else the branch's commits, with the last
check's line if given (naming the commit it checked; a check of any other commit or of
uncommitted work is posted as no check of the pushed one) and a line saying it was opened
through Legio, all made inert and visible (``legio.forge.prtext``). The pull request is
recorded (``PullStore``) so CI and reviews are followed (``legio.forge.ci``).

``Publisher.preview`` answers what Publish would post (``PublishPreview``: the repository,
branch, base, commit, title and body) without pushing anything; ``publish(preview)`` then
posts exactly that title and body and pushes exactly that commit, or refuses if the
branch, its base or the repository changed since; it returns the pull request it
recorded. A front-end shows the preview and publishes only on Caesar's confirming tap,
with the preview it showed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from legio.config import Config
from legio.errors import ForgeError, ProjectError
from legio.forge.base import Forge, PullRequest
from legio.forge.prtext import closing_words, inert, inert_title
from legio.forge.push import push, push_target, remote_url, repo_of_url
from legio.projects import gitsafe
from legio.projects.branchwork import BranchWork, branch_work, tip_of
from legio.projects.copies import Place, Projects
from legio.projects.publishing import agents_branch
from legio.settings.projects import ProjectSettings
from legio.store.pullstore import PullRecord, PullStore

logger = logging.getLogger(__name__)

MAX_TITLE = 120
MAX_BODY = 60_000  # GitHub takes 65,536 characters
OPENED_BY = "Opened through Legio by {agent} (its branch pushed by Legio after Caesar's tap)."


@dataclass(frozen=True)
class Published:
    """What Publish did: the pull request, and the commit pushed."""

    project: str
    agent: str
    repo: str  # "owner/name"
    branch: str
    base: str
    number: int
    url: str
    created: bool  # a new pull request (False: the open one was updated)
    commit: str  # the branch's commit now on the forge
    pushed: bool  # False: the forge had that commit already
    record: PullRecord | None = None  # as recorded, for the CI follower


@dataclass(frozen=True)
class PullWords:
    """What a pull request says beside its commits: the agent's own ``summary`` of its work
    (else its commits'), the last ``check``'s result and the commit it checked, and the
    ``commit`` to publish (a card's: what Caesar saw, never newer unseen commits)."""

    summary: str = ""
    check: str = ""
    check_commit: str = ""
    commit: str = ""


@dataclass(frozen=True)
class PublishPreview:
    """What Publish will post, as Caesar is shown it: the commit pushed to ``branch`` of
    ``repo``, and the pull request's title and body exactly (already inert and visible)."""

    project: str
    agent: str
    repo: str  # "owner/name"
    branch: str
    base: str
    commit: str
    title: str
    body: str
    closes: tuple[str, ...] = ()  # closing keywords in the commits' messages (not posted)

    @property
    def digest(self) -> str:
        """12 hex digits naming this exact preview (a typed confirmation quotes it)."""
        fields = [self.project, self.agent, self.repo, self.branch, self.base, self.commit]
        data = json.dumps([*fields, self.title, self.body], ensure_ascii=False)
        return hashlib.sha256(data.encode()).hexdigest()[:12]


def check_line(check: str, check_commit: str, tip: str) -> str:
    """The pull request's check line for ``tip``: the check's result only when it ran on
    exactly ``tip`` (``check_commit``), naming it; otherwise that ``tip`` had no check (a
    result of another commit or of uncommitted work is never posted as this one's)."""
    if not check.strip():
        return ""
    if check_commit and check_commit == tip:
        return f"Last check, of {tip[:7]}: {check.strip()}"
    return f"Last check: none of {tip[:7]} (the last check ran on other work)"


def title_and_body(
    work: BranchWork, agent: str, summary: str = "", check: str = ""
) -> tuple[str, str]:
    """A pull request's title and body: the summary's first line and the rest, else the
    branch's commits; the check's line; how it was opened. Both inert and visible
    (``legio.forge.prtext``): the agent wrote the summary, the commits and what the
    check printed."""
    summary = summary.strip()
    if summary:
        first, _, rest = summary.partition("\n")
        title, text = first.strip("# ").strip(), rest.strip()
    elif len(work.commits) == 1 or (work.commits and work.ahead == 1):
        title, text = work.commits[0].subject, ""
    else:
        title = f"{agent}: {work.ahead} commits on {work.base}"
        text = "\n".join(f"- {c.subject} ({c.short})" for c in work.commits)
        if work.ahead > len(work.commits):
            text += f"\n- … and {work.ahead - len(work.commits)} earlier"
    title = inert_title(title).strip()
    if len(title) > MAX_TITLE:
        title = title[: MAX_TITLE - 1] + "…"
    text = inert(text).strip()[: MAX_BODY - 1000]  # each part alone: a comment the agent
    lines = [text] if text else []  # left open must not swallow Legio's lines after it
    lines.append(f"{work.file_count} file(s) changed, +{work.added} −{work.removed}.")
    check = inert(check).strip()
    if check:  # "Last check, of c0ffee1: ✅ 212 passed" (``check_line``)
        lines.append(check if check.startswith("Last check") else f"Last check: {check}")
    lines.append(OPENED_BY.format(agent=agent))
    return title or f"{agent}'s work", "\n\n".join(lines)[:MAX_BODY]


async def repo_name(settings: ProjectSettings, project: str) -> str:
    """``owner/name`` of ``project`` on the forge: its ``repo``, else its remote's URL."""
    if settings.repo:
        return settings.repo
    url = await remote_url(settings.path, settings.remote)
    name = repo_of_url(url)
    if not name:
        raise ForgeError(
            f"#{project}",
            f"cannot tell its repository on the forge from remote {settings.remote!r} "
            f'({url or "no such remote"}): set [projects.{project}] repo = "owner/name"',
        )
    return name


MAX_LOGGED = 200
COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


async def on_branch(repo: Path, commit: str, tip: str) -> bool:
    """Whether ``commit`` is ``tip`` or one of its ancestors, in the project ``repo``."""
    code, _, _ = await gitsafe.run_raw(
        repo, "merge-base", "--is-ancestor", commit, tip, hostile=False, work_tree=False
    )
    return code == 0


async def commits_closing(repo: Path, base: str, tip: str) -> tuple[str, ...]:
    """The closing keywords in the messages of the commits ``tip`` brings to ``base``
    (the newest ``MAX_LOGGED``): the forge acts on them when they reach its default
    branch, whatever the pull request says."""
    code, out, _ = await gitsafe.run_raw(
        repo,
        "log",
        f"-n{MAX_LOGGED}",
        "--format=%B",
        tip,
        f"^{base}",
        "--",
        hostile=False,
        work_tree=False,
    )
    return tuple(closing_words(out.decode(errors="replace"))) if code == 0 else ()


class Publisher:
    """Publish for every project of the config; see the module docstring."""

    def __init__(
        self, config: Config, projects: Projects, forge: Forge | None, pulls: PullStore, token: str
    ) -> None:
        self.config = config
        self.projects = projects
        self.forge = forge
        self.pulls = pulls
        self._token = token

    def _forge(self) -> Forge:
        if self.forge is None:
            raise ForgeError(
                "publishing",
                "no forge: add [forge] to legio.toml (docs/configuration.md) and restart",
            )
        return self.forge

    async def repo_name(self, project: str) -> str:
        """``owner/name`` of ``project`` on the forge (``repo_name``)."""
        return await repo_name(self.projects.settings(project), project)

    async def _branch(self, agent: str, project: str, commit: str) -> tuple[Place, BranchWork, str]:
        """The agent's branch brought into the project, what it holds beyond its base, and
        the commit to push: ``commit`` if the branch still holds it, else its tip."""
        if not self.projects.copy_dir(agent, project).exists():
            raise ProjectError(f"{agent} has no copy of #{project}: nothing to publish")
        place = await self.projects.place(agent, project)
        await self.projects.publish(place)
        branch, base, repo = place.branch, place.base, place.repo
        if not agents_branch(branch, agent) or branch == base:
            raise ForgeError("publishing", f"{branch!r} is not Legio's branch of {agent}")
        work = await branch_work(repo, branch, base, text=False)
        if work is None or work.ahead == 0:
            raise ForgeError(
                "publishing",
                f"{agent}'s branch {branch} has no commit that {base} lacks: nothing to publish",
            )
        tip = work.tip
        if commit and not COMMIT_ID.fullmatch(commit):
            raise ForgeError("publishing", f"{commit[:80]!r} is not a commit id")
        if commit and commit != tip:
            if not await on_branch(repo, commit, tip):
                raise ForgeError(
                    "publishing",
                    f"{branch} no longer holds {commit[:12]}, the commit that card showed "
                    f"(its history was rewritten since): publish from its newest card",
                )
            tip = commit
        base_tip = await tip_of(repo, base)
        if base_tip and await on_branch(repo, tip, base_tip):
            raise ForgeError(
                "publishing",
                f"{tip[:12]} is already in {base}: that card's turn committed nothing to publish",
            )
        return place, work, tip

    async def preview(self, agent: str, project: str, words: PullWords) -> PublishPreview:
        """What ``publish`` would post with these ``words``, nothing pushed (module
        docstring): exactly ``words.commit`` of the agent's branch (else its tip)."""
        self._forge()
        place, work, tip = await self._branch(agent, project, words.commit)
        line = check_line(words.check, words.check_commit, tip)
        title, body = title_and_body(work, agent, words.summary, line)
        name = await self.repo_name(project)
        closes = await commits_closing(place.repo, place.base, tip)
        return PublishPreview(
            project, agent, name, place.branch, place.base, tip, title, body, closes
        )

    async def publish(self, preview: PublishPreview, *, force: bool = False) -> Published:
        """Push exactly the previewed commit and open or update the pull request with exactly
        the previewed title and body (module docstring); ``ForgeError`` if the branch, its
        base or the repository changed since the preview, or no longer holds its commit.
        ``force`` only after Caesar confirmed a force-push (``PushRejected``)."""
        forge = self._forge()
        agent, project = preview.agent, preview.project
        place, _, tip = await self._branch(agent, project, preview.commit)
        name = await self.repo_name(project)
        branch, base, repo = place.branch, place.base, place.repo
        if (name, branch, base, tip) != (
            preview.repo,
            preview.branch,
            preview.base,
            preview.commit,
        ):
            raise ForgeError(
                "publishing",
                f"#{project} changed since the preview (now {branch} → {base} on {name}): "
                "tap Publish again to see what would be posted now",
            )
        settings = self.projects.settings(project)
        target = push_target(await remote_url(repo, settings.remote), forge.web_host, name)
        pushed = await push(repo, target, branch, agent, base, tip, self._token, force=force)
        pull, created = await self._pull(forge, name, branch, base, preview.title, preview.body)
        record = await self.pulls.opened(
            project=project,
            agent=agent,
            repo=name,
            number=pull.number,
            url=pull.url,
            branch=branch,
            base=base,
            head_sha=tip,
        )
        logger.info(
            "%s: %s pushed to %s (%s), pull request #%d %s",
            agent,
            branch,
            name,
            tip[:12],
            pull.number,
            "opened" if created else "updated",
        )
        return Published(
            project, agent, name, branch, base, pull.number, pull.url, created, tip, pushed, record
        )

    @staticmethod
    async def _pull(
        forge: Forge, repo: str, branch: str, base: str, title: str, body: str
    ) -> tuple[PullRequest, bool]:
        found = await forge.find_pull(repo, branch)
        if found is None:
            try:
                return await forge.open_pull(repo, branch, base, title, body), True
            except ForgeError as e:
                if "already exists" not in e.reason:
                    raise
                found = await forge.find_pull(repo, branch)
                if found is None:
                    raise
        return await forge.update_pull(repo, found.number, title, body), False

    async def record_of(self, agent: str, project: str) -> PullRecord | None:
        return await self.pulls.of(project, agent)
