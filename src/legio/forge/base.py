"""The forge seam: what Legio asks of a forge, and the plain values it answers with.

``Forge`` is the protocol every forge implements (``legio.forge.github`` for GitHub and
GitHub Enterprise; GitLab or Forgejo would be siblings). Every call is one read or one
write of the forge's REST API; nothing here pushes (git does that, ``legio.forge.publish``).
The values are frozen dataclasses of the fields Legio uses, so no front-end or test depends
on a forge's JSON. Errors are ``ForgeError`` with the forge's own reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class RepoInfo:
    full_name: str  # "owner/name"
    default_branch: str
    private: bool
    url: str  # its web page
    can_push: bool = False
    merge_methods: tuple[str, ...] = ()  # what the repository allows: "merge", "squash", "rebase"


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str  # its web page
    state: str  # "open" or "closed"
    merged: bool
    title: str
    head: str  # the branch
    head_sha: str
    base: str
    head_repo: str = ""  # "owner/name" of the head's repository ("" when it was deleted)
    body: str = ""
    mergeable_state: str = ""  # "clean", "blocked" (a required review or check), "dirty"...


@dataclass(frozen=True)
class CheckRun:
    id: int
    name: str
    status: str  # "queued", "in_progress", "completed"
    conclusion: str  # "success", "failure", ... ("" while not completed)
    url: str = ""
    actions_job: bool = False  # a GitHub Actions job: its log can be read


@dataclass(frozen=True)
class CiState:
    """Check runs and commit statuses of one commit, taken together."""

    sha: str
    runs: tuple[CheckRun, ...] = ()
    statuses: tuple[tuple[str, str, str], ...] = ()  # (context, state, url)

    FAILED = frozenset({"failure", "timed_out", "cancelled", "action_required", "startup_failure"})

    @property
    def settled(self) -> bool:
        """Whether every check run completed and no status is pending (and one exists)."""
        if not self.runs and not self.statuses:
            return False
        runs_done = all(r.status == "completed" for r in self.runs)
        return runs_done and all(state != "pending" for _, state, _ in self.statuses)

    @property
    def failed(self) -> list[str]:
        """The names of the failing check runs and statuses."""
        names = [r.name for r in self.runs if r.conclusion in self.FAILED]
        return names + [c for c, state, _ in self.statuses if state in ("failure", "error")]


@dataclass(frozen=True)
class Comment:
    author: str
    body: str
    created_at: str
    path: str = ""  # a review comment's file
    line: int = 0
    association: str = ""  # author_association: OWNER, MEMBER, COLLABORATOR, NONE, ...


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    url: str
    state: str
    author: str
    labels: tuple[str, ...]
    created_at: str  # ISO 8601, as the forge says it
    body: str = ""
    comments: tuple[Comment, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Review:
    id: int
    author: str
    state: str  # "APPROVED", "CHANGES_REQUESTED", "COMMENTED", ...
    body: str
    submitted_at: str
    association: str = ""  # author_association: OWNER, MEMBER, COLLABORATOR, NONE, ...


@dataclass(frozen=True)
class PrFile:
    path: str
    status: str  # "added", "modified", "removed", "renamed"
    additions: int
    deletions: int


class Forge(Protocol):
    """What Legio asks of a forge (all reads but the pull requests' opening and updating,
    and the writes an agent may ask for, each after Caesar's Allow)."""

    web_host: str  # where its repositories live ("github.com"): for push URLs

    async def whoami(self) -> str:
        """The login the token belongs to (``ForgeError`` "Bad credentials" if none)."""
        ...

    async def repo(self, repo: str) -> RepoInfo: ...

    async def find_pull(self, repo: str, branch: str) -> PullRequest | None:
        """The open pull request whose head is ``branch`` of ``repo`` itself, if any."""
        ...

    async def get_pull(self, repo: str, number: int) -> PullRequest: ...

    async def open_pull(
        self, repo: str, branch: str, base: str, title: str, body: str
    ) -> PullRequest: ...

    async def update_pull(self, repo: str, number: int, title: str, body: str) -> PullRequest: ...

    async def ci(self, repo: str, ref: str) -> CiState:
        """Check runs and combined status of ``ref`` (a commit id or a branch)."""
        ...

    async def job_log_tail(self, repo: str, job_id: int, limit: int) -> str:
        """The last ``limit`` bytes of an Actions job's log ("" if it has none)."""
        ...

    async def issues(self, repo: str, *, since: str = "", limit: int = 50) -> list[Issue]:
        """Open issues (pull requests left out), newest first; ``since``: updated after."""
        ...

    async def issue(self, repo: str, number: int) -> Issue:
        """One issue with its comments."""
        ...

    async def pull_files(self, repo: str, number: int) -> list[PrFile]: ...

    async def reviews(self, repo: str, number: int) -> list[Review]: ...

    async def review_comments(self, repo: str, number: int) -> list[Comment]: ...

    # writes an agent may ask for (legio.forge.forgetools: only after Caesar's Allow)

    async def comment(self, repo: str, number: int, body: str) -> str:
        """Comment on an issue or pull request; the comment's link."""
        ...

    async def add_labels(self, repo: str, number: int, labels: list[str]) -> list[str]:
        """Add labels to an issue or pull request; its labels now."""
        ...

    async def close_issue(self, repo: str, number: int) -> None: ...

    # Caesar's own write, after his confirming tap (legio.forge.merging)

    async def merge_pull(self, repo: str, number: int, *, sha: str, method: str) -> str:
        """Merge pull request ``number`` if its head is still ``sha``, by ``method``; the
        commit it made. ``ForgeError`` (405: not mergeable, 409: the head moved)."""
        ...

    async def close(self) -> None: ...
