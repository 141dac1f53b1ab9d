"""Scheduled work for the Legatus: its tools, the job runner, and the wiring.

- ``job_tools``: ``schedule_job`` (validates everything, stores nothing on a mistake,
  answers with the next three run times on the owner's clock), ``list_jobs``,
  ``cancel_job``; they are added to the Legatus's ``legatus_tools`` server.
- ``job_runner``: a due job's nuntius answered through ``Legatus.answer_nuntius`` (the
  path of Caesar's requests); each reply is marked ``⏰ <job name>`` and handed to the
  front-end's presenter, which shows it in Caesar's chat.
- ``attach_scheduler``: both of the above around one ``Scheduler`` (``LegioApp`` does it).
- ``job_lines``: the text of ``/jobs`` and ``list_jobs``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from legio.jobs.schedule import (
    ScheduleError,
    check_cron,
    check_future,
    format_local,
    next_crons,
    parse_at,
    parse_in,
    zone,
    zone_key,
)
from legio.jobs.scheduler import Clock, JobRunner, Scheduler
from legio.legatus.orchestrator import Legatus
from legio.names import CAESAR, LEGATUS
from legio.request import UNWATCHED, Callbacks, Reply, Watch
from legio.store.jobstore import Job, JobStore, NewJob
from legio.store.praetorium import Nuntius, Praetorium
from legio.toolkit import Result, integer, result, schema, string, tool, tool_error

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import SdkMcpTool

NAME_MAX = 40
REQUEST_MAX = 4000
SHOWN_RUNS = 3

# run(watch) answers the job, reported to the presenter's live view (its own UI)
JobRun = Callable[[Watch], Awaitable[list[Reply]]]
Presenter = Callable[[Job, JobRun], Awaitable[object]]


def default_name(request: str) -> str:
    words = " ".join(request.split())
    return words if len(words) <= NAME_MAX else words[: NAME_MAX - 1].rstrip() + "…"


def schedule_line(job: Job) -> str:
    if job.kind == "cron":
        return f"cron {job.cron!r} ({job.timezone})"
    return "once"


def job_lines(jobs: list[Job], tz: tzinfo) -> list[str]:
    """One line per job: number, name, target, schedule, next run, last run."""
    lines = []
    for job in jobs:
        line = f'#{job.id} "{job.name}" → {job.target} · {schedule_line(job)}'
        if job.running:
            line += " · running now"
        if job.next_run is not None:
            line += f" · next {format_local(job.next_run, tz)}"
        if job.last_run is not None:
            line += f" · last {format_local(job.last_run, tz)} ({job.last_outcome})"
        lines.append(line)
    return lines


def job_tools(
    jobs: JobStore,
    targets: Callable[[], list[str]],
    tz: tzinfo,
    now: Callable[[], datetime],
    changed: Callable[[], None],
    max_jobs: int,
    owner_chat: Callable[[], Awaitable[str | None]],
    projects: Callable[[], list[str]] = list,
) -> list[SdkMcpTool[Any]]:
    """The three job tools. ``targets()``: the centuriones; ``changed()``: wake the scheduler."""

    @tool(
        "schedule_job",
        "Schedule a request to run later, once or repeatedly, for you (target 'legatus') or "
        "a centurio. Give exactly one of: 'at' (ISO local date-time, e.g. 2026-11-23T18:00, "
        "in Caesar's time zone), 'in' (a delay: 90m, 2h, 1d), or 'cron' (five fields: "
        "minute hour day-of-month month day-of-week, e.g. '0 8 * * MON-FRI' = weekdays at "
        "08:00, in Caesar's time zone). When it runs, the target gets the request as a "
        "message and its answer goes to Caesar. Write the request as an instruction to the "
        "target at that time (a reminder: 'Remind Caesar to call Marcus'). The answer lists "
        "the next run times: confirm them to Caesar.",
        schema(
            {
                "request": string("what to do when it runs"),
                "target": string("'legatus' (default) or a centurio's name"),
                "name": string("a short label, e.g. 'daily digest'"),
                "at": string("one time, ISO local date-time"),
                "in": string("one time after a delay, e.g. 2h30m"),
                "cron": string("a repeating schedule"),
                "project": string(
                    "optional: a project of legio.toml's [projects] the centurio works on "
                    "(its own copy and branch)"
                ),
            },
            required=["request"],
        ),
    )
    async def schedule_job(args: dict[str, Any]) -> Result:
        try:
            new = await _new_job(args)
        except ScheduleError as e:
            return tool_error(f"{e}. Nothing was scheduled.")
        stored = await jobs.add(new, max_jobs, now())
        if stored is None:
            return tool_error(
                f"{max_jobs} jobs are already scheduled, the most allowed "
                "(scheduler.max_jobs in legio.toml); cancel one first. Nothing was scheduled."
            )
        changed()
        if stored.kind == "cron" and stored.cron:
            runs = next_crons(stored.cron, tz, now(), SHOWN_RUNS)
            when = "next runs: " + "; ".join(format_local(r, tz) for r in runs)
        else:
            when = f"runs once: {format_local(new.next_run, tz)}"
        return result(
            f'Scheduled job #{stored.id} "{stored.name}" for {stored.target}, '
            f"{schedule_line(stored)}; {when}."
        )

    async def _new_job(args: dict[str, Any]) -> NewJob:
        request = str(args.get("request") or "").strip()
        if not request:
            raise ScheduleError("the request is empty: say what should be done")
        if len(request) > REQUEST_MAX:
            raise ScheduleError(f"the request is longer than {REQUEST_MAX} characters")
        target = str(args.get("target") or LEGATUS).strip().lower().lstrip("@")
        valid = [LEGATUS, *targets()]
        if target not in valid:
            raise ScheduleError(f"no agent named {target!r}; choose one of: {', '.join(valid)}")
        given = [k for k in ("at", "in", "cron") if str(args.get(k) or "").strip()]
        if len(given) != 1:
            raise ScheduleError("give exactly one of 'at', 'in' or 'cron'")
        kind, value = given[0], str(args[given[0]]).strip()
        moment = now()
        cron = None
        if kind == "cron":
            cron = check_cron(value)
            runs = next_crons(cron, tz, moment, 1)
            if not runs:
                raise ScheduleError(f"the cron expression {cron!r} never matches a future time")
            first = runs[0]
        elif kind == "at":
            first = check_future(parse_at(value, tz), moment, tz)
        else:
            first = check_future(moment + parse_in(value), moment, tz)
        project = str(args.get("project") or "").strip().lstrip("#").lower()
        if project and project not in projects():
            raise ScheduleError(f"no project named {project!r}; the projects: {projects()}")
        if project and f"#{project}" not in request.lower():
            request = f"#{project} {request}"  # the run's nuntius is on it, like Caesar's
        name = " ".join(str(args.get("name") or "").split()) or default_name(request)
        return NewJob(
            name=name[:NAME_MAX],
            target=target,
            request=request,
            kind="cron" if cron else "once",
            timezone=zone_key(tz),
            next_run=first,
            created_by=LEGATUS,
            cron=cron,
            run_at=None if cron else first,
            owner_chat=await owner_chat(),
        )

    @tool(
        "list_jobs",
        "The scheduled jobs: number, name, target, schedule, next and last run.",
        schema({}),
    )
    async def list_jobs(args: dict[str, Any]) -> Result:
        lines = job_lines(await jobs.active(), tz)
        return result("\n".join(lines) if lines else "No job is scheduled.")

    @tool(
        "cancel_job",
        "Cancel a scheduled job by its number (from list_jobs); a run in progress finishes.",
        schema({"id": integer("the job's number")}),
    )
    async def cancel_job(args: dict[str, Any]) -> Result:
        try:
            job_id = int(args["id"])
        except (TypeError, ValueError):
            return tool_error(f"{json.dumps(args.get('id'))} is not a job number")
        job = await jobs.cancel(job_id)
        if job is None:
            return tool_error(f"no scheduled job #{job_id} (list_jobs shows them)")
        changed()
        return result(f'Cancelled job #{job.id} "{job.name}".')

    return [schedule_job, list_jobs, cancel_job]


async def caesar_chat(praetorium: Praetorium) -> str | None:
    """The chat of Caesar's latest request to the Legatus (``telegram:<chat>``), if known."""
    for request in reversed(await praetorium.requests_from(CAESAR, limit=20)):
        nuntius = request.nuntius
        if LEGATUS in nuntius.audience and nuntius.origin and nuntius.origin.count(":") >= 2:
            return nuntius.origin.rsplit(":", 1)[0]
    return None


