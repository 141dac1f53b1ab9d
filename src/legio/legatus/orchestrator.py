"""The Legatus: routes Caesar's messages, keeps the books, and is the orchestrator agent.

``handle_message(text)`` answers one message of Caesar's (``LegioApp`` is the front-ends'
door to it). Without an @mention the message
goes to the Legatus's own session; with @mentions of centuriones (``@all``: every
one) it goes to them in parallel and each answers under an attribution header.
Caesar's nuntius is stored before any agent is asked, and every answer is stored
before it is returned, so nothing is lost when an agent fails.

The Legatus is one more agent of the ``SessionManager`` (exactly-once history,
bootstrap with ``<context_notice>``, resume across restarts). Its system prompt is its
prompt file plus the ``<centuriones>`` roster; each query carries ``<centurio_status>``;
its tools are the Legatus tools and the full memoria server under the key
``legatus_tools``. It is rebuilt when the roster or its prompt file changes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from legio.castra import Castra, Roster
from legio.config import Config
from legio.errors import DuplicateOrigin
from legio.legatus.conversations import Conversations
from legio.legatus.mentions import NO_MENTIONS, parse_mentions, strip_mentions
from legio.legatus.recovery import notice_interruptions, record_unanswered, unanswered
from legio.legatus.toolbox import legatus_tools
from legio.memoria import MemoriaStore
from legio.memoria.tools import memoria_full_tools
from legio.names import BROADCAST, CAESAR, LEGATUS
from legio.request import (
    UNWATCHED,
    Added,
    Callbacks,
    PendingFile,
    Reply,
    Request,
    SentFile,
    Watch,
    WorkCard,
)
from legio.sessions.errands import Errand
from legio.sessions.history import format_roster_xml, format_status_xml
from legio.sessions.manager import SessionManager
from legio.sessions.outbox import record_outgoing
from legio.sessions.spec import AgentSpec, spec_from_prompt
from legio.sessions.steering import Joined
from legio.sessions.turn import Outcome
from legio.store.praetorium import Nuntius, Praetorium
from legio.timing import mark
from legio.toolkit import mcp_server

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import McpSdkServerConfig, SdkMcpTool

logger = logging.getLogger(__name__)

TOOLS_KEY = "legatus_tools"


class _Emitter:
    """Collects one request's replies and hands each to the front-end as it comes."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.replies: list[Reply] = []

    async def reply(self, reply: Reply) -> None:
        self.replies.append(reply)
        await self.watch.reply(reply)

    async def notice(self, text: str) -> list[Reply]:
        await self.reply(Reply(LEGATUS, text, "notice"))
        return self.replies


