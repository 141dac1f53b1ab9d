"""Scheduled work: jobs in the praetorium, run on time by the scheduler on a hand-moved clock.

The Legatus and the centuriones are the real ones on the fake CLI; the clock is a
``FakeClock`` the test moves (nothing sleeps waiting for a job's time).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from legio.app import JobRun, LegioApp
from legio.audience import Quiet
from legio.castra import Castra
from legio.config import Config
from legio.errors import ConfigError
from legio.frontends.admin import Admin
from legio.frontends.statusview import status_text
from legio.frontends.views import interruption_notice, reply_text
from legio.jobs.schedule import ScheduleError, check_cron, next_crons, parse_at
from legio.jobs.scheduler import Scheduler, SystemClock
from legio.request import Callbacks, Reply, Status
from legio.store.jobstore import Job, JobStore, NewJob
from legio.store.praetorium import Nuntius, Praetorium
from legio.store.records import QueryUsage
from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli
from tests.legion import fake_cli_config, processes_of, rendered
from tests.test_console import run_console

ROME = ZoneInfo("Europe/Rome")
START = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # a Monday, 10:00 in Rome


class FakeClock:
    """Time moved by the test; the scheduler's sleep ends when time reaches its deadline."""

    def __init__(self, now: datetime) -> None:
        self.current = now
        self.deadline: datetime | None = None
        self.asleep = False
        self.wake: asyncio.Event | None = None
        self._moved = asyncio.Event()

    def now(self) -> datetime:
        return self.current

    async def sleep_until(self, when: datetime | None, wake: asyncio.Event) -> None:
        self.deadline, self.wake = when, wake
        try:
            while not wake.is_set() and (when is None or self.current < when):
                self.asleep = True
                self._moved.clear()
                waiters = [asyncio.ensure_future(e.wait()) for e in (wake, self._moved)]
                try:
                    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
        finally:
            self.asleep = False

    def set(self, moment: datetime) -> None:
        self.current = moment
        if self.deadline is None or moment >= self.deadline:
            self.asleep = False  # it is about to wake
        self._moved.set()


async def settle(scheduler: Scheduler, clock: FakeClock) -> None:
    """Wait until every due run is over and the scheduler sleeps again."""
    for _ in range(3000):
        woken = clock.wake is not None and clock.wake.is_set()
        if clock.asleep and not woken and not scheduler.running:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the scheduler never settled")


async def until_asked(fake_cli: FakeCli, name: str) -> None:
    """Wait until agent ``name``'s CLI has received a request."""
    for _ in range(3000):
        if any(p.prompts for p in processes_of(fake_cli, name)):
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{name} was never asked")


async def go_to(scheduler: Scheduler, clock: FakeClock, moment: datetime) -> None:
    clock.set(moment)
    await settle(scheduler, clock)


def new_job(
    request: str,
    next_run: datetime,
    *,
    target: str = "legatus",
    name: str = "job",
    cron: str | None = None,
) -> NewJob:
    return NewJob(
        name=name,
        target=target,
        request=request,
        kind="cron" if cron else "once",
        timezone="Europe/Rome",
        next_run=next_run,
        created_by="legatus",
        cron=cron,
        run_at=None if cron else next_run,
    )


