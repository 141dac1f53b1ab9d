"""The engine, wired in one place: Legio's parts opened in lifecycle order, closed in reverse.

``Engine.open(config)``: lock the castra (one daemon per castra), keep secrets out of the
agents' environment, end agent CLIs an earlier run left, open the praetorium and memoria,
the approval gate and the budget, the sessions and their idle reaper, then the Legatus and
its job scheduler (started by the front-end, through the door, once the interruptions
were noted), and the parts the door answers from: intake of files, projects' checks
(the runs a restart cut off marked so) and desk, Telegram's conversation facts, voice, the
forge, the operations' routine (backups, digest). ``close()``: the routine, the scheduler
(running jobs get the shutdown grace), running checks, every agent, the forge, the
praetorium, the voice worker, the lock.

Nothing here is a front-end's business: ``legio.app`` is the door.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from legio.audience import Audience, Events
from legio.castra import Castra
from legio.config import Config
from legio.fence.policy import scrub_environment
from legio.forge.station import ForgeStation
from legio.jobs.schedule import zone
from legio.jobs.scheduler import Clock, Scheduler
from legio.legatus.intake import Intake
from legio.legatus.orchestrator import Legatus
from legio.legatus.scheduling import attach_scheduler
from legio.limits.budget import Budget
from legio.limits.plan import PlanHealth
from legio.media.listening import Listener
from legio.memoria import MemoriaStore
from legio.names import LEGATUS
from legio.operations.private import make_private
from legio.operations.routine import Routine
from legio.operations.runner import Operations
from legio.projects.checks import Checks
from legio.sessions.desk import ProjectDesk
from legio.sessions.gatekeeper import Gatekeeper
from legio.sessions.manager import SessionManager
from legio.sessions.turnback import prune_all
from legio.store.checkstore import CheckStore
from legio.store.grants import ApprovalStore
from legio.store.lifecycle import CastraLock, agent_env, new_run_id, reap_orphans
from legio.store.praetorium import Praetorium
from legio.store.threads import ThreadStore


@dataclass
class Engine:
    """Legio's running parts; see the module docstring."""

    config: Config
    castra: Castra
    praetorium: Praetorium
    memoria: MemoriaStore
    sessions: SessionManager
    legatus: Legatus
    lock: CastraLock | None
    clock: Clock | None = None
    audience: Audience = field(default_factory=Audience)  # the front-ends, told as one
    scheduler: Scheduler = field(init=False)
    intake: Intake = field(init=False)  # files from Caesar
    checks: Checks = field(init=False)  # projects' checks, run in the agents' copies
    projects: ProjectDesk = field(init=False)  # /diff, /projects, /drop
    threads: ThreadStore = field(init=False)  # Telegram messages, topics, edits
    voice: Listener = field(init=False)  # voice notes transcribed
    forge: ForgeStation = field(init=False)  # Publish, pull requests, CI, issues
    routine: Routine = field(init=False)  # automatic backups, the morning digest
    operations: Operations = field(init=False)  # status, watchdogs, upkeep (legio.operations)
    _following: bool = field(init=False, default=False)  # the forge's events, to the audience

    def __post_init__(self) -> None:
        audience = self.audience  # what belongs to no request: told to every front-end
        self.scheduler = attach_scheduler(self.legatus, audience.job, clock=self.clock)
        self.legatus.conversations.on_dispatch = audience.dispatched  # shown in its topic
        self.sessions.cards.follow(audience.card)  # a dispatch's card; a check that ended
        if self.sessions.approvals is not None:  # a tool call outside any request
            self.sessions.approvals.standing = audience.asker
        for part in (self.sessions.budget, self.sessions.health):
            if part is not None:
                part.notify = audience.notice
        files = self.sessions.files
        self.intake = Intake(self.praetorium, self.sessions.attachments, files)
        self.checks = Checks(self.sessions.projects, CheckStore(self.praetorium))
        self.projects = ProjectDesk(self.sessions, self.checks)
        self.sessions.cards.run_checks(self.checks)  # a check after each card's turn
        self.threads = ThreadStore(self.praetorium)
        self.voice = Listener(self.config, files)
        self.forge = ForgeStation.open(self.config, self.sessions.projects, self.praetorium)
        self.sessions.project_tools = self.forge.tools_for  # served in-process
        if self.sessions.approvals is not None:  # the forge's writes ask Caesar first
            self.forge.confirm = self.sessions.approvals.confirm
        self.routine = Routine(self.config, self.praetorium, zone(self.config.timezone))
        self.operations = Operations(
            self.config,
            self.sessions,
            self.praetorium,
            lambda: [LEGATUS, *self.castra.roster().names],
            pause_jobs=self.scheduler.pause,
        )
        self.intake.room = self.operations.disk.refusal  # no file taken on a full disk
        self.operations.notify = self.forge.notify = audience.notice  # a low disk; rate limits
        self.operations.follow_stuck(audience.stuck)
        self.routine.follow(audience.operation)  # a failed backup, the digest
        self.operations.start()

    @classmethod
    async def open(
        cls,
        config: Config,
        *,
        env: dict[str, str] | None = None,
        reap_interval_s: float = 60.0,
        clock: Clock | None = None,
        health: PlanHealth | None = None,
    ) -> Engine:
        """Open every part (no agent started yet); ``LegioError`` if the castra is taken."""
        lock = CastraLock(config.castra)
        lock.acquire()
        scrub_environment(config)  # before any agent's CLI inherits os.environ
        try:
            run_id = new_run_id()
            await asyncio.to_thread(reap_orphans, config.castra, run_id)
            praetorium = await Praetorium.open(Castra(config.castra).praetorium_path)
            await asyncio.to_thread(make_private, config)  # the castra is its user's alone
        except BaseException:
            lock.release()
            raise
        memoria = MemoriaStore(
            config.castra, config.memoria.max_document_bytes, config.memoria.max_commentarii
        )
        approvals = Gatekeeper(config, ApprovalStore(praetorium))
        await approvals.load()
        budget = Budget(config, praetorium, zone=zone(config.timezone))
        sessions = SessionManager(
            config,
            praetorium,
            memoria,
            env={**(env or {}), **agent_env(config.castra, run_id)},
            reap_interval_s=reap_interval_s,
            approvals=approvals,
            budget=budget,
            health=health or PlanHealth(),  # tests pass one with a controllable clock
        )
        await sessions.choices.load()  # /model and /effort as a restart left them
        await sessions.planning.load()  # /plan <agent> on, as a restart left it
        sessions.start()
        legatus = Legatus(config, praetorium, memoria, sessions)
        castra = Castra(config.castra)
        engine = cls(config, castra, praetorium, memoria, sessions, legatus, lock, clock)
        try:
            await engine.checks.recover()  # the checks a restart cut off say so
            await prune_all(sessions.projects)  # what undo kept over 14 days ago
        except BaseException:
            await engine.close()
            raise
        return engine

    async def start_jobs(self) -> None:
        await self.scheduler.start()
        self.routine.start()

    async def attach(self, events: Events) -> Callable[[], None]:
        """Tell ``events`` what belongs to no request; the forge is followed from the first."""
        detach = self.audience.attach(events)
        if not self._following:
            self._following = True
            await self.forge.follow(self.audience.forge)
        return detach

    async def close(self) -> None:
        """Stop the scheduler (running jobs get the shutdown grace), disconnect every
        agent, then close the praetorium and release the castra."""
        try:
            await self.routine.stop()
            await self.operations.close()
            await self.scheduler.stop(self.config.shutdown_grace_seconds)
            await self.checks.close()  # running checks killed, recorded as cancelled
            await self.sessions.shutdown()
            await self.forge.close()
            await self.praetorium.close()
            self.voice.close()
        finally:
            if self.lock is not None:
                self.lock.release()
                self.lock = None
