"""The scheduler: runs due jobs as nuntii from ``scheduler``, once each, across restarts.

One task sleeps until the next job is due (``JobStore.next_due``), not polling; it
is woken early by ``changed()`` when a job is added. A due job is claimed in the
store, its nuntius posted (sender ``scheduler``, audience the job's target, origin
``job:<id>:<run id>``, so a retried post cannot make a second one), the schedule
moved on, and only then handed to the injected ``runner``, which answers it like a
request of Caesar's (the Legatus's answer path). Each run is its own task: jobs for
different agents run in parallel, jobs for one agent queue at that agent's turn lock.

Restarts: a job whose time passed while the daemon was down is due at start and runs
once, its nuntius saying it is late; a cron job's next run is computed from now, so
missed occurrences are not run one by one. A run still claimed at start-up was
interrupted: it is not run again (``recover``); its unanswered nuntius is announced
like an interrupted request of Caesar's (``Legatus.notice_interruptions``), so call
that before ``start``.

The clock is injected (``Clock``): tests move time by hand, nothing sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from legio.errors import DuplicateOrigin
from legio.jobs.schedule import format_local, next_cron
from legio.names import SCHEDULER
from legio.store.jobstore import Job, JobStore
from legio.store.praetorium import Nuntius

logger = logging.getLogger(__name__)

LATE_AFTER = timedelta(minutes=2)
MAX_SLEEP_S = 300.0  # re-read the wall clock at least this often (suspend, clock changes)

JobRunner = Callable[[Job, Nuntius], Awaitable[str]]


class Clock(Protocol):
    """Where the scheduler gets the time and waits for it."""

    def now(self) -> datetime:
        """The current time, an aware UTC datetime."""
        ...

    async def sleep_until(self, when: datetime | None, wake: asyncio.Event) -> None:
        """Return at ``when`` (never, if None) or as soon as ``wake`` is set."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime | None, wake: asyncio.Event) -> None:
        seconds = MAX_SLEEP_S
        if when is not None:
            seconds = min(seconds, max(0.0, (when - self.now()).total_seconds() + 0.001))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), seconds)


def job_text(job: Job, due: datetime, now: datetime, late_after: timedelta = LATE_AFTER) -> str:
    """The nuntius a run of ``job`` posts: what to do, and when it was due."""
    tz = ZoneInfo(job.timezone)
    head = f'⏰ Scheduled job #{job.id} "{job.name}", due {format_local(due, tz)}'
    if now - due > late_after:
        head += (
            f", runs late ({format_local(now, tz)}): Legio was not running, or the job was "
            "still busy, at that time; missed runs are made up by this one run"
        )
    return f"{head}. The request, set earlier by Caesar:\n{job.request}"


def following(job: Job, now: datetime) -> datetime | None:
    """When ``job`` is due after a run at ``now``: the next cron time, or None (one-shot)."""
    if job.kind == "cron" and job.cron:
        return next_cron(job.cron, ZoneInfo(job.timezone), now)
    return None


class Scheduler:
    """See the module docstring: ``start()`` after the Legatus opens, ``stop()`` before it
    closes."""

    def __init__(
        self,
        jobs: JobStore,
        runner: JobRunner,
        *,
        clock: Clock | None = None,
        late_after: timedelta = LATE_AFTER,
    ) -> None:
        self.jobs = jobs
        self.runner = runner
        self.clock: Clock = clock or SystemClock()
        self.late_after = late_after
        self._wake = asyncio.Event()
        self._stopping = False
        self._loop: asyncio.Task[None] | None = None
        self._runs: set[asyncio.Task[None]] = set()

    def changed(self) -> None:
        """Jobs were added or changed: look at the schedule again now."""
        self._wake.set()

    async def start(self) -> None:
        """Settle runs a restart interrupted, then start the scheduling task."""
        await self.recover()
        self._stopping = False
        self._loop = asyncio.create_task(self._run_loop(), name="legio-scheduler")

    async def stop(self, grace_s: float = 0.0) -> None:
        """Start no more runs; let running ones finish for ``grace_s``, then cancel them.

        A cancelled run stays marked in the store: the next start announces it as
        interrupted and does not run it again.
        """
        await self.pause()
        if self._runs:
            _, pending = await asyncio.wait(set(self._runs), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def pause(self) -> None:
        """Start no more runs (those running go on); ``start()`` resumes."""
        self._stopping = True
        self._wake.set()
        if self._loop is not None:
            await asyncio.gather(self._loop, return_exceptions=True)
            self._loop = None

    @property
    def running(self) -> int:
        return len(self._runs)

    # ---------------------------------------------------------- restarts

    async def recover(self) -> list[Job]:
        """Runs a restart interrupted: not run again, recorded; return those that had begun.

        A claim whose nuntius was never posted reached no one: it is dropped and the
        job is due as before (it runs once, late). A run whose nuntius exists is over:
        its schedule moves on from now, and it is recorded ``interrupted`` unless the
        target's answer was stored.
        """
        praetorium = self.jobs.praetorium
        interrupted = []
        now = self.clock.now()
        for job in await self.jobs.claimed():
            nuntius = await praetorium.get_by_origin(job.origin or "")
            if nuntius is None:
                await self.jobs.release(job)
                continue
            if job.running_seq is None:
                await self.jobs.started(job, nuntius.seq, following(job, now))
            answered = job.target in await praetorium.repliers(nuntius.id)
            await self.jobs.finish(job, "answer" if answered else "interrupted")
            if not answered:
                interrupted.append(job)
                logger.warning("job #%s was interrupted by a restart; not run again", job.id)
        return interrupted

    # ---------------------------------------------------------- running

    async def _run_loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                await self.launch_due()
                when = await self.jobs.next_due()
            except Exception:
                logger.exception("scheduler: cannot read the jobs; trying again in a minute")
                when = self.clock.now() + timedelta(minutes=1)
            if self._stopping:
                return
            await self.clock.sleep_until(when, self._wake)

    async def launch_due(self) -> list[Job]:
        """Claim every due job and start its run; return the claimed jobs."""
        now = self.clock.now()
        launched = []
        for job in await self.jobs.due(now):
            claimed = await self.jobs.claim(job, uuid.uuid4().hex, now)
            if claimed is None:
                continue
            task = asyncio.create_task(self._run(claimed), name=f"legio-job-{job.id}")
            self._runs.add(task)
            task.add_done_callback(self._runs.discard)
            launched.append(claimed)
        return launched

    async def _run(self, job: Job) -> None:
        praetorium = self.jobs.praetorium
        now = self.clock.now()
        due = job.run_due or now
        origin = job.origin or ""
        try:
            nuntius = await praetorium.post(
                SCHEDULER, job_text(job, due, now, self.late_after), [job.target], origin=origin
            )
        except DuplicateOrigin:
            found = await praetorium.get_by_origin(origin)
            assert found is not None
            nuntius = found
        except Exception:
            logger.exception("job #%s: cannot post its nuntius; this run is skipped", job.id)
            await self.jobs.started(job, None, following(job, now))
            await self.jobs.finish(job, "error")
            return
        await self.jobs.started(job, nuntius.seq, following(job, now))
        logger.info("job #%s %r: running (nuntius #%s)", job.id, job.name, nuntius.seq)
        try:
            outcome = await self.runner(job, nuntius)
        except asyncio.CancelledError:
            raise  # stays marked: the next start announces it as interrupted
        except Exception:
            logger.exception("job #%s: its run failed", job.id)
            outcome = "error"
        await self.jobs.finish(job, outcome)
        self._wake.set()