class Shown(Quiet):
    """A front-end that records what Caesar would see of jobs: statuses and marked replies."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.status: list[str] = []
        self.arrived = asyncio.Event()

    async def __call__(self, job: Job, run: JobRun) -> None:
        async def on_status(status: Status) -> None:
            self.status.append(f"{status.agent}: {status_text(status)}")

        async def on_reply(reply: Reply) -> None:
            self.replies.append(reply)
            self.arrived.set()

        await run(Callbacks(on_status, None, on_reply))

    async def job(self, job: Job, run: JobRun) -> bool:
        await self(job, run)
        return True

    def texts(self) -> list[str]:
        """As the front-ends show them (the Legatus's answers: no header)."""
        return [reply_text(r, "") for r in self.replies]


def config(castra_dir: Path, fake_cli: FakeCli, extra: str = "") -> Config:
    return fake_cli_config(castra_dir, fake_cli, f'timezone = "Europe/Rome"\n{extra}')


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
async def app(castra_dir: Path, fake_cli: FakeCli, clock: FakeClock) -> AsyncIterator[LegioApp]:
    opened = await LegioApp.open(config(castra_dir, fake_cli), clock=clock)
    yield opened
    await opened.close()


@pytest.fixture
async def shown() -> Shown:
    return Shown()


@pytest.fixture
async def scheduled(app: LegioApp, shown: Shown, clock: FakeClock) -> tuple[Scheduler, FakeClock]:
    """The app's scheduler, started (the app's close stops it)."""
    await app.attach(shown)
    await app.start_jobs()
    await settle(app.engine.scheduler, clock)
    return app.engine.scheduler, clock


async def stored(app: LegioApp) -> list[Nuntius]:
    return list(reversed(await app.engine.praetorium.get_history(100)))


# ------------------------------------------------------------------ running jobs


async def test_a_one_shot_job_runs_once_at_its_time_and_caesar_gets_the_answer(
    app: LegioApp, shown: Shown, scheduled: tuple[Scheduler, FakeClock]
) -> None:
    scheduler, clock = scheduled
    due = START + timedelta(hours=8)  # 18:00 in Rome
    await scheduler.jobs.add(
        new_job("REPLY Time to call Marcus.", due, name="call Marcus"), 50, START
    )
    scheduler.changed()
    await settle(scheduler, clock)
    assert clock.deadline == due  # it sleeps until the job is due, no polling
    await go_to(scheduler, clock, due - timedelta(minutes=1))
    assert shown.texts() == []
    await go_to(scheduler, clock, due)
    assert shown.texts() == ["⏰ call Marcus\nTime to call Marcus."]
    request, answer = await stored(app)
    assert (request.sender, request.audience) == ("scheduler", ("legatus",))
    assert request.text == (
        '⏰ Scheduled job #1 "call Marcus", due Mon 2026-11-23 18:00 CET. '
        "The request, set earlier by Caesar:\nREPLY Time to call Marcus."
    )
    assert (answer.sender, answer.audience, answer.reply_to) == ("legatus", ("caesar",), request.id)
    await go_to(scheduler, clock, due + timedelta(days=30))
    assert len(shown.replies) == 1
    job = await scheduler.jobs.get(1)
    assert job is not None
    assert (job.enabled, job.next_run, job.last_run, job.last_outcome, job.runs) == (
        False,
        None,
        due,
        "answer",
        1,
    )
    assert clock.deadline is None  # nothing left to wait for


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (  # the last Sunday of March 2027 (the 28th): 02:00 CET jumps to 03:00 CEST
            datetime(2027, 3, 26, 12, 0, tzinfo=UTC),
            [
                ("02:30", "2027-03-27 01:30"),
                ("08:00", "2027-03-27 07:00"),
                ("02:30", "2027-03-28 01:00"),  # 02:30 does not exist: right after the jump
                ("08:00", "2027-03-28 06:00"),
                ("02:30", "2027-03-29 00:30"),
                ("08:00", "2027-03-29 06:00"),
            ],
        ),
        (  # the last Sunday of October 2027 (the 31st): 03:00 CEST goes back to 02:00 CET
            datetime(2027, 10, 29, 12, 0, tzinfo=UTC),
            [
                ("02:30", "2027-10-30 00:30"),
                ("08:00", "2027-10-30 06:00"),
                ("02:30", "2027-10-31 00:30"),  # 02:30 comes twice: it runs once
                ("08:00", "2027-10-31 07:00"),
                ("02:30", "2027-11-01 01:30"),
                ("08:00", "2027-11-01 07:00"),
            ],
        ),
    ],
)
async def test_cron_jobs_keep_rome_local_time_across_the_dst_changes(
    tmp_path: Path, start: datetime, expected: list[tuple[str, str]]
) -> None:
    runs: list[tuple[str, str]] = []
    clock = FakeClock(start)

    async def runner(job: Job, nuntius: Nuntius) -> str:
        runs.append((job.name, f"{clock.now():%Y-%m-%d %H:%M}"))
        return "answer"

    async with await Praetorium.open(tmp_path / "p.db") as praetorium:
        jobs = JobStore(praetorium)
        for expression in ("0 8 * * *", "30 2 * * *"):
            [first] = next_crons(expression, ROME, start, 1)
            time = f"{first.astimezone(ROME):%H:%M}"
            await jobs.add(new_job("x", first, name=time, cron=expression), 50, start)
        scheduler = Scheduler(jobs, runner, clock=clock)
        await scheduler.start()
        await settle(scheduler, clock)
        for _ in expected:
            assert clock.deadline is not None
            await go_to(scheduler, clock, clock.deadline)
        await scheduler.stop()
    assert runs == expected


