"""The event loop's lag: how late the loop wakes a task that asked to sleep.

A task on the loop sleeps ``interval_s`` again and again and notes how late it woke
(the lag; on an idle loop nearly nothing). A thread beside it watches the task's last
beat, waking when that beat would be stale (not on a short tick: an idle daemon wakes
twice a second, not ten times): when the loop has not come back for ``threshold_s``
(something blocks it — a synchronous call, a long computation), the thread takes the
stack of the loop's thread at that moment, which is *what was running*. When the loop
comes back, the stall is logged (a warning) with that stack, and counted for
``legio status``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from dataclasses import dataclass

logger = logging.getLogger(__name__)

STACK_LINES = 12  # of the loop thread's stack, innermost last


@dataclass
class LagFigures:
    """What ``legio status`` shows of the loop's lag (seconds; ``at``: Unix time)."""

    last_s: float = 0.0
    worst_s: float = 0.0
    stalls: int = 0  # times the loop was late by more than the threshold
    last_stall_s: float = 0.0
    last_stall_at: float | None = None
    last_stall_where: str = ""


class LagMonitor:
    """Measures the loop's lag; see the module docstring."""

    def __init__(self, interval_s: float = 0.5, threshold_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.threshold_s = threshold_s
        self.figures = LagFigures()
        self.captured = threading.Event()  # set each time the thread took a stalled stack
        self._beat = time.monotonic()
        self._stack: str = ""
        self._loop_thread: int | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start measuring on the running loop, with the watching thread beside it."""
        self._loop_thread = threading.get_ident()
        self._beat = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._measure(), name="loop-lag")
        self._thread = threading.Thread(target=self._watch, name="legio-loop-watch", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stopped.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    async def _measure(self) -> None:
        while True:
            expected = time.monotonic() + self.interval_s
            await asyncio.sleep(self.interval_s)
            now = time.monotonic()
            self._beat = now
            self.note(max(0.0, now - expected))

    def note(self, lag_s: float) -> None:
        """Count one measured lag; over the threshold, log it with what was running."""
        figures = self.figures
        figures.last_s = lag_s
        figures.worst_s = max(figures.worst_s, lag_s)
        if lag_s <= self.threshold_s:
            return
        where, self._stack = self._stack or "(not caught: the stall ended before it)", ""
        figures.stalls += 1
        figures.last_stall_s = lag_s
        figures.last_stall_at = time.time()
        figures.last_stall_where = where
        logger.warning("the event loop was blocked for %.1f s; it was running:\n%s", lag_s, where)

    def _watch(self) -> None:
        # It wakes when the last beat it saw would be stale, not on a fixed short tick: on
        # an idle daemon that is about once per beat (a tick every 0.1 s cost ~0.9 ms/s).
        taken_for = -1.0
        wait = self.threshold_s
        while not self._stopped.wait(wait):
            beat = self._beat
            late = time.monotonic() - beat
            if beat == taken_for:  # this stall's stack is taken: look for the next beat
                wait = self.threshold_s / 4
                continue
            if late <= self.threshold_s:
                wait = self.threshold_s - late + 0.01
                continue
            frame = sys._current_frames().get(self._loop_thread or 0)
            if frame is None:
                continue
            self._stack = "".join(traceback.format_stack(frame)[-STACK_LINES:]).rstrip()
            taken_for = beat
            wait = self.threshold_s / 4
            self.captured.set()