class Legatus:
    """Caesar's counterpart; see the module docstring."""

    def __init__(
        self,
        config: Config,
        praetorium: Praetorium,
        memoria: MemoriaStore,
        sessions: SessionManager,
    ) -> None:
        self.config = config
        self.castra = Castra(config.castra)
        self.praetorium = praetorium
        self.memoria = memoria
        self.sessions = sessions
        self._intake = asyncio.Lock()
        self.conversations = Conversations(praetorium)  # replies and edits
        # files centuriones sent in the Legatus's dispatches: they go with its next reply
        self._carried: list[SentFile] = []
        # more tools for the Legatus's session, e.g. the scheduler's (legatus_jobs.py)
        self.extra_tools: list[Callable[[], list[SdkMcpTool[Any]]]] = []
        sessions.register(LEGATUS, self._spec)

    # ---------------------------------------------------------- the Legatus's session

    async def _spec(self, name: str) -> AgentSpec:
        prompt = self.castra.read_legatus()
        roster = self.castra.roster()
        system_prompt = f"{prompt.body}\n\n{self.roster_xml(roster)}"
        key = f"{prompt.sha256}:{roster.hash}:{prompt.mtime_ns}"

        def servers() -> dict[str, tuple[McpSdkServerConfig, list[str]]]:
            own = legatus_tools(
                self.praetorium, self.castra, self.sessions, self.dispatch_for_legatus
            )
            tools = own + memoria_full_tools(self.memoria)
            tools += [t for make in self.extra_tools for t in make()]
            tools.append(self.sessions.send_file_tool(prompt))
            server = mcp_server(TOOLS_KEY, tools)
            return {TOOLS_KEY: (server, [t.name for t in tools])}

        rebuild_key = hashlib.sha256(key.encode()).hexdigest()
        return spec_from_prompt(
            self.config, self.castra, prompt, system_prompt, rebuild_key, servers
        )

    def roster_xml(self, roster: Roster | None = None) -> str:
        """``<centuriones>``: the roster in the Legatus's system prompt."""
        roster = roster or self.castra.roster()
        return format_roster_xml({n: p.description for n, p in roster.centuriones.items()})

    def status_xml(self, roster: Roster | None = None) -> str:
        """``<centurio_status>`` for every centurio in the roster."""
        names = (roster or self.castra.roster()).names
        return format_status_xml({n: self.sessions.state(n) for n in names})

    # ---------------------------------------------------------- messages

    @staticmethod
    def project_of(name: str, nuntius: Nuntius, roster: Roster) -> str | None:
        """The project agent ``name`` works on for ``nuntius``: its ``#name``, else the
        agent's own default (frontmatter ``project:``)."""
        prompt = roster.centuriones.get(name)
        return nuntius.project or (prompt.settings.project if prompt else None)

    async def handle_message(self, request: Request, watch: Watch = UNWATCHED) -> list[Reply]:
        """Answer one message from Caesar: a reply per agent that answered (and notices),
        each also handed to ``watch`` as soon as it exists (an agent's answer is stored and
        handed over before that agent takes its next request, so one agent's answers
        arrive in order); ``watch`` also gets each agent's status and text as it writes.

        The request's ``attachments`` are stored with its nuntius (its text is their
        caption) and given to the addressed agents. Its ``origin`` makes a message
        delivered twice (Telegram does so after a crash) produce one nuntius and one
        answer: the second delivery gets no reply at all. A ``forwarded_from`` message is
        someone else's words: agents read it as coming from there, and it goes to the
        Legatus alone (an @name in it is not a dispatch). ``pointer``: what it replies to
        (``legio.legatus.conversations``); ``lane``: the agent whose topic it was written in
        (it answers when none is named); ``project``: that topic's project, unless the
        text names one; ``receipt``: when it arrived (None: now), so that a stop that came
        after it ends it even before it reaches an agent's queue.
        """
        text, origin, attachments = request.text, request.origin, request.attachments
        forwarded_from, pointer, lane = request.forwarded_from, request.pointer, request.lane
        project, receipt = request.project, request.receipt
        receipts = self.sessions.receipts
        receipt = receipt if receipt is not None else receipts.take(routing=True)
        try:
            emit = _Emitter(watch)
            if not text.strip() and not attachments:
                return await emit.notice(
                    "Your message is empty. Write a request for the Legatus, or start with "
                    "@name to ask a centurio (/help lists the commands)."
                )
            roster = self.castra.roster()
            # A forward is someone else's words: its @names are data, not Caesar's dispatch.
            mentions = parse_mentions(text, roster) if forwarded_from is None else NO_MENTIONS
            if mentions.unusable and not mentions.names:
                return await emit.notice("Cannot dispatch: " + "; ".join(mentions.unusable))
            picked, problem = (None, None) if forwarded_from else self.sessions.projects.pick(text)
            project = picked or project
            if problem:  # an unknown #name: nothing runs, the projects are listed
                return await emit.notice(problem)
            asked = [*mentions.models.values(), *([request.model] if request.model else [])]
            for model in asked:  # @vorenus:opus, or Try again's: a model [models] names
                refusal = self.sessions.choices.refusal(model)
                if refusal:
                    return await emit.notice(
                        f"{refusal} (For plain text after a name, write a space after the colon.)"
                    )
            if mentions.names and not strip_mentions(text) and not attachments:
                who = ", ".join(f"@{n}" for n in mentions.names)
                return await emit.notice(f"What should {who} do? Write the request after the name.")
            if LEGATUS in mentions.models and not mentions.names:  # @legatus:haiku
                default = LEGATUS
            elif not mentions.names and forwarded_from is None:  # a reply, a topic: its agent
                replied = await self.conversations.replied_agent(pointer, roster)
                default = replied or (lane if lane in roster.centuriones else LEGATUS)
            else:
                default = LEGATUS
            audience = ([BROADCAST] if mentions.broadcast else mentions.names) or [default]
            names = mentions.names or [default]
            own = set(mentions.models) | (set(names) if request.model else set())
            ahead = [n for n in names if n not in own]  # on a model of its own: in its turn
            self.sessions.prewarm(ahead, project)  # their CLIs start while it is stored
            try:
                # One message at a time through here, in arrival order: it is stored, then takes
                # its place in line at each agent it addresses, so agents answer in that order.
                async with self._intake:
                    if attachments:  # stored with the nuntius by a trigger, in its INSERT
                        origin = origin or f"local:{uuid.uuid4()}"
                        for part, pending in enumerate(attachments):
                            if pending.origin != origin:  # a local file: its part here
                                pending = dataclasses.replace(pending, origin=origin, part=part)
                            await self.sessions.attachments.stage(pending)
                    nuntius = await self.praetorium.post(
                        CAESAR,
                        text,
                        audience,
                        origin=origin,
                        forwarded_from=forwarded_from,
                        project=project,
                    )
                    if request.plan:  # its turn plans first (legio.sessions.pipeline)
                        nuntius = dataclasses.replace(nuntius, plan=True)
                    if pointer is not None:  # before its turn can come: the agent reads the link
                        await self.conversations.link(nuntius, pointer)
                    for name in names:  # this request's model, for its turn only
                        chosen = request.model or mentions.models.get(name)
                        if chosen:
                            await self.sessions.choices.once(name, nuntius.seq, chosen)
                    own_model = bool(own & set(names))  # its own turn, on its model
                    joined = (
                        None if own_model else self._join(request, nuntius, names, receipt, emit)
                    )
                    tickets = {}
                    if joined is None:
                        tickets = {name: self.sessions.reserve(name, receipt) for name in names}
                    receipts.settle(receipt)  # routed: a stop from now on finds it in line
            except DuplicateOrigin:
                logger.info("message %s was already received; not answering it twice", origin)
                return []
            mark("nuntius posted")
            if joined is not None:  # in the agent's running turn: answered with it
                await watch.joined(Added(joined.agent, nuntius.seq, joined.after))
                ticket = await joined.settled  # None: answered; else ⏭, in line after it
                if ticket is None:
                    return emit.replies
                tickets = {joined.agent: ticket}
            await self._answer(nuntius, names, roster, watch, tickets, emit)
            if mentions.unusable:
                await emit.notice("Not dispatched: " + "; ".join(mentions.unusable))
            return emit.replies
        finally:
            receipts.settle(receipt)  # routed, refused or failed: it makes no request now

    def _join(
        self, request: Request, nuntius: Nuntius, names: list[str], receipt: int, emit: _Emitter
    ) -> Joined | None:
        """Add Caesar's message to its one agent's running turn (a steer), if it can go
        there: plain words (no file, no forward, not ⏭ /queue) to one agent that works."""
        if request.queue or request.plan or request.attachments or request.forwarded_from:
            return None
        if len(names) != 1:
            return None
        [name] = names

        async def deliver(outcome: Outcome, folded: bool) -> int | None:
            project = nuntius.project
            answer = await self.praetorium.post(
                name, outcome.text, [CAESAR], reply_to=nuntius.id, project=project
            )
            if not folded:  # folded in: the turn's answer is its answer, said once
                await emit.reply(Reply(name, outcome.text, outcome.kind, (), answer.seq, project))
            return answer.seq

        return self.sessions.join(name, nuntius, receipt, deliver)

    async def _answer(
        self,
        nuntius: Nuntius,
        names: list[str],
        roster: Roster,
        watch: Watch,
        tickets: dict[str, Errand],
        emit: _Emitter,
    ) -> None:
        """Ask ``names`` about Caesar's ``nuntius``; store and emit each answer in its turn."""

        async def deliver(name: str, outcome: Outcome) -> int | None:
            if outcome.kind == "held":  # not started: the request stays unanswered (/retry)
                await emit.reply(Reply(name, outcome.text, outcome.kind))
                return None
            project = self.project_of(name, nuntius, roster)
            answer = await self.praetorium.post(
                name, outcome.text, [CAESAR], reply_to=nuntius.id, project=project
            )
            mark("answer posted")
            files = await self._sent_files(name, answer.seq)
            if name == LEGATUS and self._carried:  # sent in its dispatches, for Caesar
                files, self._carried = files + tuple(self._carried), []
            reply = Reply(name, outcome.text, outcome.kind, files, answer.seq, project)
            await emit.reply(dataclasses.replace(reply, model=outcome.model))
            return answer.seq

        centuriones = [n for n in names if n != LEGATUS]
        if LEGATUS in names:
            await self.sessions.answer(
                LEGATUS,
                nuntius,
                watch,
                prefix=lambda: self.status_xml(roster),  # made when its turn comes
                ticket=tickets.get(LEGATUS),
                deliver=lambda outcome: deliver(LEGATUS, outcome),
            )
        if centuriones:
            await self.sessions.dispatch_many(centuriones, nuntius, watch, tickets, deliver)

    async def _sent_files(self, name: str, seq: int) -> tuple[SentFile, ...]:
        """The files ``name`` queued with send_file in its turn, recorded on its answer."""
        s = self.sessions
        return await record_outgoing(s.outbox, s.attachments, name, seq)

    async def record(self, pending: PendingFile) -> bool:
        """Store Caesar's message of a file a restart cut off, without answering it (it is
        then an interrupted request); False if its nuntius is already stored."""
        return await record_unanswered(
            self.praetorium, self.castra, self.sessions.projects, pending
        )

    # ---------------------------------------------------------- interrupted requests

    async def unanswered(self, window: int = 200) -> list[tuple[Nuntius, list[str]]]:
        """Recent requests an addressed agent never answered (``legio.legatus.recovery``)."""
        return await unanswered(self.praetorium, self.castra, window)

    async def notice_interruptions(self) -> list[tuple[Nuntius, list[str]]]:
        """Find requests a restart interrupted and record them as told to Caesar (once)."""
        return await notice_interruptions(self.praetorium, self.castra)

    async def retry(self, seq: int | None = None, watch: Watch = UNWATCHED) -> list[Reply]:
        """Run interrupted requests again (all pending, or the one numbered ``seq``), once each."""
        pending = await self.praetorium.interruptions()
        if seq is not None:
            pending = [(n, agents) for n, agents in pending if n.seq == seq]
        emit = _Emitter(watch)
        if not pending:
            what = f"interrupted request #{seq}" if seq is not None else "interrupted request"
            return await emit.notice(f"Nothing to retry: no {what} is waiting.")
        roster = self.castra.roster()
        for nuntius, agents in pending:
            if not await self.praetorium.mark_retried(nuntius.seq):
                continue  # another /retry took it
            for name in agents:  # the model it was asked on (@vorenus:opus), if any
                await self.sessions.choices.recall(name, nuntius.seq)
            tickets = {name: self.sessions.reserve(name) for name in agents}
            await self._answer(nuntius, agents, roster, watch, tickets, emit)
        return emit.replies

    async def edit(self, origin: str, text: str, watch: Watch = UNWATCHED) -> list[Reply]:
        """Caesar edited the message ``origin``: corrected before any agent read it, or a
        new request marked as its correction, answered (``legio.legatus.conversations``)."""
        roster = self.castra.roster()
        async with self._intake:  # in line with new messages
            correction = await self.conversations.edit(origin, text, roster)
        if correction.kind != "request" or correction.nuntius is None:
            return []
        return await self.answer_nuntius(correction.nuntius, list(correction.names), watch)

    async def answer_nuntius(
        self, nuntius: Nuntius, names: list[str], watch: Watch = UNWATCHED
    ) -> list[Reply]:
        """Have ``names`` answer a stored request (e.g. a scheduled job's), like Caesar's;
        ``watch`` sees what they do and their text as it is written."""
        emit = _Emitter(watch)
        async with self._intake:
            tickets = {name: self.sessions.reserve(name) for name in names}
        roster = self.castra.roster()
        await self._answer(nuntius, names, roster, watch, tickets, emit)
        return emit.replies

    async def dispatch_for_legatus(
        self, names: list[str], text: str, project: str | None = None
    ) -> dict[str, Outcome]:
        """The ``dispatch`` tool: the Legatus asks centuriones (on ``project``, if given);
        answers are addressed to it."""
        if project is not None:
            self.sessions.projects.settings(project)  # ProjectError: not a project
        nuntius = await self.praetorium.post(LEGATUS, text, names, project=project)

        async def store(name: str, outcome: Outcome) -> int | None:
            answer = await self.praetorium.post(
                name, outcome.text, [LEGATUS], reply_to=nuntius.id, project=nuntius.project
            )
            await self.conversations.dispatched(name, outcome.text)  # in its topic, if any
            files = await self._sent_files(name, answer.seq)  # Caesar gets them with the
            self._carried += [dataclasses.replace(f, sender=name) for f in files]  # answer
            return answer.seq

        async def card(card: WorkCard) -> None:  # no request of Caesar's to show it under
            await self.sessions.cards.tell(card, new=True)

        legatus = self.sessions.current_watch(LEGATUS)  # its request's: what they do
        asking = legatus.asker() if legatus else None  # its approvals: in the request's topic
        watch = Callbacks(legatus.status if legatus else None, on_card=card, asking=asking)
        return await self.sessions.dispatch_many(names, nuntius, watch, deliver=store)
