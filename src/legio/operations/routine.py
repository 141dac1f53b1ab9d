"""The daemon's own timetable: automatic backups and the morning digest.

One task, started with the job scheduler (``Engine.start_jobs``) and stopped before the
praetorium closes. It sleeps until the next thing is due (at most a minute at a time, so
a changed clock or a suspended machine is noticed):

- a backup every ``[backup] every`` (hourly, daily, weekly), counted from the last one's
  ``finished`` in ``castra/state/backups/last.json`` (none yet: a minute after start).
  The archive is written in a thread (``make_backup``), the oldest of Legio's archives
  beyond ``keep`` removed (never the new one; a removal that fails is ``prune_error``),
  and the result written to ``last.json`` (``finished``, ``archive``, ``ok``,
  ``error``, ``prune_error``), which ``legio status`` reads (``legio backup`` by hand
  writes it too).
  Only a failure is said to Caesar: a ``BackupFailed`` event.
- the digest at ``[digest] at`` on the owner's clock, once a day (the day it was last
  sent is kept in ``castra/state/digest.json``, so a restart does not send it twice),
  covering the 24 hours before: a ``DigestReady`` event, sent silently by the front-end.

Front-ends follow the events with ``LegioApp.follow_operations``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any

from legio.config import Config
from legio.fence.cliconfig import state_dir
from legio.operations.backup import BackupError, BackupResult, backup_dir, make_backup, prune
from legio.operations.digest import Digest, DigestReady, compute_digest
from legio.request import BackupFailed
from legio.store.praetorium import Praetorium
from legio.timing import now

logger = logging.getLogger(__name__)

Event = BackupFailed | DigestReady
Follower = Callable[[Event], Awaitable[None]]
Clock = Callable[[], datetime]
EVERY = {"hourly": timedelta(hours=1), "daily": timedelta(days=1), "weekly": timedelta(weeks=1)}
NAP_S = 60.0


def last_backup_path(castra_root: Path) -> Path:
    """``castra/state/backups/last.json``: the last automatic or manual backup's result."""
    return state_dir(castra_root) / "backups" / "last.json"


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a temp file, then renamed over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    temp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(temp, path)


def record_last(
    castra_root: Path,
    finished: datetime,
    archive: Path | None,
    error: str | None,
    prune_error: str | None = None,
) -> None:
    """Write a backup's result to ``last.json`` (a failure to write it is logged);
    ``prune_error``: the archive was written but older ones could not all be removed."""
    data = {
        "finished": finished.isoformat(),
        "archive": str(archive) if archive else None,
        "ok": error is None,
        "error": error,
        "prune_error": prune_error,
    }
    path = last_backup_path(castra_root)
    try:
        write_json(path, data)
    except OSError as e:
        logger.error("could not write %s: %s", path, e)


def next_backup(every: str, last: dict[str, Any] | None, moment: datetime) -> datetime | None:
    """When the next automatic backup is due (None: they are off)."""
    interval = EVERY.get(every)
    if interval is None:
        return None
    try:
        finished = datetime.fromisoformat(str((last or {})["finished"]))
    except (KeyError, ValueError):
        return moment
    return finished + interval


def next_digest(at: str, zone: tzinfo, sent_on: str | None, moment: datetime) -> datetime | None:
    """When the next digest is due: today at ``at`` on the owner's clock unless it was
    sent today, or none was ever sent and that time has passed (a new daemon waits for
    tomorrow's), else tomorrow's."""
    if not at:
        return None
    hour, minute = (int(x) for x in at.split(":"))
    local = moment.astimezone(zone)
    due = datetime.combine(local.date(), time(hour, minute), zone)
    if sent_on == local.date().isoformat() or (sent_on is None and due <= moment):
        due = datetime.combine(local.date() + timedelta(days=1), time(hour, minute), zone)
    return due


