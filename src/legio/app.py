"""``LegioApp``: the running Legio, and the one door the front-ends use.

``LegioApp.open(config)`` opens the engine (``legio.engine`` wires its parts, in
lifecycle order, in one place); ``close()`` takes it down. The app is the door: typed
methods that answer the front-ends' questions and act for them; no front-end reaches
past it (``tests/test_structure.py``).

A front-end hands it Caesar's messages (``handle_message``, ``retry``, edits) and asks
it typed questions or to act. Its rooms (``legio.doors``) hold one kind of work each:
``work`` (projects, cards, checks, the forge), ``operations`` (status, systemd, export),
``conversation`` (Telegram's conversation facts), ``inbox`` (files and voice notes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from legio.audience import Events
from legio.castra import Roster
from legio.config import Config
from legio.doors.cockpitdoor import CockpitDoor
from legio.doors.inboxdoor import InboxDoor
from legio.doors.opsdoor import OperationsDoor
from legio.doors.talkdoor import ConversationDoor
from legio.doors.workdoor import WorkDoor
from legio.engine import Engine
from legio.errors import LegioError
from legio.fence.sandbox import sandbox_status_lines
from legio.jobs.schedule import zone
from legio.jobs.scheduler import Clock
from legio.legatus.intake import Fetch
from legio.legatus.scheduling import JobRun, job_lines
from legio.limits.budget import UsageReport
from legio.limits.plan import PlanHealth
from legio.names import CAESAR, LEGATUS
from legio.operations.runner import DRAIN_NOTICE
from legio.request import (
    UNWATCHED,
    Reply,
    Request,
    Watch,
)
from legio.sessions.context import ContextReport
from legio.sessions.desk import Target
from legio.sessions.errands import Stopped
from legio.sessions.history import estimate_tokens, format_line
from legio.sessions.slot import AgentStatus
from legio.store.attachments import Attachment
from legio.store.checkstore import CheckRecord
from legio.store.files import DOWNLOAD_LIMIT, guess_mime, kind_of, safe_name
from legio.store.grants import Grant
from legio.store.jobstore import Job, JobStore
from legio.store.praetorium import Nuntius, SearchHit
from legio.store.pullstore import PullRecord
from legio.store.records import Compaction, UsageRow, UsageTotals
from legio.store.threads import Topic

# The door's own types, and those of its answers that are defined in the engine, where a
# front-end may not import them (tests/test_structure.py); every other type is imported
# from where it is defined.
__all__ = [
    "DOWNLOAD_LIMIT",
    "AgentStatus",
    "Attachment",
    "CheckRecord",
    "Compaction",
    "ContextReport",
    "ContextView",
    "Fetch",
    "Grant",
    "Job",
    "JobRun",
    "LegioApp",
    "Nuntius",
    "PullRecord",
    "SearchHit",
    "StatusRow",
    "Stopped",
    "Target",
    "Topic",
    "UsageRow",
    "estimate_tokens",
    "format_line",
    "guess_mime",
    "kind_of",
    "safe_name",
]


@dataclass(frozen=True)
class StatusRow:
    """One agent in ``/status``: its session, its latest summary, its usage so far."""

    status: AgentStatus
    compaction: Compaction | None
    usage: UsageTotals | None
    model: str | None = None  # "opus · effort high": its chosen model and effort, if any
    plan_first: bool = False  # /plan <name> on: its requests are planned first


@dataclass(frozen=True)
class ContextView:
    """``/context``: the report, and for the Legatus the size of its roster."""

    report: ContextReport
    roster_tokens: int


class LegioApp:
    """The engine, opened and closed in lifecycle order; see the module docstring."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine  # its parts, for the tests that look inside (never a front-end's)
        # the door's rooms (legio.doors), each given to the front-end parts that need it
        # (tests/test_structure.py: no ``app.<room>.<method>`` chain in a front-end)
        self.work = WorkDoor(engine, self.handle_message)
        self.operations = OperationsDoor(engine)
        self.conversation = ConversationDoor(engine)
        self.inbox = InboxDoor(engine)
        self.cockpit = CockpitDoor(engine)  # what only the cockpit reads

    @classmethod
    async def open(
        cls,
        config: Config,
        *,
        env: dict[str, str] | None = None,
        reap_interval_s: float = 60.0,
        clock: Clock | None = None,
        health: PlanHealth | None = None,
    ) -> LegioApp:
        """Open the engine (``legio.engine``; no agent started yet); ``LegioError`` if the
        castra is taken. ``env`` adds variables to every agent's CLI (tests point it at a
        fake API); ``clock`` drives the job scheduler (tests move it by hand)."""
        engine = await Engine.open(
            config, env=env, reap_interval_s=reap_interval_s, clock=clock, health=health
        )
        return cls(engine)

    async def close(self) -> None:
        """Take the engine down in order (``Engine.close``)."""
        await self.engine.close()

    async def attach(self, events: Events) -> Callable[[], None]:
        """Tell ``events`` (a front-end) what belongs to no request (``legio.audience``):
        notices, dispatches' answers, cards, the forge, stuck turns, backups and the
        digest, scheduled jobs, and approvals outside any request. Returns the detach."""
        return await self.engine.attach(events)

    # ---------------------------------------------------------- Caesar's messages

    async def handle_message(self, request: Request | str, watch: Watch = UNWATCHED) -> list[Reply]:
        """Answer one message from Caesar (``Legatus.handle_message``), reporting to
        ``watch``; a bare string is a request of those words. Its ``attachments`` are
        complete (``fetch_files`` or ``attach_local``); its ``receipt`` (``receive``), else now."""
        if isinstance(request, str):
            request = Request(request)
        if self.engine.operations.draining:  # /restart: nothing new until it is back
            return await self._draining(watch)
        with self.engine.operations.request():
            return await self.engine.legatus.handle_message(request, watch)

    @staticmethod
    async def _draining(watch: Watch) -> list[Reply]:
        """The notice for a request that comes while ``/restart`` drains, shown too."""
        notice = Reply(LEGATUS, DRAIN_NOTICE, "notice")
        await watch.reply(notice)
        return [notice]

    def receive(self, *, request: bool = True) -> int:
        """Stamp an arrival in order, before awaiting anything: pass the number to
        ``handle_message`` or ``stop`` (a stop ends what arrived before it). A
        ``request`` not yet handed over makes a stop wait for it (briefly): hand it over,
        or ``settle`` it when it will make none."""
        return self.engine.sessions.receipts.take(routing=request)

    def settle(self, receipt: int) -> None:
        """The arrival ``receipt`` will make no (more) requests."""
        self.engine.sessions.receipts.settle(receipt)

    async def edit_message(self, origin: str, text: str, watch: Watch = UNWATCHED) -> list[Reply]:
        """Caesar edited his message ``origin`` (``Legatus.edit``), reported to ``watch``."""
        return await self.engine.legatus.edit(origin, text, watch)

    async def retry(self, seq: int | None = None, watch: Watch = UNWATCHED) -> list[Reply]:
        """Run interrupted requests again (all pending, or the one numbered ``seq``),
        reported to ``watch``."""
        if self.engine.operations.draining:
            return await self._draining(watch)
        if self.engine.sessions.health is not None:
            self.engine.sessions.health.clear()  # a fixed login, or a limit Caesar knows is over
        with self.engine.operations.request():
            return await self.engine.legatus.retry(seq, watch)

    async def notice_interruptions(self) -> list[tuple[Nuntius, list[str]]]:
        """Requests the last run never answered, recorded as told to Caesar (once)."""
        return await self.engine.legatus.notice_interruptions()

    # ---------------------------------------------------------- scheduled work

    async def start_jobs(self) -> None:
        """Start running due jobs (each shown by the first attached front-end that takes
        it: ``Events.job``). Call it after ``notice_interruptions``: a run a restart cut
        off is noted, not repeated."""
        await self.engine.start_jobs()

    async def pause_jobs(self) -> None:
        """Start no new job run (shutdown: intake has stopped)."""
        await self.engine.scheduler.pause()

    async def job_lines(self) -> list[str]:
        """``/jobs``: one line per scheduled job, times on the owner's clock."""
        return job_lines(
            await JobStore(self.engine.praetorium).active(), zone(self.engine.config.timezone)
        )

    async def cancel_job(self, job_id: int) -> Job | None:
        """Cancel job ``job_id``; None if there is no such scheduled job."""
        job = await JobStore(self.engine.praetorium).cancel(job_id)
        if job is not None:
            self.engine.scheduler.changed()
        return job

    # ---------------------------------------------------------- questions

    def roster(self) -> Roster:
        return self.engine.castra.roster()

    def description(self, agent: str) -> str | None:
        """A centurio's description (its prompt's frontmatter), for its answers' header."""
        prompt = self.roster().centuriones.get(agent)
        return prompt.description if prompt is not None else None

    def agents(self) -> list[str]:
        """The Legatus, then every centurio."""
        return [LEGATUS, *self.roster().names]

    def own_ask_rules(self) -> dict[str, list[str]]:
        """Each agent's own ``ask:`` rules (its frontmatter), beside ``[approvals] ask``."""
        rules = {}
        for name in self.agents():
            try:
                prompt = (
                    self.engine.castra.read_legatus()
                    if name == LEGATUS
                    else self.engine.castra.read_centurio(name)
                )
            except LegioError:
                continue
            if prompt.settings.ask:
                rules[name] = list(prompt.settings.ask)
        return rules

    async def history(self, count: int) -> list[Nuntius]:
        """The latest ``count`` nuntii, newest first."""
        return await self.engine.praetorium.get_history(count)

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        """Full-text search over every nuntius (``SearchQueryError`` for a bad query)."""
        return await self.engine.praetorium.search(query, CAESAR, limit)

    async def files_of(self, seqs: Iterable[int]) -> dict[int, list[Attachment]]:
        """The files of these nuntii, by seq (nuntii without files left out)."""
        return await self.engine.sessions.attachments.of_nuntii(seqs)

    async def search_files(self, name: str, limit: int) -> list[tuple[Nuntius, Attachment]]:
        """Files whose name contains ``name``, newest first, each with its nuntius."""
        found = []
        for attachment in await self.engine.sessions.attachments.search_names(name, limit):
            seq = attachment.nuntius_seq
            found += [(n, attachment) for n in await self.engine.praetorium.get_history(1, seq + 1)]
        return found

    async def status_rows(self) -> list[StatusRow]:
        """Every agent's state, latest summary and usage, for ``/status``."""
        totals = await self.engine.praetorium.records.usage_totals()
        rows = []
        for status in self.engine.sessions.status(self.agents()):
            compaction = None
            if not status.compaction_failure:
                compaction = await self.engine.praetorium.records.latest_compaction(status.name)
            model, effort = self.engine.sessions.choices.chosen(status.name)
            model = model or self.engine.sessions.choices.short(status.model)  # its live CLI's
            label = " · ".join(filter(None, [model, f"effort {effort}" if effort else None]))
            first = self.engine.sessions.planning.first(status.name)
            row = StatusRow(status, compaction, totals.get(status.name), label or None, first)
            rows.append(row)
        return rows

    def sandbox_notes(self) -> list[str]:
        """What ``/status`` says about shell commands when they are not sandboxed."""
        return sandbox_status_lines(self.engine.config, castra=self.engine.castra)

    async def context(self, name: str) -> ContextView:
        """What agent ``name``'s next message carries (``CastraError`` if it is unusable)."""
        if name == LEGATUS:
            report = await self.engine.sessions.context_report(
                name, self.engine.legatus.status_xml()
            )
            return ContextView(report, estimate_tokens(self.engine.legatus.roster_xml()))
        return ContextView(await self.engine.sessions.context_report(name), 0)

    # ---------------------------------------------------------- actions

    async def compact(self, name: str, instructions: str | None = None) -> Compaction:
        """Have agent ``name`` sum up its conversation now (waits for its turn)."""
        return await self.engine.sessions.compact(name, instructions)

    async def reset(self, name: str) -> bool:
        """Forget agent ``name``'s conversation; whether there was one."""
        return await self.engine.sessions.reset(name)

    async def stop(self, names: list[str], receipt: int | None = None) -> list[Stopped]:
        """End what ``names`` were asked before ``receipt`` (``receive``; None: now): the
        turn under way, the queued requests; what each lost (nothing: not listed)."""
        return await self.engine.sessions.stop(names, receipt)

    async def stop_all(self, receipt: int | None = None) -> list[Stopped]:
        """End everything every agent was asked before ``receipt`` (None: now)."""
        return await self.stop(self.agents(), receipt)

    # ---------------------------------------------------------- approvals

    async def approval_grants(self) -> list[Grant]:
        """Caesar's "always" grants still in force (``/approvals``)."""
        gate = self.engine.sessions.approvals
        return await gate.grants() if gate is not None else []

    async def revoke_grant(self, grant_id: int) -> Grant | None:
        """End an "always" grant (``/revoke``); None if there is no such grant."""
        gate = self.engine.sessions.approvals
        return await gate.revoke(grant_id) if gate is not None else None

    async def approval_status(self, request_id: int) -> str | None:
        """How a recorded approval request ended (``pending``, ``expired``…), if known."""
        gate = self.engine.sessions.approvals
        if gate is None or gate.store is None:
            return None
        return await gate.store.request_status(request_id)

    # ---------------------------------------------------------- settings front-ends show

    def max_input_tokens(self) -> int:
        return self.engine.config.max_input_tokens

    def ask_rules(self) -> list[str]:
        """``[approvals] ask``: the rules every agent's tool calls are asked by."""
        return list(self.engine.config.approvals.ask)

    def console_history_path(self) -> Path:
        """Where the console keeps the lines Caesar typed."""
        return self.engine.castra.root / "state" / "console_history"

    async def restart(self, mode: Literal["wait", "now"]) -> str:
        """``/restart``: drain (running requests finish, or are stopped with ``now``; new
        ones refused), then start again in place. The line for Caesar."""
        return await self.engine.operations.restart(mode, self.stop_all)

    def plan_lines(self) -> list[str]:
        """The plan's windows as the API last reported them (subscription logins only)."""
        return (
            self.engine.sessions.health.lines() if self.engine.sessions.health is not None else []
        )

    # ---------------------------------------------------------- spending and limits

    async def usage(self) -> UsageReport | None:
        """``/usage``: spend per agent and model, today and over the last 7 days."""
        budget = self.engine.sessions.budget
        return await budget.usage_report() if budget is not None else None
