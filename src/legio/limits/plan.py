"""Plan limits and logins: noticed from the CLI's messages, told to Caesar once, waited out.

What the bundled CLI reports (PROTOCOLS.md): a plan limit is an
``AssistantMessage(error="rate_limit")`` and a ``ResultMessage`` with
``api_error_status=429``, preceded (with a subscription login) by a
``RateLimitEvent(status="rejected", resets_at=…)``; an expired or wrong login is
``error="authentication_failed"`` / 401. No exception, and the answer's wording is
never read. ``PlanHealth.observer`` sees every message of every turn.

After a plan limit with a known reset time, Caesar is told once (what, and when it
resets), the turn that hit it runs once more after the reset, and every turn queued
meanwhile waits for the reset too (``wait_clear``) instead of failing one after
another. A failed login is told once, with the fix (``claude login``, ``legio check``);
turns are then held (``TurnHeld``: unanswered, ``/retry`` runs them) until ``/retry``
clears it. The plan's windows (five-hour, weekly) are kept for ``/usage``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from legio.errors import TurnHeld
from legio.request import Status, Watch

logger = logging.getLogger(__name__)

Notifier = Callable[[str], Awaitable[None]]
Clock = Callable[[], datetime]
Sleep = Callable[[float], Awaitable[None]]
LOGIN_FIX = (
    "run `claude login` on Legio's machine (or set a valid ANTHROPIC_API_KEY), check with "
    "`legio check`, then send /retry"
)
WINDOW_NAMES = {"five_hour": "five-hour", "seven_day": "weekly"}


@dataclass(frozen=True)
class Window:
    """One of the plan's windows as the API last reported it."""

    kind: str
    status: str
    resets_at: datetime | None
    utilization: float | None


@dataclass(frozen=True)
class Fault:
    kind: str  # rate_limit or authentication_failed
    resets_at: datetime | None
    window: str | None


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment else "an unknown time"


