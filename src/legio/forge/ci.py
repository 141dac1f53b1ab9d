"""Following the pull requests Legio opened: CI, reviews, and their end.

One task per open pull request in the ``pulls`` table (started again after a restart by
``start``). Each round reads the pull request, then — while its head commit's CI has not
been told — that commit's check runs and combined status, then its reviews; all with
conditional requests (``Transport``'s ETag cache: an unchanged answer is a 304, which
the rate limit does not count). Rounds are ``interval_s`` apart, doubling up to
``max_interval_s`` while nothing changes; ``kick`` (a new push) starts over at once.

Callbacks get one ``ForgeEvent`` per fact, once (``reported_sha`` / ``reported_review``
are written after the callbacks ran, so a restart repeats nothing and loses nothing):

- CI settled on the head: ``ci_passed``, or ``ci_failed`` with each failing job's name and
  the tail of its log (Actions jobs; ``LOG_LIMIT`` characters, cleaned by ``untrusted``);
- a review asking for changes by the repository's OWNER, a MEMBER or a COLLABORATOR
  (``author_association``; an outsider's review starts nothing): ``changes_requested``
  with its words and its trusted authors' comments;
- the pull request merged or closed by hand, or gone (404): ``merged``/``closed``, and
  following stops.

A forge error in a round is logged (once per kind of error) and the round is tried again
later: the rate limit and the forge being down are ``Transport``'s to wait out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from legio.errors import ForgeError
from legio.forge.base import CheckRun, Forge
from legio.forge.untrusted import LOG_LIMIT, clean, flat
from legio.request import FailedJob, ForgeCallback, ForgeEvent, ForgeKind
from legio.store.pullstore import PullRecord, PullStore

logger = logging.getLogger(__name__)
# whose reviews start anything: the repository's people, never an outsider's review
TRUSTED = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})

COMMENT_LIMIT = 4_000
MAX_COMMENTS = 20
MAX_JOBS = 6


class CiFollower:
    """See the module docstring."""

    def __init__(
        self,
        forge: Forge,
        pulls: PullStore,
        *,
        interval_s: float = 30.0,
        max_interval_s: float = 300.0,
        log_limit: int = LOG_LIMIT,
    ) -> None:
        self.forge = forge
        self.pulls = pulls
        self.interval_s = interval_s
        self.max_interval_s = max_interval_s
        self.log_limit = log_limit
        self.callbacks: list[ForgeCallback] = []
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._kicks: dict[int, asyncio.Event] = {}
        self._said: set[tuple[int, str]] = set()

    def subscribe(self, callback: ForgeCallback) -> Callable[[], None]:
        """Call ``callback`` with every event; returns the unsubscribe function."""
        self.callbacks.append(callback)
        return lambda: self.callbacks.remove(callback) if callback in self.callbacks else None

    async def start(self) -> None:
        """Follow every pull request still open (after a restart too)."""
        for record in await self.pulls.following():
            self.follow(record)

    def follow(self, record: PullRecord) -> None:
        """Follow ``record`` (again at once if it is followed already: a new push)."""
        task = self._tasks.get(record.id)
        if task is not None and not task.done():
            self._kicks[record.id].set()
            return
        self._kicks[record.id] = asyncio.Event()
        self._tasks[record.id] = asyncio.create_task(
            self._follow(record.id), name=f"legio-ci-{record.repo}#{record.number}"
        )

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    async def _follow(self, pull_id: int) -> None:
        delay = self.interval_s
        kick = self._kicks[pull_id]
        while True:
            record = await self.pulls.get(pull_id)
            if record is None or record.state != "open":
                return
            try:
                done, changed = await self.round(record)
            except ForgeError as e:
                self._log_once(pull_id, e)
                done, changed = False, False
            if done:
                return
            delay = self.interval_s if changed else min(delay * 2, self.max_interval_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(kick.wait(), delay)
            if kick.is_set():
                kick.clear()
                delay = self.interval_s

    def _log_once(self, pull_id: int, error: ForgeError) -> None:
        key = (pull_id, error.reason[:80])
        if key not in self._said:
            self._said.add(key)
            logger.warning("following pull request %d: %s (trying again later)", pull_id, error)

    async def _emit(self, event: ForgeEvent) -> None:
        for callback in list(self.callbacks):
            try:
                await callback(event)
            except Exception:
                logger.exception("a forge event callback failed (%s)", event.kind)

    async def round(self, record: PullRecord) -> tuple[bool, bool]:
        """One look at ``record``: (following is over, something changed)."""
        try:
            pull = await self.forge.get_pull(record.repo, record.number)
        except ForgeError as e:
            if e.status != 404:
                raise
            await self._emit(_event(record, "closed", sha=record.head_sha))
            await self.pulls.update(record.id, state="closed")
            return True, True
        if pull.state == "closed":
            kind: ForgeKind = "merged" if pull.merged else "closed"
            await self._emit(_event(record, kind, sha=pull.head_sha))
            await self.pulls.update(record.id, state=kind)
            return True, True
        changed = False
        sha = pull.head_sha or record.head_sha
        if sha != record.head_sha:
            await self.pulls.update(record.id, head_sha=sha)
            changed = True
        if sha and record.reported_sha != sha:
            state = await self.forge.ci(record.repo, sha)
            if state.settled:
                failed = state.failed
                if failed:
                    jobs = await self._jobs(record, state.runs, state.statuses, failed)
                    event = _event(record, "ci_failed", sha=sha, jobs=jobs)
                else:
                    event = _event(record, "ci_passed", sha=sha)
                await self._emit(event)
                await self.pulls.update(record.id, reported_sha=sha)
                changed = True
        return False, await self._reviews(record) or changed

    async def _jobs(
        self,
        record: PullRecord,
        runs: tuple[CheckRun, ...],
        statuses: tuple[tuple[str, str, str], ...],
        failed: list[str],
    ) -> tuple[FailedJob, ...]:
        jobs: list[FailedJob] = []
        for run in runs:
            if run.name not in failed or len(jobs) >= MAX_JOBS:
                continue
            tail = ""
            if run.actions_job:
                try:
                    raw = await self.forge.job_log_tail(record.repo, run.id, self.log_limit * 2)
                except ForgeError as e:
                    raw = f"(its log could not be read: {e.reason})"
                tail = clean(raw, self.log_limit, keep_end=True)
            jobs.append(FailedJob(flat(run.name, 200), run.url, tail))
        for context, state, url in statuses:
            if state in ("failure", "error") and len(jobs) < MAX_JOBS:
                jobs.append(FailedJob(flat(context, 200), url, ""))
        return tuple(jobs)

    async def _reviews(self, record: PullRecord) -> bool:
        reviews = await self.forge.reviews(record.repo, record.number)
        fresh = [r for r in reviews if r.id > record.reported_review]
        if not fresh:
            return False
        asking = [r for r in fresh if r.state == "CHANGES_REQUESTED" and r.association in TRUSTED]
        if asking:
            notes = [
                c
                for c in await self.forge.review_comments(record.repo, record.number)
                if c.association in TRUSTED
            ]
            words = [clean(r.body, COMMENT_LIMIT) for r in asking if r.body.strip()]
            words += [
                clean(f"{c.path}:{c.line}: {c.body}" if c.path else c.body, COMMENT_LIMIT)
                for c in notes
            ][:MAX_COMMENTS]
            event = _event(
                record,
                "changes_requested",
                sha=record.head_sha,
                comments=tuple(words),
                reviewer=flat(asking[-1].author, 100),
            )
            await self._emit(event)
        await self.pulls.update(record.id, reported_review=max(r.id for r in fresh))
        return True


def _event(
    record: PullRecord,
    kind: ForgeKind,
    *,
    sha: str = "",
    jobs: tuple[FailedJob, ...] = (),
    comments: tuple[str, ...] = (),
    reviewer: str = "",
) -> ForgeEvent:
    return ForgeEvent(
        kind, record.project, record.agent, record.number, record.url, sha, jobs, comments, reviewer
    )
