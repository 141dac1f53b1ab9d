"""A message added to an agent's running turn (a steer), and the results that answer it.

The CLI reads a message written while a turn runs at the turn's next tool result (folded
into it: one ``ResultMessage`` then answers both), or, when the turn ends without another
tool call, as its own next turn (its own ``ResultMessage``). Each query Legio writes
carries a uuid, and the CLI lists in each result the uuids it answers
(``user_message_uuids``): ``Steering`` is one running turn's queries, read until every one
is answered (a CLI that lists none: one result per query, in order).

``Steerer.join`` adds Caesar's message to the agent's running turn: the message is held
``hold_s`` (the ⏭ "after this turn" choice can still take it back to the queue), then the
agent's checkpoint is raised past it (the history given later never carries it again)
and it is written to the running client. Its answer is delivered with the turn's
(``deliver_joined``): the turn's own answer when the CLI folded it in, else its own; a stop
or a failure of the turn ends it too. A message the turn could not take any more (it
ended, it was stopped) takes its place in line as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from legio.sessions.errands import conversation_of
from legio.sessions.history import current_message
from legio.sessions.turn import INTERRUPTED_REPLY, Outcome
from legio.store.praetorium import Nuntius, Praetorium

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import ClaudeSDKClient, ResultMessage

# errands.Errand, errands.AgentErrands, slot.AgentSlot (named here, not imported: they
# import this module's users)
Errand = Any
AgentErrands = Any
AgentSlot = Any

logger = logging.getLogger(__name__)

STEER_HOLD_S = 2.0  # how long an added message waits for ⏭ before the agent gets it

DeliverJoined = Callable[[Outcome, bool], Awaitable[int | None]]  # (outcome, folded in)


def query_message(text: str, images: list[dict[str, Any]], uid: str) -> dict[str, Any]:
    """One SDK user message carrying ``uid`` (the CLI names it in the result that answers
    it): plain text, or content blocks (the images, then the text)."""
    content: str | list[dict[str, Any]] = (
        [*images, {"type": "text", "text": text}] if images else text
    )
    return {
        "type": "user",
        "uuid": uid,
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": None,
    }


async def messages(*items: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """``ClaudeSDKClient.query`` takes an async iterable of messages."""
    for item in items:
        yield item


@dataclass
class Steering:
    """One running turn's queries: those not answered yet, and each one's answer."""

    client: ClaudeSDKClient
    pending: list[str]
    answers: dict[str, tuple[int, str]] = field(default_factory=dict)  # uuid: (result, text)
    results: int = 0
    closed: bool = False  # its last result was read: nothing more can join it
    last: str = ""  # the uuid of the latest query added

    @classmethod
    def begin(cls, client: ClaudeSDKClient) -> tuple[Steering, str]:
        uid = str(uuid.uuid4())
        return cls(client, [uid]), uid

    def settle(self, result: ResultMessage, text: str) -> bool:
        """One result read; True when every query of the turn is answered (then closed)."""
        listed = list(result.user_message_uuids or [])
        if not listed and result.user_message_uuid:
            listed = [result.user_message_uuid]
        answered = [u for u in listed if u in self.pending] or self.pending[:1]
        for uid in answered:
            self.pending.remove(uid)
            self.answers[uid] = (self.results, text)
        self.results += 1
        self.closed = not self.pending
        return self.closed

    async def add(self, text: str) -> bool:
        """Write ``text`` into the running turn; False if the turn has ended."""
        if self.closed:
            return False
        uid = str(uuid.uuid4())
        self.pending.append(uid)
        try:
            await self.client.query(messages(query_message(text, [], uid)))
        except BaseException:
            self.pending.remove(uid)
            self.closed = self.closed or not self.pending
            raise
        self.last = uid
        return True

    def folded(self, uid: str) -> bool | None:
        """Whether query ``uid`` was answered by the turn's first result (None: unanswered)."""
        mine = self.answers.get(uid)
        first = min((index for index, _ in self.answers.values()), default=None)
        return None if mine is None else mine[0] == first

    def answer(self, uid: str) -> str:
        return self.answers.get(uid, (0, ""))[1]


