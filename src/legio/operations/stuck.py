"""Stuck turns: a turn whose agent's CLI has sent nothing for ``[sessions] stuck_minutes``.

Every message the CLI sends during a turn is noted on its session (``AgentSession.heard``,
set by ``legio.sessions.client.ask``). ``StuckWatch.check`` (called now and then) finds
each turn silent for longer than the limit and reports it once, as a ``Stuck`` value;
the front-end says it in the agent's lane with **Stop** and **Keep waiting**. Keep
waiting (``keep_waiting``) counts the silence again from that moment: the turn is said
again only after another full period of silence. A turn that speaks again and then falls
silent is a new silence, said again.

A CLI that dies mid-turn is not silent but gone: its turn ends at once with an error
reply that offers ``/retry`` (the request is held for it), and its CLI is started again
(resumed) for the agent's next request (``legio.sessions.slot.ensure``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from legio.request import Stuck
from legio.sessions.manager import SessionManager


class StuckWatch:
    """Finds silent turns; see the module docstring."""

    def __init__(
        self,
        sessions: SessionManager,
        agents: Callable[[], list[str]],
        stuck_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sessions = sessions
        self.agents = agents
        self.stuck_s = stuck_s
        self.clock = clock
        self._said: set[tuple[str, float, float]] = set()  # (agent, turn, silence began)
        self._patience: dict[str, tuple[float, float]] = {}  # agent: (its turn, counted from)
        self.current: dict[str, Stuck] = {}  # silent now, for legio status

    def _silence(self, agent: str) -> tuple[int, float, float] | None:
        """(nuntius, turn, silence began) of ``agent``'s turn under way, if any."""
        session = self.sessions.slot(agent).session
        if session is None or session.asking is None:
            return None
        began = session.heard
        turn, counted = self._patience.get(agent, (None, 0.0))
        if turn == session.asked_at:
            began = max(began, counted)
        return session.asking, session.asked_at, began

    def check(self) -> list[Stuck]:
        """The turns silent too long, each reported once (see the module docstring)."""
        now = self.clock()
        found = []
        self.current = {}
        for agent in self.agents():
            silence = self._silence(agent)
            if silence is None:
                self._patience.pop(agent, None)
                continue
            seq, turn, began = silence
            if now - began < self.stuck_s:
                continue
            session = self.sessions.slot(agent).session
            heard = session.heard if session is not None else began
            stuck = Stuck(agent, seq, now - heard)
            self.current[agent] = stuck
            if (agent, turn, began) not in self._said:
                self._said.add((agent, turn, began))
                found.append(stuck)
        live = {(a, t) for a in self.agents() if (s := self._silence(a)) for t in [s[1]]}
        self._said = {key for key in self._said if key[:2] in live}
        return found

    def keep_waiting(self, agent: str) -> bool:
        """Caesar waits on: ``agent``'s silence counts from now. False if no turn runs."""
        silence = self._silence(agent)
        if silence is None:
            return False
        self._patience[agent] = (silence[1], self.clock())
        self.current.pop(agent, None)
        return True