def outcome_of(replies: list[Reply]) -> str:
    kinds = {r.kind for r in replies}
    for kind in ("error", "interrupted"):
        if kind in kinds:
            return kind
    return "answer" if "answer" in kinds else "none"


def job_runner(legatus: Legatus, present: Presenter | None = None) -> JobRunner:
    """Run a job's nuntius like Caesar's request; replies marked ``⏰ name`` go to ``present``."""

    async def run(job: Job, nuntius: Nuntius) -> str:
        replies: list[Reply] = []

        async def answer(watch: Watch) -> list[Reply]:
            async def marked(reply: Reply) -> None:
                reply = dataclasses.replace(reply, job=job.name)
                replies.append(reply)
                await watch.reply(reply)

            project, _ = legatus.sessions.projects.pick(nuntius.text)  # its #name
            on = dataclasses.replace(nuntius, project=project or nuntius.project)
            await legatus.answer_nuntius(
                on, [job.target], Callbacks(watch.status, watch.stream, marked)
            )
            return replies

        if present is None:
            await answer(UNWATCHED)
        else:
            await present(job, answer)
        return outcome_of(replies)

    return run


def attach_scheduler(
    legatus: Legatus, present: Presenter | None = None, *, clock: Clock | None = None
) -> Scheduler:
    """A ``Scheduler`` for ``legatus``, its tools added to the Legatus (call before any query).

    Start it after ``legatus.notice_interruptions()``; stop it before the sessions close.
    """
    jobs = JobStore(legatus.praetorium)
    scheduler = Scheduler(jobs, job_runner(legatus, present), clock=clock)
    tz = zone(legatus.config.timezone)
    legatus.extra_tools.append(
        lambda: job_tools(
            jobs,
            lambda: legatus.castra.roster().names,
            tz,
            scheduler.clock.now,
            scheduler.changed,
            legatus.config.scheduler.max_jobs,
            lambda: caesar_chat(legatus.praetorium),
            legatus.sessions.projects.names,
        )
    )
    return scheduler