class Routine:
    """Automatic backups and the digest; see the module docstring."""

    def __init__(
        self,
        config: Config,
        praetorium: Praetorium,
        zone: tzinfo,
        clock: Clock | None = None,
        *,
        first_delay_s: float = 60.0,  # the first backup ever: not in the start-up's rush
    ) -> None:
        self.config = config
        self.praetorium = praetorium
        self.zone = zone
        self.clock = clock or now
        self.followers: list[Follower] = []
        self._task: asyncio.Task[None] | None = None
        self._tried: datetime | None = None  # the last backup begun (if last.json is unwritable)
        self.first_delay = timedelta(seconds=first_delay_s)
        self._cancel = threading.Event()  # a backup under way stops when Legio does
        self._warned = False  # the shared backup folder, said once
        root = config.castra
        self.last_path = last_backup_path(root)
        self.digest_path = state_dir(root) / "digest.json"

    def follow(self, follower: Follower) -> None:
        """Have ``follower`` told of every event (a failed backup, the digest)."""
        self.followers.append(follower)

    async def _tell(self, event: Event) -> None:
        for follower in list(self.followers):
            try:
                await follower(event)
            except Exception:
                logger.exception("a front-end could not show %s", type(event).__name__)

    def start(self) -> None:
        if self._task is None and (self.config.backup.every != "off" or self.config.digest.at):
            self._task = asyncio.create_task(self._run(), name="legio-routine")

    async def stop(self) -> None:
        """Stop the timetable; a backup being written stops too (its .part removed)."""
        self._cancel.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # ---------------------------------------------------------- the two jobs

    async def backup_now(self) -> BackupResult | None:
        """One backup, pruned to ``keep``, its result in ``last.json``; a failure told."""
        folder = backup_dir(self.config)
        self._tried = self.clock()
        try:
            result = await asyncio.to_thread(make_backup, self.config, folder, cancel=self._cancel)
        except (BackupError, OSError) as e:
            if self._cancel.is_set():  # Legio is stopping: not a failure to report
                logger.info("backup stopped with Legio: %s", e)
                return None
            logger.error("backup failed: %s", e)
            self._record(None, str(e))
            await self._tell(BackupFailed(str(e), str(folder)))
            return None
        if result.warning and not self._warned:
            self._warned = True  # once per daemon: Caesar chose a shared folder
            logger.warning("%s", result.warning)
        logger.info("backup written: %s (%.1f s)", result.archive, result.seconds)
        pruned = await asyncio.to_thread(prune, folder, self.config.backup.keep, result.archive)
        if pruned.error:
            logger.error("backups: %s", pruned.error)
        if pruned.foreign:
            logger.warning(
                "backups: left alone in %s, named like archives but not Legio's: %s",
                folder,
                ", ".join(p.name for p in pruned.foreign),
            )
        self._record(result.archive, None, pruned.error)
        return result

    def _record(
        self, archive: Path | None, error: str | None, prune_error: str | None = None
    ) -> None:
        record_last(self.config.castra, self.clock(), archive, error, prune_error)

    async def digest_now(self, end: datetime | None = None) -> Digest:
        """The digest of the 24 hours before ``end`` (now), told to the front-ends."""
        end = end or self.clock()
        digest = await compute_digest(
            self.praetorium.connection,
            end - timedelta(days=1),
            end,
            read_json(self.last_path),
        )
        with contextlib.suppress(OSError):
            write_json(self.digest_path, {"sent_on": end.astimezone(self.zone).date().isoformat()})
        await self._tell(DigestReady(digest))
        return digest

    # ---------------------------------------------------------- the timetable

    def due(self) -> tuple[datetime | None, datetime | None]:
        moment = self.clock()
        every, last = self.config.backup.every, read_json(self.last_path)
        if last is None:  # none yet: the first one a moment after start
            begun = self._tried or (moment + self.first_delay - EVERY.get(every, timedelta()))
            self._tried = begun
            last = {"finished": begun.isoformat()}
        backup = next_backup(every, last, moment)
        sent = (read_json(self.digest_path) or {}).get("sent_on")
        digest = next_digest(self.config.digest.at, self.zone, sent, moment)
        return backup, digest

    async def _run(self) -> None:
        while True:
            backup, digest = self.due()
            moment = self.clock()
            if backup is not None and backup <= moment:
                try:
                    await self.backup_now()
                except Exception:  # a bug: logged, and the timetable goes on
                    logger.exception("the automatic backup failed unexpectedly")
                    await asyncio.sleep(NAP_S)
                continue
            if digest is not None and digest <= moment:
                try:
                    await self.digest_now()
                except Exception:
                    logger.exception("the digest could not be made")
                    await asyncio.sleep(NAP_S)
                continue
            waits = [(t - moment).total_seconds() for t in (backup, digest) if t is not None]
            await asyncio.sleep(min([NAP_S, *waits]))
