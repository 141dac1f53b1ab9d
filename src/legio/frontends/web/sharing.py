"""What the cockpit shares with the chat: each request's feedback seen on the page too
(``Observed``, a ``Watch`` that tells both), and its approvals decided on either side
(``SharedAsker``): each tool call is put on the Now page and handed to the chat's asker;
the first answer wins (the chat's buttons are then withdrawn, the page's removed). The
same rules as the chat: the gate (``Gatekeeper``) records, grants and times out; this only
carries the choice. Agents' questions stay the chat's.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from legio.frontends.web.live import Live
from legio.request import (
    Added,
    ApprovalRequest,
    Asker,
    Decision,
    QuestionRequest,
    Reply,
    Status,
    Watch,
    WorkCard,
)

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


class Approvals:
    """The tool calls waiting for Caesar now, whichever request asked them."""

    def __init__(self, live: Live) -> None:
        self.live = live
        self.waiting: dict[int, Waiting] = {}

    def decide(self, request_id: int, choice: str) -> bool:
        """Caesar's choice from the page; False if that call waits no more."""
        waiting = self.waiting.get(request_id)
        if waiting is None or waiting.future.done() or choice not in CHOICES:
            return False
        waiting.future.set_result(Decision(choice))  # type: ignore[arg-type]
        return True

    def pending(self) -> list[dict[str, Any]]:
        return [ask_data(w.request) for w in self.waiting.values()]


class SharedAsker:
    """One request's asker: the page and ``inner`` (the chat's asker; None: the page alone)."""

    def __init__(self, approvals: Approvals, inner: Asker | None = None) -> None:
        self.approvals = approvals
        self.inner = inner

    async def approve(self, request: ApprovalRequest) -> Decision:
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[Decision] = loop.create_future()
        live = self.approvals.live
        self.approvals.waiting[request.id] = Waiting(request, mine)
        live.publish("ask", ask_data(request))
        racing: list[asyncio.Future[Any]] = [mine]
        if self.inner is not None:
            racing.append(asyncio.ensure_future(self.inner.approve(request)))
        try:
            done, _ = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            decision: Decision = next(iter(done)).result()
            return decision
        finally:
            self.approvals.waiting.pop(request.id, None)
            for other in racing:
                other.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.gather(*racing[1:], return_exceptions=True)
            live.publish("asked", {"id": request.id})

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        return await self.inner.answer(request) if self.inner is not None else None


class Observed:
    """``watch`` (a front-end's, for one request) told as before, and the page as well."""

    def __init__(self, watch: Watch, live: Live, approvals: Approvals) -> None:
        self.watch = watch
        self.live = live
        inner = watch.asker()  # None: the front-end's standing asker, left to it
        self._asker = SharedAsker(approvals, inner) if inner is not None else None

    async def status(self, status: Status) -> None:
        await self.live.status(status)
        await self.watch.status(status)

    async def stream(self, agent: str, text: str) -> None:
        await self.live.stream(agent, text)
        await self.watch.stream(agent, text)

    async def reply(self, reply: Reply) -> None:
        await self.live.reply(reply)
        await self.watch.reply(reply)

    async def card(self, card: WorkCard) -> None:
        await self.live.card(card, False)
        await self.watch.card(card)

    async def joined(self, added: Added) -> None:
        await self.watch.joined(added)

    def asker(self) -> Asker | None:
        return self._asker
