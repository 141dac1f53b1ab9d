"""Approvals decided in the cockpit as well as in the chat: an ``Asker`` that puts each
tool call on the Now page and hands it to the chat's asker too; the first answer wins
(the chat's buttons are then cancelled, the page's withdrawn). The same rules as the chat:
the gate (``Gatekeeper``) records, grants and times out; this only carries the choice.
Agents' questions stay the chat's.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from legio.app import ApprovalRequest, Asker, Decision, QuestionRequest
from legio.frontends.web.live import Live

CHOICES = {"once": "✅ Allowed once", "always": "♾ Always allowed", "deny": "⛔ Denied"}


@dataclass
class Waiting:
    request: ApprovalRequest
    future: asyncio.Future[Decision]


def ask_data(request: ApprovalRequest) -> dict[str, Any]:
    """What the page shows of a waiting call: the exact command or write, whole."""
    return {
        "id": request.id,
        "agent": request.agent,
        "tool": request.tool,
        "target": request.full_target or request.target,
        "why": request.why_asked(),
        "description": request.description,
    }


class SharedAsker:
    """See the module docstring; ``inner``: the chat's asker (None: the cockpit alone)."""

    def __init__(self, live: Live, inner: Asker | None = None) -> None:
        self.live = live
        self.inner = inner
        self.waiting: dict[int, Waiting] = {}

    async def approve(self, request: ApprovalRequest) -> Decision:
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[Decision] = loop.create_future()
        self.waiting[request.id] = Waiting(request, mine)
        self.live.publish("ask", ask_data(request))
        racing: list[asyncio.Future[Any]] = [mine]
        if self.inner is not None:
            racing.append(asyncio.ensure_future(self.inner.approve(request)))
        try:
            done, _ = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            decision: Decision = next(iter(done)).result()
            return decision
        finally:
            self.waiting.pop(request.id, None)
            for other in racing:
                other.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.gather(*racing[1:], return_exceptions=True)
            self.live.publish("asked", {"id": request.id})

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        return await self.inner.answer(request) if self.inner is not None else None

    def decide(self, request_id: int, choice: str) -> bool:
        """Caesar's choice from the page; False if that call waits no more."""
        waiting = self.waiting.get(request_id)
        if waiting is None or waiting.future.done() or choice not in CHOICES:
            return False
        waiting.future.set_result(Decision(choice))  # type: ignore[arg-type]
        return True

    def pending(self) -> list[dict[str, Any]]:
        return [ask_data(w.request) for w in self.waiting.values()]
