"""A spend budget that holds, counted by Legio from its own turn records.

``[budget] daily_usd`` caps the whole legion's spend per day, an agent's frontmatter
``daily_usd`` caps its own, ``per_turn_usd`` one turn's. Days run from midnight in the
owner's time zone (a ``ZoneInfo``; UTC until ``legio.toml`` has one). Before any turn
(Caesar's, the Legatus's dispatch, a scheduled job) ``admit`` reads the day's spend
from the ``turns`` records; over a limit it raises ``TurnHeld`` with the figures and
how to raise the limit, and ``hold`` records the request as interrupted so ``/retry``
runs it once the limit is raised. Crossing 80 % of a limit is told to Caesar once a
day (through the app's notifier).

The CLI's own ``max_budget_usd`` counts per CLI process, restarts at zero on resume
and leaves the process refusing every later query (PROTOCOLS.md): it serves only as
the per-turn backstop, and ``SessionManager`` reconnects before a turn when the
process has already spent something.

``usage_report`` is ``/usage``: today and the last 7 days, per agent and model.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from legio.config import Config
from legio.errors import AgentError, TurnHeld
from legio.limits.prices import model_price
from legio.store.praetorium import Praetorium
from legio.store.records import UsageRow

logger = logging.getLogger(__name__)

WARN_AT = 0.8
ESTIMATE_FLOOR_USD = 0.05  # what a turn is reckoned to cost when nothing better is known
RECONNECT_AT = 0.5  # share of per_turn_usd a CLI may have spent before it is restarted
Notifier = Callable[[str], Awaitable[None]]
Clock = Callable[[], datetime]


def _usd(value: float) -> str:
    return f"${value:,.2f}"


@dataclass(frozen=True)
class UsageReport:
    """``/usage``: per agent and model, today and over the last 7 days."""

    today: list[UsageRow]
    week: list[UsageRow]
    day_start: datetime
    daily_usd: float
    zone: str
    reserved: float = 0.0  # set aside for the turns running now


@dataclass
class Reservation:
    """What one running turn has set aside against the daily limits, until it ends."""

    agent: str
    usd: float
    released: bool = False


class Budget:
    """The legion's accounts; see the module docstring."""

    def __init__(
        self,
        config: Config,
        praetorium: Praetorium,
        *,
        zone: ZoneInfo | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.praetorium = praetorium
        self.zone = zone or ZoneInfo("UTC")
        self.clock = clock or (lambda: datetime.now(UTC))
        self.notify: Notifier | None = None
        self._warned: set[tuple[str, str]] = set()  # (day, scope)
        self._stopped: set[str] = set()  # agents whose last turn the backstop ended
        self._running: list[Reservation] = []  # turns that started and have not ended
        self._admitting = asyncio.Lock()  # check and reserve in one step

    @property
    def per_turn_usd(self) -> float:
        return self.config.budget.per_turn_usd

    def day_start(self) -> datetime:
        """Midnight today in the owner's time zone."""
        local = self.clock().astimezone(self.zone)
        return local.replace(hour=0, minute=0, second=0, microsecond=0)

    async def spent_today(self) -> dict[str, float]:
        """Each agent's spend since midnight."""
        spent: dict[str, float] = {}
        for row in await self.praetorium.records.usage_since(self.day_start()):
            spent[row.agent] = spent.get(row.agent, 0.0) + row.cost_usd
        return spent

    def reserved(self, agent: str | None = None) -> float:
        """What the running turns (of ``agent``, or all) have set aside."""
        return sum(r.usd for r in self._running if agent is None or r.agent == agent)

    async def admit(
        self,
        agent: str,
        agent_daily_usd: float | None,
        session: Any = None,
        *,
        model: str | None = None,
    ) -> tuple[bool, Reservation | None]:
        """Let a turn of ``agent`` start, or raise ``TurnHeld`` (with the figures).

        The turns still running count too: each sets aside an estimate of its cost when
        it starts (its agent's average turn this week, at least ``ESTIMATE_FLOOR_USD``, at
        most ``per_turn_usd``); a turn starts if the day's spend, what the running turns
        set aside and a small turn's cost fit the limit, checked and set aside in one step,
        so parallel turns at 99 % of a limit cannot all start. Returns whether to reconnect the live
        ``session`` first (its CLI has spent half of the per-turn backstop, which counts
        per process) and the reservation to ``release`` when the turn ends (None when no
        daily limit applies). With ``model`` priced in ``[models]``, the estimate is the
        agent's average tokens per turn this week at that model's price."""
        reconnect = bool(
            self.per_turn_usd
            and session is not None
            and session.cost >= RECONNECT_AT * self.per_turn_usd
        )
        if not self.config.budget.daily_usd and not agent_daily_usd:
            return reconnect, None
        async with self._admitting:
            spent, estimate = await self._figures(agent, model)
            warnings = self._check(agent, agent_daily_usd, spent, estimate)
            reservation = Reservation(agent, estimate)
            self._running.append(reservation)
        for scope, text in warnings:
            await self._warn(scope, text)
        return reconnect, reservation

    def release(self, reservation: Reservation | None) -> None:
        """The turn ended (its cost is in the records now, or it never spent): free its share."""
        if reservation is not None and not reservation.released:
            reservation.released = True
            self._running.remove(reservation)

    async def _figures(
        self, agent: str, model: str | None = None
    ) -> tuple[dict[str, float], float]:
        """Today's spend per agent, and what a turn of ``agent`` (on ``model``) is
        reckoned to cost."""
        spent = await self.spent_today()
        week = await self.praetorium.records.usage_since(self.day_start() - timedelta(days=6))
        turns = sum(r.turns for r in week if r.agent == agent)
        cost = sum(r.cost_usd for r in week if r.agent == agent)
        estimate = max(ESTIMATE_FLOOR_USD, cost / turns if turns else 0.0)
        price = model_price(self.config.models, model)
        if price is not None and turns:  # its usual turn, at this model's price
            tokens_in = sum(r.input_tokens for r in week if r.agent == agent) / turns
            tokens_out = sum(r.output_tokens for r in week if r.agent == agent) / turns
            estimate = (tokens_in * price.input_usd + tokens_out * price.output_usd) / 1e6
        if self.per_turn_usd:
            estimate = min(estimate, self.per_turn_usd)
        return spent, estimate

    def backstop(self) -> dict[str, Any]:
        """The CLI's own per-process cap (``max_budget_usd``), set to the per-turn budget."""
        return {"max_budget_usd": self.per_turn_usd} if self.per_turn_usd else {}

    def observer(self, agent: str) -> Callable[[object], None]:
        """Notes a turn the CLI's backstop ended (``error_max_budget_usd``); made when the
        agent's CLI starts."""
        from claude_agent_sdk import ResultMessage

        def observe(message: object) -> None:
            if isinstance(message, ResultMessage) and message.subtype == "error_max_budget_usd":
                self._stopped.add(agent)

        return observe

    def stopped(self, error: AgentError, session: Any) -> bool:
        """Whether the CLI's per-turn backstop ended the turn (its process is then spent)."""
        if error.agent not in self._stopped:
            return False
        self._stopped.discard(error.agent)
        if session is not None:
            session.broken = True  # the CLI refuses every later query: reconnect
        return True

    def stopped_reason(self) -> str:
        return f"stopped: this turn reached [budget] per_turn_usd (${self.per_turn_usd:,.2f})"

    def _check(
        self, agent: str, agent_daily_usd: float | None, spent: dict[str, float], estimate: float
    ) -> list[tuple[str, str]]:
        """Raise ``TurnHeld`` if this turn would pass a limit; the 80 % warnings due."""
        legion_limit = self.config.budget.daily_usd
        total = sum(spent.values())
        mine = spent.get(agent, 0.0)
        running, running_mine = self.reserved(), self.reserved(agent)
        midnight = f"midnight ({self.zone.key})"
        least = min(estimate, ESTIMATE_FLOOR_USD)  # this turn: room for at least a small one
        if legion_limit and total + running + least > legion_limit:
            busy = f" and {_usd(running)} set aside for the turns running now" if running else ""
            raise TurnHeld(
                agent,
                f"💰 Today's budget is spent: the legion has used {_usd(total)}{busy} of its "
                f"{_usd(legion_limit)} a day, so {agent} did not start. Nothing is lost: raise "
                "[budget] daily_usd in legio.toml and send /retry, or /retry after "
                f"{midnight}.",
            )
        if agent_daily_usd and mine + running_mine + least > agent_daily_usd:
            raise TurnHeld(
                agent,
                f"💰 {agent}'s budget for today is spent: {_usd(mine)} of its "
                f"{_usd(agent_daily_usd)} a day, so it did not start. Nothing is lost: raise "
                f"daily_usd in {agent}'s prompt frontmatter and send /retry, or /retry after "
                f"{midnight}.",
            )
        warnings = []
        if legion_limit and total >= WARN_AT * legion_limit:
            warnings.append(
                (
                    "legion",
                    f"💰 The legion has used {_usd(total)} of today's {_usd(legion_limit)} "
                    f"({total / legion_limit:.0%}); turns stop at the limit until {midnight}.",
                )
            )
        if agent_daily_usd and mine >= WARN_AT * agent_daily_usd:
            warnings.append(
                (
                    agent,
                    f"💰 {agent} has used {_usd(mine)} of its {_usd(agent_daily_usd)} for "
                    f"today ({mine / agent_daily_usd:.0%}).",
                )
            )
        return warnings

    async def _warn(self, scope: str, text: str) -> None:
        key = (self.day_start().date().isoformat(), scope)
        if key in self._warned:
            return
        self._warned.add(key)
        logger.warning("%s", text)
        if self.notify is not None:
            try:
                await self.notify(text)
            except Exception:
                logger.exception("could not tell Caesar about the budget")

    async def hold(self, seq: int, agent: str) -> None:
        """Record request ``seq`` as unanswered by ``agent`` (``/retry`` runs it again)."""
        db = self.praetorium.connection
        async with db.execute(
            "SELECT agents, retried_at FROM interruptions WHERE seq = ?", (seq,)
        ) as cursor:
            row = await cursor.fetchone()
        agents = [] if row is None or row["retried_at"] else list(json.loads(row["agents"]))
        if agent not in agents:
            agents.append(agent)
        await db.execute(
            "INSERT INTO interruptions (seq, agents, noticed_at) VALUES (?, ?, ?) "
            "ON CONFLICT (seq) DO UPDATE SET agents = excluded.agents, retried_at = NULL",
            (seq, json.dumps(agents), self.clock().astimezone(UTC).isoformat()),
        )

    async def usage_report(self) -> UsageReport:
        start = self.day_start()
        return UsageReport(
            today=await self.praetorium.records.usage_since(start),
            week=await self.praetorium.records.usage_since(start - timedelta(days=6)),
            day_start=start,
            daily_usd=self.config.budget.daily_usd,
            zone=self.zone.key,
            reserved=self.reserved(),
        )