@dataclass(eq=False)
class Joined:
    """Caesar's message added to an agent's running turn."""

    agent: str
    nuntius: Nuntius
    receipt: int
    deliver: DeliverJoined
    state: Literal["held", "written", "queued", "done"] = "held"
    uid: str = ""
    steering: Steering | None = None
    # settled: None once answered inside the turn, or its place in line (queued after it)
    settled: asyncio.Future[Errand | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    writer: asyncio.Task[None] | None = None
    requeue: Callable[[Joined], Errand] | None = None
    errand: Errand | None = None  # the running turn it joined
    # its place in line, taken when it arrived: kept if it goes back in line (it must not
    # lose its order to messages that came after it), given up once the turn has it
    ticket: asyncio.Future[None] | None = None

    def give_up_place(self, release: Callable[[], None]) -> None:
        """The turn has it: its place in line goes (passed on if it had just come)."""
        ticket, self.ticket = self.ticket, None
        if ticket is None:
            return
        if ticket.done() and not ticket.cancelled():
            release()  # the turn came to it meanwhile: passed on
        else:
            ticket.cancel()

    def after(self) -> bool:
        """⏭ "after this turn": back in line if the agent has not got it yet."""
        if self.state != "held":
            return False
        if self.writer is not None:
            self.writer.cancel()
        self._queue()
        return True

    def _queue(self) -> None:
        assert self.requeue is not None
        self.state = "queued"
        if not self.settled.done():
            self.settled.set_result(self.requeue(self))

    def _done(self) -> None:
        if self.ticket is not None and self.requeue is not None:
            self.ticket.cancel()  # answered with (or ended with) the turn: no place needed
            self.ticket = None
        self.state = "done"
        if not self.settled.done():
            self.settled.set_result(None)


class Steerer:
    """Adds messages to running turns; see the module docstring."""

    def __init__(
        self,
        praetorium: Praetorium,
        errands: AgentErrands,
        slot_of: Callable[[str], AgentSlot],
        hold_s: float = STEER_HOLD_S,
    ) -> None:
        self.praetorium, self.errands, self.slot_of = praetorium, errands, slot_of
        self.hold_s = hold_s
        self._tasks: set[asyncio.Task[None]] = set()

    def join(
        self, agent: str, nuntius: Nuntius, receipt: int, deliver: DeliverJoined
    ) -> Joined | None:
        """Add ``nuntius`` to ``agent``'s running turn; None if it runs none that can take
        it (then the message takes its place in line as before)."""
        errand = self.errands.running(agent)
        if errand is None or errand.stopped or errand.project != nuntius.project:
            return None
        if errand.where != conversation_of(nuntius.origin):  # its answer goes elsewhere
            return None
        if self.errands.waiting(agent):  # earlier requests in line: it must not overtake them
            return None
        joined = Joined(agent, nuntius, receipt, deliver, errand=errand)
        joined.ticket = self.slot_of(agent).lock.ticket()  # its place, should it go back
        joined.requeue = self._requeue
        errand.joined.append(joined)
        joined.writer = asyncio.create_task(self._write(joined, errand))
        self._tasks.add(joined.writer)
        joined.writer.add_done_callback(self._tasks.discard)
        return joined

    def _requeue(self, joined: Joined) -> Errand:
        """Its place in line behind the running turn (born stopped if a stop named it)."""
        slot = self.slot_of(joined.agent)
        if joined.errand is not None:
            with contextlib.suppress(ValueError):
                joined.errand.joined.remove(joined)
        ticket, joined.ticket = joined.ticket, None
        if ticket is None or ticket.cancelled():
            ticket = slot.lock.ticket()
        return self.errands.add(joined.agent, joined.receipt, ticket)

    async def _write(self, joined: Joined, errand: Errand) -> None:
        await asyncio.sleep(self.hold_s)
        session = self.slot_of(joined.agent).session
        steering = session.steering if session is not None else None
        if errand.stopped or steering is None or steering.closed or session is None:
            joined._queue()  # too late for this turn: after it
            return
        joined.state = "written"  # from here ⏭ is too late
        session.last_seq = max(session.last_seq, joined.nuntius.seq)  # given: never again
        try:
            await self.praetorium.records.set_checkpoint(
                joined.agent, session.session_id, session.last_seq, session.rebuild_key
            )
            written = await steering.add(current_message(joined.nuntius))
        except Exception:
            logger.exception("%s: could not add #%s to its turn", joined.agent, joined.nuntius.seq)
            written = False
        if not written:
            joined._queue()
            return
        joined.uid, joined.steering = steering.last, steering
        joined.give_up_place(self.slot_of(joined.agent).lock.release)

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def abandon(errand: Errand) -> None:
    """The turn was cancelled (a shutdown): its added messages end with it."""
    for joined in errand.joined:
        if joined.writer is not None:
            joined.writer.cancel()
        if not joined.settled.done():
            joined.settled.cancel()
    errand.joined.clear()


async def deliver_joined(errand: Errand, outcome: Outcome, answer_seq: int | None) -> None:
    """Answer the messages added to ``errand``'s turn, after the turn's own answer: the
    same outcome for a stop or a failure; the turn's answer if the CLI folded the message
    in, else the answer of the result that answered it. One still held goes in line."""
    for joined in list(errand.joined):
        if joined.state == "held":
            if joined.writer is not None:
                joined.writer.cancel()
            joined._queue()
            continue
        if joined.writer is not None and not joined.writer.done():  # being written: it
            await asyncio.gather(joined.writer, return_exceptions=True)  # finds the turn over
        if joined.state != "written":
            continue
        steering = joined.steering
        folded = steering.folded(joined.uid) if steering is not None else None
        if outcome.kind != "answer":
            mine, into = outcome, False
        elif folded is None or steering is None:  # never answered: ended with the turn
            mine, into = Outcome(INTERRUPTED_REPLY.format(name=joined.agent), "interrupted"), False
        elif folded:
            mine, into = Outcome(f"(answered with the turn's answer #{answer_seq})"), True
        else:
            mine, into = Outcome(steering.answer(joined.uid)), False
        try:
            await joined.deliver(mine, into)
        except Exception:
            logger.exception(
                "%s: delivering the answer to #%s failed", joined.agent, joined.nuntius.seq
            )
        joined._done()
    errand.joined.clear()
