"""``OperationsDoor``: the daemon as seen from outside, through the door: ``legio status``
and ``/health``, systemd's notifications, stuck turns, backups and the morning digest as
events, ``/export``. ``LegioApp.operations``; the front-end parts that need it are given it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from legio.castra import Castra
from legio.config import Config
from legio.engine import Engine
from legio.jobs.schedule import zone
from legio.names import LEGATUS
from legio.operations.export import (
    EXTENSIONS,
    ExportResult,
    ExportSpec,
    Format,
    export_history,
    parse_since,
)
from legio.store.praetorium import Praetorium

EXPORTS_KEPT_S = 3600  # /export's files stay in castra/state/exports/ this long


class OperationsDoor:
    """Operations, for the front-ends and ``legio run``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.config: Config = engine.config
        self.castra: Castra = engine.castra
        self.praetorium: Praetorium = engine.praetorium

    async def start_operations(self, on_restart: Callable[[], None] | None = None) -> None:
        """The daemon's parts (``legio run``, ``legio console``): the status socket, the
        health endpoint, loop lag, systemd's watchdog. ``on_restart``: how ``/restart``
        starts the process again once drained."""
        await self.engine.operations.start_daemon(on_restart)

    def listening(self, how: str) -> None:
        """The front-end takes messages now (systemd's READY=1)."""
        self.engine.operations.ready(how)

    def stopping(self) -> None:
        """The front-end begins to stop (systemd's STOPPING=1)."""
        self.engine.operations.stopping()

    async def status_report(self) -> dict[str, Any]:
        """What ``legio status`` shows, as JSON-ready data (``legio.operations.report``)."""
        return await self.engine.operations.snapshot()

    def keep_waiting(self, agent: str) -> bool:
        """Caesar waits on for ``agent``'s silent turn: said again only after another
        period of silence. False if it runs no turn now."""
        return self.engine.operations.stuck.keep_waiting(agent)

    def answer_on_socket(
        self, request: str, answer: Callable[[], Awaitable[dict[str, Any]]]
    ) -> None:
        """The status socket (0600, this user's) also answers the line ``request``
        (``legio cockpit``'s one-time link, minted by the daemon)."""
        self.engine.operations.requests[request] = answer

    def running_requests(self) -> int:
        return self.engine.operations.in_flight

    async def export(
        self, fmt: Format = "md", agent: str | None = None, since: str | None = None
    ) -> ExportResult:
        """``/export``: the conversation (``agent``'s; from the day ``since``, 2026-11-01 on
        the owner's clock) written, streamed, to a file in ``castra/state/exports/`` (those
        older than an hour removed). ``LegioError`` for a date that is not one."""
        start = parse_since(since, zone_name=self.config.timezone) if since else None
        folder = self.castra.root / "state" / "exports"
        folder.mkdir(parents=True, exist_ok=True)
        tz = zone(self.config.timezone)
        made = datetime.now(tz)
        for old in folder.iterdir():  # sent long ago (one being sent now is kept)
            if old.stat().st_mtime < made.timestamp() - EXPORTS_KEPT_S:
                old.unlink(missing_ok=True)
        out = folder / f"legio-{agent or 'all'}-{made:%Y-%m-%dT%H%M%S}.{EXTENSIONS[fmt]}"
        spec = ExportSpec(fmt, agent, start, tz)
        return await asyncio.to_thread(export_history, self.praetorium.path, out, spec, made)

    async def choose(self, kind: str, args: str) -> str:
        """``/model`` and ``/effort`` (``kind``): an agent's model or effort for its
        session, kept across restarts (``legio.sessions.choices``); the answer to show."""
        agents = [LEGATUS, *self.engine.castra.roster().names]
        return await self.engine.sessions.choices.command(kind, args, agents)

    async def plan_first(self, args: str) -> str | None:
        """``/plan``, ``/plan <agent>``, ``/plan <agent> on|off``: which centuriones plan
        every request first (``legio.sessions.planning``); the answer to show, or None
        when ``args`` is a request to plan, to run as one."""
        agents = self.engine.castra.roster().names
        return await self.engine.sessions.planning.command(args, agents)
