"""One request's turn for one agent, from its turn coming to its outcome delivered.

``TurnPipeline.run`` is what happens inside an agent's turn lock (``SessionManager``
holds it): the agent's spec read now (its project placed), a plan limit waited out, the
budget admitted, its CLI made ready (live, rebuilt, resumed or new), the query planned and
sent, the answer read; a failure becomes its error reply, a stop its interrupted reply
(``legio.sessions.errands``); the outcome delivered, its usage stored, and then — never
before the answer is out — its project branch published. It holds no state of its own:
its collaborators are given explicitly, and one turn travels as one ``Assignment``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from legio.errors import AgentError, AgentInterrupted, ContextOverflow, TurnHeld
from legio.fence.cliconfig import LoginSync
from legio.limits.budget import Budget, Reservation
from legio.limits.plan import PlanHealth
from legio.names import CAESAR, SCHEDULER
from legio.projects.copies import Place, Projects
from legio.projects.turnwork import Mark
from legio.request import Status, Watch
from legio.sessions.asides import Asides
from legio.sessions.cards import WorkCards
from legio.sessions.choices import Choices
from legio.sessions.client import AgentSession, ask, stale_result, store_turns
from legio.sessions.compaction import compact_or_fall_back
from legio.sessions.delivery import Pictures
from legio.sessions.errands import AgentErrands, Errand, conversation_of
from legio.sessions.planning import Planning
from legio.sessions.query import prepare_query
from legio.sessions.slot import AgentSlot
from legio.sessions.spec import AgentSpec, placed, tagged
from legio.sessions.steering import abandon, deliver_joined
from legio.sessions.turn import STOPPED_REPLY, Outcome, failure_outcome, notify
from legio.store.attachments import AttachmentStore
from legio.store.praetorium import Nuntius, Praetorium

logger = logging.getLogger(__name__)

Deliver = Callable[[Outcome], Awaitable[int | None]]  # the answer's nuntius, if one was stored
Prefix = str | Callable[[], str]  # text, or made when the agent's turn comes
Ensure = Callable[[AgentSlot, AgentSpec, Watch], Awaitable[AgentSession]]


@dataclass(frozen=True)
class Assignment:
    """One agent's turn for one request, as one value: whose turn (``slot``), its place
    in line (``errand``), the nuntius it answers, the request's ``watch`` (statuses,
    streamed text), what goes before the text (``prefix``) and where the outcome goes."""

    slot: AgentSlot
    errand: Errand
    nuntius: Nuntius
    watch: Watch
    prefix: Prefix = ""
    deliver: Deliver | None = None

    @property
    def name(self) -> str:
        return self.slot.name


@dataclass
class _Work:
    """What one turn leaves for after its answer: the copy it worked in (to publish), its
    work as the turn began (a card's start) and its share of the day's budget."""

    place: Place | None = None
    before: Mark | None = None
    reservation: Reservation | None = None
    model: str | None = None  # the [models] name it ran on (the answer's header)


@dataclass
class TurnPipeline:
    """The steps of one turn; see the module docstring."""

    praetorium: Praetorium
    attachments: AttachmentStore
    pictures: Pictures
    logins: LoginSync
    projects: Projects
    errands: AgentErrands
    spec: Callable[[str], Awaitable[AgentSpec]]
    ensure: Ensure  # the slot's session, fit for the next query
    budget: Budget | None = None
    health: PlanHealth | None = None
    cards: WorkCards | None = None  # a work card after each turn that changed a project
    choices: Choices | None = None  # /model, /effort, @name:model (legio.sessions.choices)
    asides: Asides | None = None  # Caesar's reactions, read with the next request
    planning: Planning | None = None  # /plan <agent> on; the plans agreed (their cards link)

    async def run(self, job: Assignment) -> Outcome:
        """``answer`` inside the agent's turn: the outcome, delivered."""
        work = _Work()
        try:
            return await self._run(job, work)
        finally:  # its cost is in the records now (or it never spent): free its share
            if self.budget is not None:
                self.budget.release(work.reservation)

    async def _run(self, job: Assignment, work: _Work) -> Outcome:
        slot, errand, nuntius, name = job.slot, job.errand, job.nuntius, job.name
        queued_stop = errand.stopped  # a stop came while it waited in line: it never starts
        errand.project = nuntius.project  # a message added to its turn must be on it too
        errand.where = conversation_of(nuntius.origin)  # …and come from where it came
        try:
            errand.check()
            await self.logins.refresh()  # `claude login` renewed it, or another CLI did
            text = await self._turn(job, work)
            outcome = Outcome(text, model=work.model)
        except asyncio.CancelledError:
            abandon(errand)
            raise
        except AgentInterrupted as e:
            words = (STOPPED_REPLY,) if queued_stop else ()
            outcome = failure_outcome(name, nuntius.seq, e, *words)
        except TurnHeld as e:  # not started (budget, plan limit): /retry runs it later
            logger.warning("%s: nuntius %s held: %s", name, nuntius.seq, e.reason)
            if self.budget is not None and nuntius.sender in (CAESAR, SCHEDULER):
                await self.budget.hold(nuntius.seq, name)
            outcome = Outcome(e.reason, "held")
        except BaseException as e:
            outcome = failure_outcome(name, nuntius.seq, e)
        if errand.stopped and outcome.kind != "interrupted":  # a stop came as it ended
            outcome = failure_outcome(name, nuntius.seq, AgentInterrupted(name, "stopped"))
        self.errands.end(errand)  # decided: a stop from now on does not count it
        if outcome.kind == "error" and self.budget and nuntius.sender in (CAESAR, SCHEDULER):
            await self.budget.hold(nuntius.seq, name)  # /retry runs it again
        answer_seq = None
        if job.deliver is not None:
            try:
                answer_seq = await job.deliver(outcome)
            except Exception:
                logger.exception("%s: delivering its answer to #%s failed", name, nuntius.seq)
        await deliver_joined(errand, outcome, answer_seq)  # the messages added to its turn
        await store_turns(self.praetorium, slot.unrecorded, name)
        await self.logins.refresh()  # a refreshed login reaches every other CLI
        if work.place is not None:  # in the project for Caesar to see; the answer never waits
            await self.projects.publish_quietly(work.place)
            if work.before is not None and outcome.kind != "held":
                await self._card(work, job.watch, answer_seq, errand.plan)
        return outcome

    async def _card(
        self, work: _Work, watch: Watch, answer_seq: int | None, plan: int | None
    ) -> None:
        """The work card of a turn that changed the agent's work (stored with the answer
        ``answer_seq`` the turn gave: what Publish says the work is, the model it ran on
        and the ``plan`` Caesar agreed to in it), after its answer."""
        assert self.cards is not None and work.place is not None and work.before is not None
        place = work.place
        try:
            card = await self.cards.after(place, work.before, answer_seq, work.model, plan)
            if card is not None:
                await watch.card(card)
        except Exception:
            logger.exception("%s: its work card for #%s failed", place.agent, place.project)

    async def _turn(self, job: Assignment, work: _Work) -> str:
        """One query, with the agent's turn held by the caller."""
        slot, errand, name = job.slot, job.errand, job.name
        prefix = job.prefix() if callable(job.prefix) else job.prefix
        if self.asides is not None:  # Caesar's reactions since its last request
            prefix = self.asides.take(name, prefix)
        spec = await errand.until_stopped(
            placed(await self.spec(name), job.nuntius.project, self.projects)
        )
        if self.choices is not None:  # this request's model, else the session's
            spec = self.choices.apply(spec, job.nuntius.seq)
            work.model = self.choices.short(spec.model)
        watch = tagged(job.watch, spec)
        if spec.place is not None and self.cards is not None:  # what its work was before
            work.before = await errand.until_stopped(self.cards.before(spec.place))
        if self.health is not None:  # a plan limit: wait for its reset
            await errand.until_stopped(self.health.wait_clear(name, watch))
        if self.budget is not None:
            errand.check()
            reconnect, work.reservation = await self.budget.admit(
                name, spec.daily_usd, slot.session, model=spec.model
            )
            if reconnect:
                await slot.close("per-turn budget")  # the CLI's count restarts on resume
        slot.state, slot.watch = "working", watch
        try:
            session = await errand.until_stopped(self.ensure(slot, spec, watch))
            try:
                text = await self._query(job, session, spec, prefix, watch)
            except ContextOverflow as e:
                logger.warning(
                    "%s: the model refused nuntius %s as too long (%s); compacting and "
                    "trying once more in a new session",
                    name,
                    job.nuntius.seq,
                    e.reason,
                )
                await notify(watch, Status(name, "compacting", note="full"))
                await compact_or_fall_back(self.praetorium, slot, session, spec, "overflow", watch)
                await slot.close("rebuild")
                await self.praetorium.records.clear_checkpoint(name)
                session = await errand.until_stopped(self.ensure(slot, spec, watch))
                text = await self._query(job, session, spec, prefix, watch)
        except AgentInterrupted:
            slot.state = "idle"
            raise
        except AgentError as e:
            slot.state = "error"
            if self.budget is not None and self.budget.stopped(e, slot.session):
                raise AgentError(name, self.budget.stopped_reason()) from e
            raise
        except BaseException:
            slot.state = "error"
            raise
        finally:
            slot.watch = None
            work.place = spec.place  # its commits: published once its answer is out
        slot.state = "idle"
        return text

    async def _query(
        self, job: Assignment, session: AgentSession, spec: AgentSpec, prefix: str, watch: Watch
    ) -> str:
        slot, errand = job.slot, job.errand
        errand.check()  # stopped before its query was planned: its checkpoint stays
        if stale_result(session.client):  # out of step: each request would get the one before's
            logger.warning(
                "%s: its CLI held an earlier turn's result; starting it again", slot.name
            )
            session.broken = True
            session = await errand.until_stopped(self.ensure(slot, spec, watch))
        if self.choices is not None:  # a one-request model, or back from one
            await self.choices.switch(session, spec)
        message, images = await prepare_query(
            self.praetorium, self.attachments, self.pictures, session, spec, job.nuntius, prefix
        )

        async def send() -> str:  # planned, so sent: a stop from here on interrupts it
            text, _ = await ask(
                session,
                message,
                watch,
                record=slot.unrecorded.append,
                seq=job.nuntius.seq,
                images=images,
                on_sent=lambda: errand.sent(session.client.interrupt),
            )
            return text

        # /plan, or an agent that plans first: it proposes; ExitPlanMode asks Caesar
        planned = job.nuntius.plan
        if self.planning is not None:
            planned = self.planning.plans(slot.name, job.nuntius)
        if planned:
            await session.client.set_permission_mode("plan")
            if self.planning is not None:
                self.planning.begin(slot.name, job.nuntius)
        try:
            return await send()
        except AgentError:
            if self.health is None or not await self.health.limited(spec.name, watch):
                raise
            errand.check()
            return await send()  # after a plan limit's reset: the same message once more
        finally:
            if planned:  # back to the agent's normal mode for its next turn
                if self.planning is not None:
                    errand.plan = self.planning.end(slot.name)
                await restore_mode(session)


MODE_TIMEOUT = 10.0  # seconds for the CLI to take its mode back (then it starts again)


async def restore_mode(session: AgentSession) -> None:
    """The session's own permission mode again, after a /plan turn; a session that
    cannot be told is closed (its next turn starts in its normal mode)."""
    try:
        mode = session.client.options.permission_mode or "default"
        await asyncio.wait_for(session.client.set_permission_mode(mode), MODE_TIMEOUT)
    except Exception:
        logger.warning("could not leave plan mode; starting the session again", exc_info=True)
        session.broken = True