class PlanHealth:
    """The plan's state across agents; see the module docstring."""

    def __init__(self, *, clock: Clock | None = None, sleep: Sleep | None = None) -> None:
        self.clock = clock or (lambda: datetime.now(UTC))
        self.sleep = sleep or asyncio.sleep
        self.notify: Notifier | None = None
        self.windows: dict[str, Window] = {}
        self.fault: Fault | None = None
        self._turn_faults: dict[str, str] = {}
        self._rejected: tuple[datetime | None, str | None] = (None, None)

    # ---------------------------------------------------------- observing turns

    def observer(self, agent: str) -> Callable[[object], None]:
        """A callback for each message of agent ``agent``'s turns (made when its CLI starts)."""
        from claude_agent_sdk import AssistantMessage, RateLimitEvent, ResultMessage

        def observe(message: object) -> None:
            if isinstance(message, RateLimitEvent):
                info = message.rate_limit_info
                resets = datetime.fromtimestamp(info.resets_at, UTC) if info.resets_at else None
                kind = str(info.rate_limit_type or "plan")
                self.windows[kind] = Window(kind, str(info.status), resets, info.utilization)
                if info.status == "rejected":
                    self._rejected = (resets, kind)
            elif isinstance(message, AssistantMessage) and message.error in (
                "rate_limit",
                "authentication_failed",
            ):
                self._turn_faults[agent] = str(message.error)
            elif isinstance(message, ResultMessage) and agent not in self._turn_faults:
                status = message.api_error_status
                if status in (401, 429) and message.is_error:
                    self._turn_faults[agent] = (
                        "rate_limit" if status == 429 else ("authentication_failed")
                    )

        return observe

    async def limited(self, agent: str, watch: Watch | None = None) -> bool:
        """After agent ``agent``'s turn failed: was it the plan? Tell Caesar (once); for a
        plan limit with a reset time, wait for it and return True (run the turn again);
        without one (an API key gets no reset time), or for a login, raise ``TurnHeld``."""
        kind = self._turn_faults.pop(agent, None)
        if kind is None:
            return False
        resets, window = self._rejected if kind == "rate_limit" else (None, None)
        first = self.fault is None
        self.fault = Fault(kind, resets, window)
        if kind != "rate_limit" or resets is None:  # held: its reply is the one message
            logger.warning("%s", self._message(self.fault))
            raise TurnHeld(agent, f"⏸ {agent} stopped: {self._message(self.fault)}")
        if first:  # the turn waits for the reset: told once, here
            await self._tell(self._message(self.fault))
        await self.wait_clear(agent, watch)
        return True

    def _message(self, fault: Fault) -> str:
        if fault.kind == "authentication_failed":
            ok, state = login_state(dict(os.environ))
            if not ok and "none found" in state:  # not an expired login: none at all
                return (
                    "🔑 No Claude login found: run `claude login` on Legio's machine or set "
                    "ANTHROPIC_API_KEY, then send /retry."
                )
            return f"🔑 Claude refused Legio's login (it has expired or is wrong): {LOGIN_FIX}."
        name = WINDOW_NAMES.get(fault.window or "", "plan's")
        if fault.resets_at is None:
            return (
                f"⏸ The {name} limit is reached and the API did not say when it resets: "
                "the request waits; send /retry later."
            )
        return (
            f"⏸ The {name} limit is reached; it resets at {_when(fault.resets_at)}. "
            "Work waits and goes on by itself then."
        )

    async def _tell(self, text: str) -> None:
        logger.warning("%s", text)
        if self.notify is not None:
            try:
                await self.notify(text)
            except Exception:
                logger.exception("could not tell Caesar about the plan")

    # ---------------------------------------------------------- before a turn

    async def wait_clear(self, agent: str, watch: Watch | None = None) -> None:
        """Before a turn: wait for a plan limit's reset; a failed login holds the turn."""
        fault = self.fault
        if fault is None:
            return
        if fault.kind != "rate_limit" or fault.resets_at is None:
            raise TurnHeld(agent, f"⏸ {agent} did not start: {self._message(fault)}")
        if watch is not None:
            until = _when(fault.resets_at)
            try:
                await watch.status(Status(agent, "paused", note=until))
            except Exception:
                logger.exception("status callback failed (ignored)")
        while self.fault is fault and self.clock() < fault.resets_at:
            await self.sleep(max(0.0, (fault.resets_at - self.clock()).total_seconds()))
        if self.fault is fault:
            self.fault = None
            logger.info("the plan's limit has reset; work goes on")

    def clear(self) -> None:
        """``/retry``: try again (a fixed login, or a limit that is over)."""
        self.fault = None

    def lines(self) -> list[str]:
        """The plan's windows for ``/usage`` (empty with an API key: no such reports)."""
        out = []
        for window in self.windows.values():
            used = f", {window.utilization:.0%} used" if window.utilization is not None else ""
            name = WINDOW_NAMES.get(window.kind, window.kind)
            out.append(f"  {name}: {window.status}{used}, resets {_when(window.resets_at)}")
        if self.fault is not None:
            out.append(f"  ⚠️ {self._message(self.fault)}")
        return out


def login_state(environ: dict[str, str], now: datetime | None = None) -> tuple[bool, str]:
    """``legio check``: how the Claude CLI will log in, and whether that looks usable."""
    now = now or datetime.now(UTC)
    if environ.get("ANTHROPIC_API_KEY"):
        return True, "Claude login: an API key (ANTHROPIC_API_KEY); billed per token"
    if environ.get("CLAUDE_CODE_OAUTH_TOKEN"):
        return True, "Claude login: a subscription token (CLAUDE_CODE_OAUTH_TOKEN)"
    home = Path(environ.get("CLAUDE_CONFIG_DIR") or Path(environ.get("HOME", "~")) / ".claude")
    path = home.expanduser() / ".credentials.json"
    try:
        oauth = json.loads(path.read_text(encoding="utf-8")).get("claudeAiOauth") or {}
    except (OSError, ValueError, AttributeError):
        return False, f"Claude login: none found (no API key, no {path}): {LOGIN_FIX}"
    expires = oauth.get("expiresAt")
    refreshable = bool(oauth.get("refreshToken"))  # the CLI renews such a login itself
    if isinstance(expires, int | float) and not refreshable and expires / 1000 < now.timestamp():
        return False, f"Claude login: the login in {path} has expired: {LOGIN_FIX}"
    return True, f"Claude login: a subscription login ({path})"


def watch_turns(agent: str, *sources: PlanHealth | Any) -> Callable[[object], None] | None:
    """One callback for every message of ``agent``'s turns, fanned out to the
    ``observer`` of each source present (``PlanHealth``, ``Budget``)."""
    watchers = [source.observer(agent) for source in sources if source is not None]

    def observe(message: object) -> None:
        for watch in watchers:
            watch(message)

    return observe if watchers else None
