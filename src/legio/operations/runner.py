"""``Operations``: what keeps a running Legio observable and tidy, beside its engine.

Always (every ``LegioApp``): the watch, a task that now and then looks for stuck turns
(``stuck``, told to whoever follows them: ``follow_stuck``) and for a disk running low
(``disk``, told once through the notifier Caesar's front-end set); the disk guard that
intake asks before taking a file; the drain of ``/restart`` (``restart``: new requests
refused while running ones finish or are stopped, then ``on_restart`` is called).

For the daemon (``start_daemon``, from ``legio run`` and ``legio console``): the status
socket and the optional health endpoint (``control``), the loop-lag monitor (``lag``), the
last error logged (``logfile.LastError``), and systemd's notify protocol with its watchdog
pinged from the loop (``systemd``). ``close`` takes all of it down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from legio.config import Config
from legio.operations import report
from legio.operations.control import Answer, health_problem, serve_health, serve_socket
from legio.operations.disk import DiskGuard, FreeSpace, free_bytes
from legio.operations.lag import LagMonitor
from legio.operations.logfile import LastError
from legio.operations.stuck import StuckWatch
from legio.operations.systemd import Notifier
from legio.request import Stuck, StuckCallback
from legio.sessions.manager import SessionManager
from legio.store.praetorium import Praetorium

logger = logging.getLogger(__name__)

Notice = Callable[[str], Awaitable[None]]
Drain = Literal["wait", "now"]
DRAIN_NOTICE = (
    "Legio is restarting (an upgrade, or /restart): it takes no new request until it is "
    "back, in a moment. Send this again then."
)


class Operations:
    """See the module docstring."""

    def __init__(
        self,
        config: Config,
        sessions: SessionManager,
        praetorium: Praetorium,
        agents: Callable[[], list[str]],
        *,
        pause_jobs: Callable[[], Awaitable[None]] | None = None,
        free: FreeSpace = free_bytes,
    ) -> None:
        self.config = config
        self.castra_root: Path = config.castra
        self.sessions = sessions
        self.praetorium = praetorium
        self.agents = agents
        self.pause_jobs = pause_jobs
        self.started = time.time()
        self.stuck = StuckWatch(sessions, agents, config.sessions.stuck_minutes * 60)
        self.disk = DiskGuard(config.castra, config.disk.warn_mb, config.disk.refuse_mb, free)
        self.notify: Notice | None = None  # Caesar's front-end (LegioApp.set_notifier)
        self.systemd = Notifier()
        self.lag: LagMonitor | None = None
        self.last_error: LastError | None = None
        self.socket: Path | None = None
        self.requests: dict[str, Answer] = {}  # the socket's other requests (the cockpit's link)
        self.health: tuple[str, int] | None = None  # where /health listens, once it does
        self.on_restart: Callable[[], None] | None = None  # set by `legio run`
        self.draining: Drain | None = None
        self.in_flight = 0  # requests at the door (handle_message, retry)
        self._followers: list[StuckCallback] = []
        self._servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---------------------------------------------------------- life

    def start(self) -> None:
        """Start the watch (stuck turns, disk space)."""
        self.spawn(self._watch(), "operations-watch")

    async def start_daemon(self, on_restart: Callable[[], None] | None = None) -> None:
        """The daemon's parts: socket, health endpoint, lag, last error, watchdog."""
        self.on_restart = on_restart
        self.last_error = LastError()
        logging.getLogger().addHandler(self.last_error)
        self.lag = LagMonitor()
        self.lag.start()
        server, self.socket = await serve_socket(self.castra_root, self.snapshot, self.requests)
        self._servers.append(server)
        listen = self.config.health.listen
        problem = health_problem(self.config)
        if problem:
            logger.error("no health endpoint: %s", problem)
        elif listen:
            try:
                health = await serve_health(listen, self.public_snapshot)
            except OSError as e:
                logger.error("no health endpoint: cannot listen on %s: %s", listen, e)
            else:
                self._servers.append(health)
                self.health = health.sockets[0].getsockname()[:2]
                logger.info("health endpoint on http://%s:%s/health", *self.health)
        self.spawn(self.systemd.keep_alive(), "systemd-watchdog")

    def ready(self, how: str) -> None:
        """Legio listens (``how``: Telegram polling, the console): systemd's READY=1."""
        self.systemd.ready(f"listening ({how})")

    def stopping(self) -> None:
        self.systemd.stopping()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in self._servers:
            server.close()
            await server.wait_closed()
        self._servers.clear()
        if self.socket is not None:
            with contextlib.suppress(OSError):
                self.socket.unlink()
        if self.lag is not None:
            await self.lag.stop()
        if self.last_error is not None:
            logging.getLogger().removeHandler(self.last_error)
        self.systemd.close()

    def spawn(self, work: Awaitable[Any], name: str) -> None:
        """Run ``work`` in the background until it ends or Legio closes (then cancelled)."""
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---------------------------------------------------------- status

    async def snapshot(self) -> dict[str, Any]:
        """What ``legio status`` shows (``legio.operations.report``)."""
        return await report.snapshot(
            started=self.started,
            castra_root=self.castra_root,
            sessions=self.sessions,
            praetorium=self.praetorium,
            agents=self.agents(),
            stuck=self.stuck,
            lag=self.lag,
            disk=self.disk,
            last_error=self.last_error,
            draining=self.draining,
        )

    async def public_snapshot(self) -> dict[str, Any]:
        """What ``GET /health`` shows: the status less what only Caesar may read."""
        return report.public(await self.snapshot())

    # ---------------------------------------------------------- the watch

    def follow_stuck(self, callback: StuckCallback) -> Callable[[], None]:
        """Call ``callback`` for each stuck turn; returns the unsubscribe."""
        self._followers.append(callback)
        return lambda: self._followers.remove(callback)

    def tick_s(self) -> float:
        return max(0.05, min(30.0, self.stuck.stuck_s / 4))

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s())
            try:
                await self.look()
            except Exception:
                logger.exception("the operations watch failed; it goes on")

    async def look(self) -> None:
        """One look: stuck turns told to their followers, a low disk to Caesar."""
        for stuck in self.stuck.check():
            logger.warning(
                "%s: its turn on #%s has heard nothing from its CLI for %.0f s",
                stuck.agent,
                stuck.seq,
                stuck.silent_for_s,
            )
            for follower in list(self._followers):
                self.spawn(self._tell(follower, stuck), f"stuck-{stuck.agent}")
        notice = self.disk.check()
        if notice is not None and self.notify is not None:
            await self.notify(notice)

    @staticmethod
    async def _tell(follower: StuckCallback, stuck: Stuck) -> None:
        try:
            await follower(stuck)
        except Exception:
            logger.exception("could not tell Caesar about %s's stuck turn", stuck.agent)

    # ---------------------------------------------------------- restart

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """Count a request at the door while it runs (a drain waits for none left)."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1

    def busy(self) -> bool:
        """Whether any request or agent turn is still under way."""
        if self.in_flight:
            return True
        return any(
            self.sessions.slot(name).state == "working" or self.sessions.errands.waiting(name)
            for name in self.agents()
        )

    async def restart(self, mode: Drain, stop_all: Callable[[], Awaitable[Any]]) -> str:
        """``/restart wait|now``: refuse new requests, let running ones finish (``wait``)
        or stop them (``now``), then start again (``on_restart``). What to tell Caesar."""
        if self.on_restart is None:
            return "This Legio cannot restart itself: it was not started by `legio run`."
        if self.draining == "wait" and mode == "now":
            self.draining = mode
            await stop_all()
            return "♻️ Stopping the running requests; restarting."
        if self.draining is not None:
            return f"Legio is already restarting ({self.draining})."
        self.draining = mode
        if self.pause_jobs is not None:
            await self.pause_jobs()
        running = self.in_flight
        if mode == "now":
            await stop_all()
        self.spawn(self._restart_when_idle(), "restart-drain")
        if mode == "now" or not running:
            return "♻️ Restarting now."
        return (
            f"♻️ Restarting once the {running} running request(s) finish; new requests are "
            "refused until then. /restart now stops them instead."
        )

    async def _restart_when_idle(self) -> None:
        while self.busy():  # noqa: ASYNC110 (agents' states change with no event to wait for)
            await asyncio.sleep(0.2)
        logger.info("drained: restarting")
        self.systemd.send("RELOADING=1", "STATUS=restarting")
        if self.on_restart is not None:
            self.on_restart()
