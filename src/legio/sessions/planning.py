"""Plan first: the agents whose every request is planned first, and the plans proposed.

``/plan vorenus on`` (``off``) makes every request of Caesar's to centurio ``vorenus`` run
as a ``/plan`` request does: in the CLI's plan mode (``legio.sessions.pipeline``), its
plan asked of Caesar (``legio.sessions.gatekeeper``). It is kept in the praetorium
(``agent_choices.plan_first``), so a restart keeps it; ``/plan vorenus`` and ``/plan`` say
which agents plan first. A scheduled job's request and the Legatus's dispatch run as they
are (nobody waits to approve their plans), and the Legatus itself never plans first.

Each plan an agent proposes is stored as its nuntius for Caesar, on the request's project:
it is in the conversation (``/history``; a reply to its message goes to that agent; a
fresh session reads it) and outlives a restart. It is no answer (no ``reply_to``): the
request stays unanswered until its turn ends, so a restart meanwhile still names it. The
plan Caesar agreed to (✅ Go) is the one its turn's work card links to (``cards.plan_seq``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from legio.errors import PraetoriumError
from legio.names import CAESAR
from legio.store.praetorium import Nuntius, Praetorium

logger = logging.getLogger(__name__)

SWITCHES = {"on": True, "off": False}
USAGE = "/plan <agent> on|off"


class Planning:
    """Who plans first, and each running plan turn's plans; see the module docstring."""

    def __init__(self, praetorium: Praetorium) -> None:
        self.praetorium = praetorium
        self._first: set[str] = set()  # agents whose every request of Caesar's plans first
        self._turns: dict[str, Nuntius] = {}  # agent -> the request its running turn plans
        self._agreed: dict[str, int] = {}  # agent -> the plan Caesar agreed to in that turn
        self._going: set[str] = set()  # agents whose running turn's plan Caesar approved

    async def load(self) -> None:
        """Read the toggles a restart kept."""
        async with self.praetorium.connection.execute(
            "SELECT agent FROM agent_choices WHERE plan_first = 1"
        ) as cursor:
            self._first = {row["agent"] for row in await cursor.fetchall()}

    def first(self, agent: str) -> bool:
        return agent in self._first

    def plans(self, agent: str, nuntius: Nuntius) -> bool:
        """Whether ``agent``'s turn for ``nuntius`` runs in plan mode: a /plan request, or
        a request of Caesar's to an agent that plans first."""
        return nuntius.plan or (agent in self._first and nuntius.sender == CAESAR)

    async def choose(self, agent: str, on: bool) -> None:
        """``agent`` plans first (or not), kept."""
        (self._first.add if on else self._first.discard)(agent)
        await self.praetorium.connection.execute(
            "INSERT INTO agent_choices (agent, plan_first, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (agent) DO UPDATE SET plan_first = excluded.plan_first, "
            "updated_at = excluded.updated_at",
            (agent, int(on), datetime.now(UTC).isoformat()),
        )
        await self.praetorium.connection.commit()

    async def command(self, args: str, agents: list[str]) -> str | None:
        """``/plan``, ``/plan <agent>`` and ``/plan <agent> on|off`` (``agents``: the
        centuriones): the answer to show; None when ``args`` is a request to plan (a
        message, ``@vorenus fix the bug``), which the caller runs as one."""
        words = args.split()
        if not words:
            first = [a for a in agents if a in self._first]
            said = ", ".join(first) if first else "none"
            return (
                f"Planning first: {said}. {USAGE} makes every request to that agent planned "
                "first; /plan [@name] <message> plans one request."
            )
        name = words[0].removeprefix("@").lower()
        if len(words) == 1 and name in agents:
            now = "plans every request first" if name in self._first else "does not plan first"
            return f"{name} {now}. Change it with {USAGE}."
        if len(words) != 2 or words[1].lower() not in SWITCHES:
            return None
        if name not in agents:
            known = ", ".join(agents) or "none"
            return f"No centurio named {words[0][:40]!r}. Use {USAGE} with one of: {known}."
        on = SWITCHES[words[1].lower()]
        await self.choose(name, on)
        if on:
            return (
                f"📋 {name} now plans every request of yours first: you get its plan with "
                f"✅ Go, ✏️ Change, ✖ Drop (it stays after a restart; /plan {name} off ends it)."
            )
        return f"{name} no longer plans first: its requests run at once."

    # ---------------------------------------------------------- one plan turn

    def begin(self, agent: str, request: Nuntius) -> None:
        """``agent``'s turn now plans ``request``."""
        self._turns[agent] = request
        self._agreed.pop(agent, None)
        self._going.discard(agent)

    def planning(self, agent: str) -> bool:
        """Whether ``agent``'s running turn still plans: Caesar has not approved its plan
        (until then it may change nothing, ``legio.sessions.planfence``)."""
        return agent in self._turns and agent not in self._going

    def end(self, agent: str) -> int | None:
        """``agent``'s plan turn is over: the plan Caesar agreed to in it (its seq), if any."""
        self._turns.pop(agent, None)
        self._going.discard(agent)
        return self._agreed.pop(agent, None)

    async def record(self, agent: str, plan: str) -> int | None:
        """Store ``agent``'s proposed ``plan`` (its text as Caesar is shown it) as its
        nuntius for Caesar; its seq (None: no plan turn runs, or it could not be stored,
        logged)."""
        request = self._turns.get(agent)
        if request is None:
            return None
        try:
            stored = await self.praetorium.post(agent, plan, [CAESAR], project=request.project)
        except PraetoriumError:
            logger.exception("%s: its plan for #%s could not be stored", agent, request.seq)
            return None
        return stored.seq

    def agree(self, agent: str, seq: int | None) -> None:
        """Caesar agreed to plan ``seq`` (None: it could not be stored) of ``agent``'s
        running turn (✅ Go): the turn carries it out."""
        if agent in self._turns:
            self._going.add(agent)
            if seq is not None:
                self._agreed[agent] = seq
