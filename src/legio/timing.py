"""Where a request's time goes: timestamps per stage, for the benchmarks.

A front-end opens a trace when an update arrives (``begin``); code on the request's
path calls ``mark(stage)``; the trace follows the request through its tasks (a
context variable). Nothing is recorded unless a recorder was installed
(``install``): then ``mark`` costs one context-variable read and a ``None`` check.

Stages, in path order: ``update received`` (the handler runs), ``nuntius posted``
(Caesar's message stored), ``query sent`` (to the agent's CLI), ``first token`` (the
first streamed event or message from the model), ``answer posted`` (the answer
stored), ``sendMessage returned`` (the answer is on Telegram).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime


@dataclass
class Trace:
    """One request's marks: (stage, ``time.monotonic()``), in the order they came."""

    marks: list[tuple[str, float]] = field(default_factory=list)

    def first(self, stage: str) -> float | None:
        return next((t for s, t in self.marks if s == stage), None)


Recorder = Callable[[Trace], None]  # gets each trace when it opens

_recorder: Recorder | None = None
_current: ContextVar[Trace | None] = ContextVar("legio_trace", default=None)


def install(recorder: Recorder | None) -> None:
    """Record traces (``recorder`` receives each new one), or stop (``None``)."""
    global _recorder
    _recorder = recorder


@contextmanager
def begin(stage: str) -> Iterator[None]:
    """Open a trace for the request being handled, with its first mark."""
    if _recorder is None:
        yield
        return
    trace = Trace([(stage, time.monotonic())])
    _recorder(trace)
    token = _current.set(trace)
    try:
        yield
    finally:
        _current.reset(token)


def mark(stage: str) -> None:
    """Note that the current request reached ``stage`` (nothing if not recording)."""
    trace = _current.get()
    if trace is not None:
        trace.marks.append((stage, time.monotonic()))


def now() -> datetime:
    """The time now, in UTC: the one clock the stores write (``.isoformat()`` as text)."""
    return datetime.now(UTC)