async def test_a_job_missed_three_times_while_down_runs_once_late_on_start(
    app: LegioApp, shown: Shown, clock: FakeClock
) -> None:
    jobs = JobStore(app.engine.praetorium)
    hourly = "0 * * * *"
    await jobs.add(
        new_job("REPLY digest", START + timedelta(hours=1), name="digest", cron=hourly),
        50,
        START,
    )
    clock.set(START + timedelta(hours=3, minutes=30))  # 10:00, 11:00, 12:00 missed
    scheduler = app.engine.scheduler
    await app.attach(shown)
    await app.start_jobs()
    await settle(scheduler, clock)
    assert shown.texts() == ["⏰ digest\ndigest"]
    [request, _] = await stored(app)
    assert request.text.startswith(
        '⏰ Scheduled job #1 "digest", due Mon 2026-11-23 11:00 CET, runs late '
        "(Mon 2026-11-23 13:30 CET): Legio was not running"
    )
    job = await jobs.get(1)
    assert job is not None
    assert job.next_run == START + timedelta(hours=4)  # the next hour after now
    assert clock.deadline == START + timedelta(hours=4)
    await go_to(scheduler, clock, START + timedelta(hours=4))
    assert len(shown.replies) == 2
    assert "runs late" not in (await stored(app))[-2].text


async def test_a_job_killed_mid_run_is_not_run_again_and_is_announced(
    castra_dir: Path, fake_cli: FakeCli, shown: Shown
) -> None:
    cfg = config(castra_dir, fake_cli)
    clock = FakeClock(START)
    app = await LegioApp.open(cfg, clock=clock)
    scheduler = app.engine.scheduler
    due = START + timedelta(minutes=5)
    await scheduler.jobs.add(new_job("SLEEP 3", due, target="vorenus", name="review"), 50, START)
    await app.attach(shown)
    await app.start_jobs()
    clock.set(due)
    await until_asked(fake_cli, "vorenus")
    job = await scheduler.jobs.get(1)
    assert job is not None
    assert job.running
    assert job.running_seq is not None
    # the daemon dies: the run is cut off, nothing is written after this point
    await scheduler.stop(0)
    await app.close()

    clock = FakeClock(due + timedelta(seconds=30))
    app = await LegioApp.open(cfg, clock=clock)  # a new daemon on the same castra
    try:
        [(nuntius, agents)] = await app.notice_interruptions()
        assert (nuntius.sender, nuntius.seq, agents) == ("scheduler", job.running_seq, ["vorenus"])
        notice = interruption_notice(nuntius.seq, nuntius.text, agents)
        assert notice.startswith('⚠️ Interrupted by a restart: "⏰ Scheduled job #1 "review"')
        assert notice.endswith("no answer from vorenus). Send /retry to run it again.")
        scheduler = app.engine.scheduler
        await app.attach(shown)
        await app.start_jobs()
        await go_to(scheduler, clock, due + timedelta(days=2))
        assert shown.replies == []
        job = await scheduler.jobs.get(1)
        assert job is not None
        assert (job.running, job.enabled, job.last_outcome, job.runs) == (
            False,
            False,
            "interrupted",
            1,
        )
        assert await app.notice_interruptions() == []  # announced once
    finally:
        await app.close()
    vorenus = processes_of(fake_cli, "vorenus")
    assert sum(len(p.prompts) for p in vorenus) == 1  # asked once, never again


