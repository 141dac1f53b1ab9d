"""Agent sessions: one long-lived ``ClaudeSDKClient`` per agent, each nuntius given once.

``SessionManager.answer(name, nuntius)`` runs one query for an agent, one at a time per
agent (its ``TicketLock``, held through ``turn_of``), different agents in parallel.
What the query carries is planned by ``legio.sessions.context``: a fresh SDK session
gets the agent's summary and window of history, a continuing one only what it has not
seen. The checkpoint (SDK session id, last seq given, prompt hash) is saved in the
praetorium *before* the query is sent: a CLI finishes a turn into its transcript even
if the daemon dies meanwhile, so a resumed session must not be sent it again.

A session is rebuilt as a new SDK session when its prompt changes, when its context
passes ``max_input_tokens`` (after a summary: ``legio.sessions.compaction``), when the
model refuses a query as too long (compaction, then the query once more), or on
``reset``. An idle session is closed by the reaper and resumed on its next request (a
fresh session with history if that fails), its CLI started as soon as the request is
routed (``prewarm``, while it is stored), not when its turn comes; so is a crashed CLI,
and one whose request is on a project (``legio.projects.copies``: it works in its copy;
the branch is published after).
Centuriones are built in; other agents (the Legatus) register a spec factory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from legio.castra import AgentPrompt, Castra
from legio.config import Config
from legio.fence.cliconfig import LoginSync
from legio.limits.budget import Budget
from legio.limits.plan import PlanHealth
from legio.memoria import MemoriaStore
from legio.projects.copies import Projects
from legio.request import UNWATCHED, Status, Watch
from legio.sessions.asides import Asides
from legio.sessions.cards import WorkCards
from legio.sessions.choices import Choices
from legio.sessions.client import AgentSession
from legio.sessions.compaction import compact_now, compact_or_fall_back
from legio.sessions.context import ContextReport, context_report
from legio.sessions.delivery import Pictures
from legio.sessions.errands import AgentErrands, Errand, Receipts, Stopped
from legio.sessions.gatekeeper import Gatekeeper
from legio.sessions.opening import open_session
from legio.sessions.outbox import Outbox, send_file_for
from legio.sessions.pipeline import Assignment, Deliver, Prefix, TurnPipeline
from legio.sessions.planning import Planning
from legio.sessions.reaper import Reaper
from legio.sessions.slot import AgentSlot, AgentStatus, ensure, warm
from legio.sessions.spec import AgentSpec, ProjectTools, SpecFactory, centurio_spec
from legio.sessions.steering import DeliverJoined, Joined, Steerer
from legio.sessions.turn import Outcome, notify
from legio.store.attachments import AttachmentStore
from legio.store.files import FileStore
from legio.store.praetorium import Nuntius, Praetorium
from legio.store.records import Compaction

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import SdkMcpTool

logger = logging.getLogger(__name__)


class SessionManager:
    """Owns every agent's SDK session; see the module docstring."""

    def __init__(
        self,
        config: Config,
        praetorium: Praetorium,
        memoria: MemoriaStore,
        *,
        reap_interval_s: float = 60.0,
        env: dict[str, str] | None = None,
        approvals: Gatekeeper | None = None,
        budget: Budget | None = None,
        health: PlanHealth | None = None,
    ) -> None:
        self.config = config
        self.approvals = approvals
        self.budget = budget  # legio.limits.budget: checked before every turn
        self.health = health  # legio.limits.plan: plan limits and logins
        if approvals is not None:
            approvals.watch_of = self.current_watch
        self.castra = Castra(config.castra)
        self.praetorium = praetorium
        self.memoria = memoria
        self.env = dict(env or {})
        self._slots: dict[str, AgentSlot] = {}
        self._specs: dict[str, SpecFactory] = {}
        idle_s = config.session_idle_timeout_minutes * 60
        self.reaper = Reaper(lambda: self._slots.values(), idle_s, reap_interval_s)
        self.attachments = AttachmentStore(praetorium)
        self.files = FileStore(self.castra.root)
        self.outbox = Outbox(self.files)  # files agents send_file in their running turn
        self.pictures = Pictures(self.files)  # image blocks, made once per file
        self.logins = LoginSync.of(self.castra.root, self.env)  # one login for all CLIs
        self.projects = Projects(config, self.castra)  # agents' copies of Caesar's repositories
        self.receipts = Receipts()  # the order requests and stops arrived in
        self.project_tools: ProjectTools | None = None  # the forge's tools (legio.engine)
        self.errands = AgentErrands(self._close_for_stop)  # requests not ended, and stops
        self.cards = WorkCards(praetorium, self.projects, self.castra.root)  # after each turn
        self.choices = Choices(config, praetorium)  # /model, /effort, @name:model
        self.asides = Asides()  # Caesar's reactions to answers, read with the next request
        self.planning = Planning(praetorium)  # /plan <agent> on, and the plans proposed
        if approvals is not None:
            approvals.planning = self.planning
        self.steerer = Steerer(praetorium, self.errands, self._slot)  # messages joining a turn
        self.pipeline = TurnPipeline(  # what happens inside an agent's turn
            praetorium,
            self.attachments,
            self.pictures,
            self.logins,
            self.projects,
            self.errands,
            self.spec,
            self._ensure,
            budget,
            health,
            self.cards,
            self.choices,
            self.asides,
            self.planning,
        )

    def _slot(self, name: str) -> AgentSlot:
        return self._slots.setdefault(name, AgentSlot(name))

    # ---------------------------------------------------------- specs

    def register(self, name: str, factory: SpecFactory) -> None:
        """Serve agent ``name`` (not a centurio, e.g. the Legatus) with its own spec."""
        self._specs[name] = factory

    async def spec(self, name: str) -> AgentSpec:
        """Agent ``name``'s spec, read now (``CastraError`` if its prompt is unusable)."""
        factory = self._specs.get(name)
        if factory is not None:
            return await factory(name)
        return centurio_spec(
            self.config, self.castra, self.memoria, name, self.outbox, self.project_tools
        )

    def send_file_tool(self, prompt: AgentPrompt) -> SdkMcpTool[Any]:  # the Legatus's
        return send_file_for(self.config, self.castra, prompt, self.outbox)

    # ---------------------------------------------------------- sessions

    async def _open(self, spec: AgentSpec, resume: str | None) -> AgentSession:
        """Start the agent's CLI (``legio.sessions.opening``): resume ``resume``, or anew."""
        return await open_session(
            self.config,
            self.castra,
            self.praetorium,
            spec,
            resume,
            env=self.env,
            approvals=self.approvals,
            budget=self.budget,
            health=self.health,
        )

    def prewarm(self, names: list[str], project: str | None = None) -> None:
        """Start the CLIs of ``names`` that have none, now, in the background: the request
        that addresses them is still being stored and routed (``legio.sessions.slot.warm``:
        it only connects). Not for a request on a project (its CLI starts in the project's
        copy, in its turn), nor for an agent whose turn is held (its CLI is busy or about
        to be made)."""
        if project is not None:
            return
        for name in names:
            slot = self._slot(name)
            if slot.session is not None or slot.lock.locked() or slot.warming is not None:
                continue
            slot.warming = asyncio.create_task(self._warm(slot), name=f"legio-warm-{name}")

    async def _warm(self, slot: AgentSlot) -> None:
        try:
            spec = self.choices.apply(await self.spec(slot.name), 0)  # the session's model
            await warm(
                slot,
                spec,
                praetorium=self.praetorium,
                open_session=lambda resume: self._open(spec, resume),
            )
        except Exception as e:  # its turn starts the CLI itself, and says what fails
            logger.info("%s: its CLI could not be started ahead of its turn: %s", slot.name, e)
        finally:
            slot.warming = None

    async def _ensure(self, slot: AgentSlot, spec: AgentSpec, watch: Watch) -> AgentSession:
        await slot.warmed()  # a CLI started ahead: taken if it still fits

        async def summarise(session: AgentSession) -> None:
            await compact_or_fall_back(self.praetorium, slot, session, spec, "ceiling", watch)

        return await ensure(
            slot,
            spec,
            praetorium=self.praetorium,
            open_session=lambda resume: self._open(spec, resume),
            before_rebuild=summarise,
        )

    # ---------------------------------------------------------- turns

    def reserve(self, name: str, receipt: int | None = None) -> Errand:
        """Take agent ``name``'s next place in line now for the request that arrived with
        ``receipt`` (``Receipts.take``; None: now); pass it to ``answer`` as ``ticket=``."""
        receipt = receipt if receipt is not None else self.receipts.take()
        return self.errands.add(name, receipt, self._slot(name).lock.ticket())

    def join(
        self, name: str, nuntius: Nuntius, receipt: int, deliver: DeliverJoined
    ) -> Joined | None:
        """Add ``nuntius`` to agent ``name``'s running turn (``legio.sessions.steering``);
        None if it runs none that can take it: then ``reserve`` its place in line."""
        return self.steerer.join(name, nuntius, receipt, deliver)

    @contextlib.asynccontextmanager
    async def turn_of(
        self,
        name: str,
        errand: Errand | None = None,
        watch: Watch = UNWATCHED,
    ) -> AsyncIterator[AgentSlot]:
        """Hold agent ``name``'s turn (its reserved ``errand``, else the next place) for
        the block; the turn always passes on when the block ends."""
        slot = self._slot(name)
        turn = errand.ticket if errand is not None else slot.lock.ticket()
        if not turn.done() and not (errand is not None and errand.stopped):
            await notify(watch, Status(name, "queued"))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                slot.lock.release()  # the turn came just as we were cancelled
            raise
        if errand is not None:
            errand.started = True
        try:
            yield slot
        finally:
            slot.lock.release()

    async def answer(
        self,
        name: str,
        nuntius: Nuntius,
        watch: Watch = UNWATCHED,
        *,
        prefix: Prefix = "",
        ticket: Errand | None = None,
        deliver: Deliver | None = None,
    ) -> Outcome:
        """Ask agent ``name`` to answer ``nuntius``; a failure becomes its error reply.

        ``ticket``: its place in line, taken with ``reserve`` when the request arrived
        (else now). ``prefix`` (the Legatus's ``<centurio_status>``; a callable is called
        when the turn comes) goes between the history and the text. ``watch`` gets what
        the agent does and its answer's text as it is written. ``deliver(outcome)`` runs
        before the agent's turn ends (one agent's answers in the order it took the
        requests); then its usage is stored. A stop (``stop``) ends it wherever it is
        (``legio.sessions.errands``).
        """
        errand = ticket if ticket is not None else self.reserve(name)
        try:
            async with self.turn_of(name, errand, watch) as slot:
                job = Assignment(slot, errand, nuntius, watch, prefix, deliver)
                return await self.pipeline.run(job)
        finally:
            self.errands.end(errand)

    async def dispatch_many(
        self,
        names: list[str],
        nuntius: Nuntius,
        watch: Watch = UNWATCHED,
        tickets: dict[str, Errand] | None = None,
        deliver: Callable[[str, Outcome], Awaitable[int | None]] | None = None,
    ) -> dict[str, Outcome]:
        """Several agents in parallel; one failing never blocks the others."""
        tickets = tickets or {}

        def delivery(name: str) -> Deliver | None:
            if deliver is None:
                return None
            return lambda outcome: deliver(name, outcome)

        results = await asyncio.gather(
            *(
                self.answer(n, nuntius, watch, ticket=tickets.get(n), deliver=delivery(n))
                for n in names
            )
        )
        return dict(zip(names, results, strict=True))

    def current_watch(self, name: str) -> Watch | None:
        """The watch of the request agent ``name`` is answering now, if any."""
        slot = self._slots.get(name)
        return slot.watch if slot else None

    # ---------------------------------------------------------- compaction

    async def compact(
        self,
        name: str,
        instructions: str | None = None,
        watch: Watch = UNWATCHED,
    ) -> Compaction:
        """``/compact``: have agent ``name`` sum up its conversation now, in its turn.

        Its session is closed afterwards; its next message starts a new one from the
        summary. Raises ``NothingToCompact``, ``AgentError`` (the conversation is then
        unchanged) or ``CastraError``.
        """
        async with self.turn_of(name, None, watch) as slot:
            await slot.warmed()  # one CLI per session: a CLI started ahead is this one
            spec = await self.spec(name)
            opener = lambda resume: self._open(spec, resume)  # noqa: E731
            return await compact_now(self.praetorium, slot, spec, opener, watch, instructions)

    async def context_report(self, name: str, prefix: str = "") -> ContextReport:
        """``/context``: what agent ``name``'s next query would carry (nothing is sent).

        ``prefix`` is what the caller adds to each query (the Legatus's status block).
        Raises ``CastraError`` for an agent whose prompt cannot be read.
        """
        spec = await self.spec(name)
        return await context_report(
            self.praetorium, spec, self._slot(name), prefix, self.config.max_input_tokens
        )

    # ---------------------------------------------------------- control

    async def interrupt(self, name: str) -> bool:
        """End the request agent ``name`` is taking now (its queue goes on); False if it
        is taking none."""
        errand = self.errands.running(name)
        if errand is None or errand.stopped:
            return False
        errand.stop()
        errand.kick()
        return True

    async def stop(self, names: list[str], receipt: int | None = None) -> list[Stopped]:
        """End every request of ``names`` that arrived before ``receipt`` (None: now):
        the turn under way, the queued ones, those still being routed; what each lost."""
        before = receipt if receipt is not None else self.receipts.take()
        hits = {name: self.errands.mark(name, before) for name in names}
        for errand in (e for errands in hits.values() for e in errands):
            errand.kick()  # a written query: interrupted (in the background)
        await self.receipts.routed_before(before)  # routed meanwhile: born stopped
        report = []
        for name in names:
            running = any(e.started for e in hits[name])
            queued = len(hits[name]) - running + len(self.errands.late(name, before))
            if running or queued:
                report.append(Stopped(name, running, queued))
        return report

    async def _close_for_stop(self, errand: Errand) -> None:
        """A stopped turn that did not end: close its CLI (it resumes on the next request)."""
        if self.errands.running(errand.agent) is errand:
            await self._slot(errand.agent).close("stop")

    async def reset(self, name: str) -> bool:
        """Forget agent ``name``'s SDK session and compaction summary; its next query
        starts a fresh session from the recent history only.

        Returns whether there was anything to forget. A running query is cut off. The
        compaction records stay in the praetorium, no longer given to the agent.
        """
        slot = self._slot(name)
        had_session = slot.session is not None
        await slot.close("reset")
        had_checkpoint = await self.praetorium.records.get_checkpoint(name) is not None
        await self.praetorium.records.clear_checkpoint(name)
        had_summary = await self.praetorium.records.clear_compactions(name) > 0
        slot.compaction_failure = None
        if not slot.lock.locked():
            slot.state = "idle"
        return had_session or had_checkpoint or had_summary

    async def reap_idle(self) -> list[str]:  # idle sessions closed (they resume later)
        return await self.reaper.reap_idle()

    def start(self) -> None:  # the idle reaper
        self.reaper.start()

    async def shutdown(self) -> None:
        """Stop the reaper and disconnect every client: centuriones first, then the rest."""
        await self.reaper.stop()
        await self.steerer.shutdown()
        await self.errands.shutdown()
        slots = list(self._slots.values())
        for slot in slots:  # a CLI starting ahead: not wanted now
            if slot.warming is not None:
                slot.warming.cancel()
        await asyncio.gather(*(s.warmed() for s in slots))
        centuriones = [s for s in slots if s.name not in self._specs]
        await asyncio.gather(*(s.close("shutdown") for s in centuriones))
        await asyncio.gather(*(s.close("shutdown") for s in slots))

    # ---------------------------------------------------------- status

    def state(self, name: str) -> str:
        """idle, working or error."""
        return self.slot(name).state

    def slot(self, name: str) -> AgentSlot:
        """Agent ``name``'s slot (a new idle one if it has none yet: not kept)."""
        return self._slots.get(name) or AgentSlot(name)

    def status(self, names: list[str]) -> list[AgentStatus]:
        """The state of each named agent's session."""
        return [AgentStatus.of(self.slot(name)) for name in names]
