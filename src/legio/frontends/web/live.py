"""The cockpit's live view: an ``Events`` object (the typed way back, ``request.py``)
that keeps each agent's state now and pushes every change to open pages.

Each change is one numbered event (``status``, ``stream``, ``reply``, ``card``, ``ask``,
``asked``, ``forge``, ``stuck``, ``notice``, ``job``) kept in a bounded ring: a page
that reconnects with ``Last-Event-ID`` gets what it missed from the ring; one whose gap
is older than the ring is told to ``reload`` (its state read again through the door).
Streamed text is sent as what was added when it grows, whole when it was rewritten.
Everything is data (JSON): the page's script puts it in as text, never as HTML.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from legio.app import Job, JobRun
from legio.request import Asker, ForgeEvent, Reply, Status, Stuck, WorkCard

RING = 2000  # events kept for a page that reconnects
QUEUE = 1000  # a page that falls this far behind is told to reload
STREAM_SHOWN = 20_000  # the end of a long answer kept for a page opened mid-stream


@dataclass
class AgentNow:
    """One agent as the Now page shows it: what it does, since when, its answer so far."""

    agent: str
    kind: str = "idle"  # idle, or a Status kind (queued, thinking, tool, writing…)
    tool: str = ""
    target: str = ""
    note: str = ""
    project: str | None = None
    since: float = 0.0
    text: str = ""

    def data(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "kind": self.kind,
            "tool": self.tool,
            "target": self.target,
            "note": self.note,
            "project": self.project,
            "since": self.since,
        }


@dataclass(eq=False)
class Subscriber:
    queue: asyncio.Queue[tuple[int, str, str]] = field(default_factory=lambda: asyncio.Queue(QUEUE))
    overflowed: bool = False


class Live:
    """See the module docstring: the app's ``Events`` (``legio.audience``), and what each
    request's watch tells (``sharing.Observed``)."""

    def __init__(self, clock: Callable[[], float] = time.time, ring: int = RING) -> None:
        self.clock = clock
        self.agents: dict[str, AgentNow] = {}
        self.ring: deque[tuple[int, str, str]] = deque(maxlen=ring)
        self.last_id = 0
        self.forge_states: dict[tuple[str, str], dict[str, Any]] = {}  # CI of each PR
        self._subscribers: set[Subscriber] = set()

    # ---------------------------------------------------------- the feed

    def publish(self, event: str, data: dict[str, Any]) -> int:
        self.last_id += 1
        item = (self.last_id, event, json.dumps(data, ensure_ascii=False, default=str))
        self.ring.append(item)
        for sub in self._subscribers:
            try:
                sub.queue.put_nowait(item)
            except asyncio.QueueFull:
                sub.overflowed = True
        return self.last_id

    def since(self, last_id: int) -> list[tuple[int, str, str]] | None:
        """Events after ``last_id``; None when some of them left the ring already."""
        if last_id >= self.last_id:
            return []
        oldest = self.ring[0][0] if self.ring else self.last_id + 1
        if last_id + 1 < oldest:
            return None
        return [item for item in self.ring if item[0] > last_id]

    def subscribe(self) -> Subscriber:
        sub = Subscriber()
        self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self._subscribers.discard(sub)

    @property
    def watchers(self) -> int:
        return len(self._subscribers)

    def now(self, agent: str) -> AgentNow:
        return self.agents.setdefault(agent, AgentNow(agent))

    # ---------------------------------------------------------- observing turns

    async def status(self, status: Status) -> None:
        agent = self.now(status.agent)
        if agent.kind == "idle":
            agent.text = ""  # a new turn: the last answer gives way
        agent.kind = status.kind
        agent.tool, agent.target, agent.note = status.tool, status.target, status.note
        agent.project = status.project
        agent.since = status.since or self.clock()
        self.publish("status", agent.data())

    async def stream(self, agent_name: str, text: str) -> None:
        agent = self.now(agent_name)
        if agent.kind == "idle":
            agent.text = ""  # a new turn: the last answer gives way
        if agent.kind in ("idle", "queued", "starting"):
            agent.kind, agent.since = "writing", self.clock()
        previous = agent.text
        agent.text = text[-STREAM_SHOWN:]
        if text.startswith(previous) and previous:
            self.publish("stream", {"agent": agent_name, "append": text[len(previous) :]})
        else:
            self.publish("stream", {"agent": agent_name, "text": agent.text})

    async def reply(self, reply: Reply) -> None:
        agent = self.now(reply.agent)
        agent.kind, agent.tool, agent.target, agent.note = "idle", "", "", ""
        agent.since, agent.text = self.clock(), reply.text[-STREAM_SHOWN:]  # shown until the next
        self.publish(
            "reply",
            {
                "agent": reply.agent,
                "kind": reply.kind,
                "text": reply.text[-STREAM_SHOWN:],
                "seq": reply.seq,
                "project": reply.project,
            },
        )

    # ---------------------------------------------------------- what belongs to no request

    def asker(self) -> Asker | None:
        return None  # a call outside any request is asked in the chat

    async def notice(self, text: str) -> None:
        self.publish("notice", {"text": text})

    async def card(self, card: WorkCard, new: bool = False) -> None:
        self.publish("card", {**card_data(card), "new": new})

    async def dispatched(self, agent: str, text: str) -> None:
        await self.reply(Reply(agent, text))

    async def forge(self, event: ForgeEvent) -> None:
        data = {
            "kind": event.kind,
            "project": event.project,
            "agent": event.agent,
            "number": event.number,
            "url": event.url,
            "sha": event.sha,
        }
        self.forge_states[(event.project, event.agent)] = data
        self.publish("forge", data)

    async def stuck(self, stuck: Stuck) -> None:
        self.publish("stuck", {"agent": stuck.agent, "silent_for_s": stuck.silent_for_s})

    async def operation(self, event: object) -> None:
        self.publish("operation", {"kind": type(event).__name__})

    async def job(self, job: Job, run: JobRun) -> bool:
        self.publish("job", {"id": job.id, "name": job.name})
        return False  # shown by the chat, which runs it

    async def requested(self, agent: str, run: JobRun) -> bool:
        return False  # the page's own 🛠 Fix: shown by the chat, seen here through its watch


def card_data(card: WorkCard) -> dict[str, Any]:
    return {
        "id": card.id,
        "agent": card.agent,
        "project": card.project,
        "branch": card.branch,
        "commits": card.commits,
        "files": card.files,
        "added": card.added,
        "removed": card.removed,
        "check_id": card.check_id,
    }