async def test_jobs_for_two_agents_run_in_parallel_and_for_one_agent_in_turn(
    app: LegioApp, shown: Shown, scheduled: tuple[Scheduler, FakeClock], fake_cli: FakeCli
) -> None:
    scheduler, clock = scheduled
    due = START + timedelta(hours=1)
    jobs = scheduler.jobs
    await jobs.add(new_job("SLEEP 30", due, target="vorenus", name="long"), 50, START)
    await jobs.add(new_job("REPLY quick", due, target="pullo", name="quick"), 50, START)
    await jobs.add(new_job("REPLY second", due, target="vorenus", name="second"), 50, START)
    scheduler.changed()
    await settle(scheduler, clock)
    clock.set(due)
    await asyncio.wait_for(shown.arrived.wait(), 20)
    # pullo answered while vorenus is still on its first job; vorenus's second one waits
    assert [r.agent for r in shown.replies] == ["pullo"]
    assert rendered(app, shown.replies[0]).startswith("⏰ quick\n⚔️ pullo — ")
    assert app.engine.sessions.state("vorenus") == "working"
    assert "vorenus: ⏳ Queued: vorenus is finishing an earlier request..." in shown.status
    await until_asked(fake_cli, "vorenus")
    await app.engine.sessions.interrupt("vorenus")
    await settle(scheduler, clock)
    assert [(r.agent, r.kind) for r in shown.replies] == [
        ("pullo", "answer"),
        ("vorenus", "interrupted"),
        ("vorenus", "answer"),
    ]
    assert rendered(app, shown.replies[2]).endswith("━━━━━━━━━━━━\nsecond")
    # a job's nuntius is visible to its target and to Caesar, not to the other centurio
    [to_pullo] = [n for n in await stored(app) if n.audience == ("pullo",)]
    pullo_sees = await app.engine.praetorium.get_visible_nuntii("pullo", 50)
    vorenus_sees = await app.engine.praetorium.get_visible_nuntii("vorenus", 50)
    caesar_sees = await app.engine.praetorium.get_visible_nuntii("caesar", 50)
    assert to_pullo.id in {n.id for n in pullo_sees} & {n.id for n in caesar_sees}
    assert to_pullo.id not in {n.id for n in vorenus_sees}
    assert {j.last_outcome for j in await jobs.active()} == set()  # all done
    assert [j.last_outcome for j in [await jobs.get(i) for i in (1, 2, 3)] if j] == [
        "interrupted",
        "answer",
        "answer",
    ]


# ------------------------------------------------------------------ /jobs and /cancel


async def test_jobs_and_cancel_answer_at_once(
    app: LegioApp, shown: Shown, scheduled: tuple[Scheduler, FakeClock]
) -> None:
    scheduler, clock = scheduled
    admin = Admin(app)
    assert await admin.run("/jobs") == ["No job is scheduled. Ask the Legatus to set one."]
    at_six = START + timedelta(hours=8)
    await scheduler.jobs.add(new_job("REPLY call", at_six, name="call Marcus"), 50, START)
    weekdays = "0 8 * * MON-FRI"
    [first] = next_crons(weekdays, ROME, START, 1)
    await scheduler.jobs.add(
        new_job("digest please", first, target="pullo", name="digest", cron=weekdays), 50, START
    )
    scheduler.changed()
    assert await admin.run("/jobs") == [
        '#1 "call Marcus" → legatus · once · next Mon 2026-11-23 18:00 CET\n'
        "#2 \"digest\" → pullo · cron '0 8 * * MON-FRI' (Europe/Rome) · "
        "next Tue 2026-11-24 08:00 CET"
    ]
    assert await admin.run("/cancel 1") == ['Cancelled job #1 "call Marcus".']
    assert await admin.run("/cancel #1") == ["No scheduled job #1; /jobs lists them."]
    assert await admin.run("/cancel soon") == [
        "Use /cancel <n> with a job number from /jobs, e.g. /cancel 3."
    ]
    [listing] = await admin.run("/jobs")
    assert listing.startswith('#2 "digest"')
    assert "call Marcus" not in listing
    await settle(scheduler, clock)
    await go_to(scheduler, clock, at_six + timedelta(minutes=1))
    assert shown.replies == []  # the cancelled job never runs
    assert "/jobs — scheduled jobs, with their next run" in (await admin.run("/help"))[0]


# ------------------------------------------------------------------ the Legatus's tools


async def call(app: LegioApp, name: str, args: dict[str, object]) -> str:
    [reply] = await app.handle_message(f"CALL_TOOL legatus_tools {name} {json.dumps(args)}")
    return reply.text.removeprefix("TOOL_RESULT: ")


async def test_the_legatus_schedules_lists_and_cancels_jobs_through_its_tools(
    castra_dir: Path, fake_cli: FakeCli, shown: Shown
) -> None:
    clock = FakeClock(START)
    cfg = config(castra_dir, fake_cli, "[scheduler]\nmax_jobs = 2")
    app = await LegioApp.open(cfg, clock=clock)
    scheduler = app.engine.scheduler
    await app.attach(shown)
    await app.start_jobs()
    try:
        answer = await call(
            app,
            "schedule_job",
            {"request": "digest of dependency changes", "target": "Pullo", "cron": "0 8 * * 1-5"},
        )
        assert answer == (
            'Scheduled job #1 "digest of dependency changes" for pullo, '
            "cron '0 8 * * 1-5' (Europe/Rome); next runs: Tue 2026-11-24 08:00 CET; "
            "Wed 2026-11-25 08:00 CET; Thu 2026-11-26 08:00 CET."
        )
        await settle(scheduler, clock)
        assert clock.deadline == datetime(2026, 11, 24, 7, 0, tzinfo=UTC)  # the scheduler knows
        answer = await call(
            app, "schedule_job", {"request": "REPLY ring", "in": "2h", "name": "ring"}
        )
        assert answer == (
            'Scheduled job #2 "ring" for legatus, once; runs once: Mon 2026-11-23 12:00 CET.'
        )
        await settle(scheduler, clock)
        assert clock.deadline == START + timedelta(hours=2)

        bad = {
            "over max_jobs": {"request": "x", "at": "2026-12-01T09:00"},
            "bad cron": {"request": "x", "cron": "0 25 * * *"},
            "four fields": {"request": "x", "cron": "0 8 * *"},
            "past": {"request": "x", "at": "2026-11-23T09:59"},
            "unknown agent": {"request": "x", "target": "brutus", "in": "1h"},
            "two schedules": {"request": "x", "in": "1h", "cron": "0 8 * * *"},
            "bad delay": {"request": "x", "in": "soon"},
        }
        errors = {what: await call(app, "schedule_job", args) for what, args in bad.items()}
        assert errors == {
            "over max_jobs": "Error: 2 jobs are already scheduled, the most allowed "
            "(scheduler.max_jobs in legio.toml); cancel one first. Nothing was scheduled.",
            "bad cron": "Error: invalid cron expression '0 25 * * *': "
            "Bad hour. Nothing was scheduled.",
            "four fields": "Error: invalid cron expression '0 8 * *': it needs five fields "
            "(minute hour day-of-month month day-of-week), e.g. '0 8 * * MON-FRI'. "
            "Nothing was scheduled.",
            "past": "Error: Mon 2026-11-23 09:59 CET is in the past (it is now "
            "Mon 2026-11-23 10:00 CET); give a future time. Nothing was scheduled.",
            "unknown agent": "Error: no agent named 'brutus'; choose one of: legatus, pullo, "
            "vorenus. Nothing was scheduled.",
            "two schedules": "Error: give exactly one of 'at', 'in' or 'cron'. "
            "Nothing was scheduled.",
            "bad delay": "Error: cannot read the delay 'soon': write it like 90m, 2h, 2h30m "
            "or 1d (d, h, m). Nothing was scheduled.",
        }
        assert len(await scheduler.jobs.active()) == 2  # nothing stored by the mistakes

        listing = await call(app, "list_jobs", {})
        assert listing.splitlines() == [
            '#2 "ring" → legatus · once · next Mon 2026-11-23 12:00 CET',
            "#1 \"digest of dependency changes\" → pullo · cron '0 8 * * 1-5' (Europe/Rome) · "
            "next Tue 2026-11-24 08:00 CET",
        ]
        assert await call(app, "cancel_job", {"id": 1}) == (
            'Cancelled job #1 "digest of dependency changes".'
        )
        assert await call(app, "cancel_job", {"id": 1}) == (
            "Error: no scheduled job #1 (list_jobs shows them)"
        )
        await go_to(scheduler, clock, START + timedelta(hours=2))
        assert shown.texts() == ["⏰ ring\nring"]
    finally:
        await app.close()


# ------------------------------------------------------------------ parsing and config


def test_schedules_are_read_in_the_owners_zone() -> None:
    assert check_cron("  0  8 * *   mon-fri ") == "0 8 * * mon-fri"
    with pytest.raises(ScheduleError, match="Bad day-of-month"):
        check_cron("0 0 31 2 *")  # February never has a 31st
    assert parse_at("2027-03-28T02:30", ROME) == datetime(2027, 3, 28, 1, 30, tzinfo=UTC)
    assert parse_at("2026-11-23T18:00+00:00", ROME) == datetime(2026, 11, 23, 18, tzinfo=UTC)
    with pytest.raises(ScheduleError, match="ISO 8601"):
        parse_at("tomorrow at six", ROME)


def test_the_time_zone_is_checked_when_the_config_is_read(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    with pytest.raises(ConfigError) as caught:
        fake_cli_config(castra_dir, fake_cli, 'timezone = "Europe/Atlantis"')
    assert (
        "timezone: unknown time zone 'Europe/Atlantis'; use an IANA name such as Europe/Rome"
        in str(caught.value)
    )
    cfg = fake_cli_config(castra_dir, fake_cli)
    assert (cfg.timezone, cfg.scheduler.max_jobs) == ("", 50)


# ------------------------------------------------------------------ the Telegram daemon


async def test_a_job_due_while_legio_was_down_reaches_caesars_telegram_chat(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    past = datetime.now(UTC) - timedelta(hours=3)
    async with await Praetorium.open(Castra(castra_dir).praetorium_path) as praetorium:
        jobs = JobStore(praetorium)
        await jobs.add(new_job("REPLY Call Marcus now.", past, name="call Marcus"), 50, past)
    async with running_bot(castra_dir, fake_cli) as bot:
        call = await bot.answer(0, lambda text: text.startswith("⏰"))
        assert call.params["text"] == "⏰ call Marcus\nCall Marcus now."
        assert int(call.params["chat_id"]) == CAESAR
        [request, _] = await stored(bot.app)
        assert "runs late" in request.text
        jobs = JobStore(bot.app.engine.praetorium)
        for _ in range(2000):
            job = await jobs.get(1)
            if job is not None and job.runs == 1:
                break
            await asyncio.sleep(0.005)
        call = await bot.answer(await bot.ask("/jobs"))
        assert call.params["text"] == "No job is scheduled. Ask the Legatus to set one."
    assert [t for t in bot.answers() if t.startswith("⏰")] == ["⏰ call Marcus\nCall Marcus now."]


async def test_a_scheduled_answer_streams_into_a_draft_like_caesars(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    words = " ".join(f"word{i}" for i in range(40))
    past = datetime.now(UTC) - timedelta(minutes=5)
    async with await Praetorium.open(Castra(castra_dir).praetorium_path) as praetorium:
        await JobStore(praetorium).add(
            new_job(f"STREAM 4 0.6 {words}", past, name="digest"), 50, past
        )
    async with running_bot(castra_dir, fake_cli) as bot:
        final = await bot.answer(0, lambda text: text.startswith("⏰"))
        assert final.params["text"] == f"⏰ digest\n{words}"
        texts = [text for _, text in bot.api.drafts(CAESAR) if text]
        assert texts and texts[0] != words  # shown while it was being written
        assert all(words.startswith(text) for text in texts)
        assert max(c.at for c in bot.api.calls_of("sendMessageDraft")) < final.at


def test_a_job_due_while_down_is_answered_in_the_console_before_it_closes(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async def add() -> None:
        past = datetime.now(UTC) - timedelta(minutes=10)
        async with await Praetorium.open(Castra(castra_dir).praetorium_path) as praetorium:
            job = new_job("REPLY Drink water.", past, name="water")
            await JobStore(praetorium).add(job, 50, past)

    asyncio.run(add())
    result = run_console(castra_dir, fake_cli, "")
    assert result.returncode == 0, result.stderr
    assert "legatus: ⏰ water\nDrink water." in result.stdout
    assert result.stdout.rstrip().endswith("Legio console closed.")


async def test_the_system_clock_wakes_at_its_deadline_or_when_told() -> None:
    clock = SystemClock()
    wake = asyncio.Event()
    await clock.sleep_until(clock.now() - timedelta(seconds=1), wake)  # due: no wait
    wake.set()
    await clock.sleep_until(None, wake)  # woken: no wait
    assert clock.now().tzinfo is UTC


async def test_a_scheduled_job_over_budget_does_not_start_and_waits_for_retry(
    castra_dir: Path, fake_cli: FakeCli, shown: Shown
) -> None:
    clock = FakeClock(START)
    app = await LegioApp.open(
        config(castra_dir, fake_cli, "[budget]\ndaily_usd = 1.0"), clock=clock
    )
    try:
        spent = QueryUsage(agent="pullo", cost_usd=2.5)  # spent today
        await app.engine.praetorium.records.record_turn(spent)
        due = START + timedelta(minutes=5)
        job = new_job("REPLY the digest", due, target="vorenus", name="digest")
        await app.engine.scheduler.jobs.add(job, 50, START)
        await app.attach(shown)
        await app.start_jobs()
        await go_to(app.engine.scheduler, clock, due)
        [reply] = shown.replies
        assert reply.kind == "held"
        assert rendered(app, reply).startswith(
            "⏰ digest\n💰 Today's budget is spent: the legion has used"
        )
        assert "$2.50 of its $1.00 a day, so vorenus did not start" in reply.text
        assert processes_of(fake_cli, "vorenus") == []  # no agent was started
        [(request, agents)] = await app.engine.praetorium.interruptions()  # /retry runs it later
        assert (request.sender, agents) == ("scheduler", ["vorenus"])
    finally:
        await app.close()
