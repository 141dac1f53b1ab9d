"""When scheduled work runs: cron expressions, one-shot times and time zones.

Pure functions, no I/O but the system's zone database. Times are kept in UTC
(aware datetimes); the owner's wall clock is a ``zoneinfo`` zone, so a cron job at
08:00 runs at 08:00 local time on both sides of a DST change.

Cron expressions are parsed and evaluated by ``cronsim`` (healthchecks.io's), which
follows Debian cron: five fields, names (MON, JAN), ``L``, ``#``; during the spring
change a job in the skipped hour runs right after the jump, and during the autumn
change a job in the repeated hour runs once.
"""

from __future__ import annotations

import contextlib
import os
import re
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from legio.errors import LegioError

ZONEINFO_ROOT = "/usr/share/zoneinfo/"
DURATION = re.compile(r"(\d+)\s*([dhm])", re.IGNORECASE)
DURATION_WHOLE = re.compile(r"\s*(?:\d+\s*[dhm]\s*)+", re.IGNORECASE)
MAX_AHEAD = timedelta(days=366 * 5)


class ScheduleError(LegioError):
    """A schedule that cannot be used, explained for the person (or model) who wrote it."""


def zone_name_error(name: str) -> str | None:
    """Why ``name`` is not a usable IANA time zone name, or None if it is."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {name!r}; use an IANA name such as Europe/Rome or UTC"
    return None


def local_zone_name() -> str:
    """The machine's time zone as an IANA name ($TZ, /etc/localtime, /etc/timezone; else UTC)."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    localtime = Path("/etc/localtime")
    if localtime.is_symlink():
        target = str(localtime.resolve())
        if ZONEINFO_ROOT in target:
            candidates.append(target.split(ZONEINFO_ROOT, 1)[1])
    with contextlib.suppress(OSError):
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    for name in candidates:
        if name and zone_name_error(name) is None:
            return name
    return "UTC"


def zone(name: str) -> ZoneInfo:
    """The zone called ``name`` ("" = the machine's); ``ScheduleError`` if unknown."""
    name = name or local_zone_name()
    problem = zone_name_error(name)
    if problem:
        raise ScheduleError(problem)
    return ZoneInfo(name)


def zone_key(tz: tzinfo) -> str:
    return getattr(tz, "key", None) or "UTC"


def to_utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


def check_cron(expression: str) -> str:
    """The expression, normalised (single spaces), or ``ScheduleError`` saying what is wrong."""
    fields = expression.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"invalid cron expression {expression!r}: it needs five fields "
            "(minute hour day-of-month month day-of-week), e.g. '0 8 * * MON-FRI'"
        )
    normalised = " ".join(fields)
    try:
        next(CronSim(normalised, datetime(2000, 1, 1, tzinfo=UTC)))
    except CronSimError as e:
        raise ScheduleError(f"invalid cron expression {normalised!r}: {e}") from e
    except StopIteration:
        raise ScheduleError(f"the cron expression {normalised!r} never matches a date") from None
    return normalised


def next_cron(expression: str, tz: tzinfo, after: datetime) -> datetime | None:
    """The first time strictly after ``after`` that ``expression`` matches in ``tz`` (UTC)."""
    try:
        return to_utc(next(CronSim(expression, after.astimezone(tz))))
    except StopIteration:
        return None


def next_crons(expression: str, tz: tzinfo, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` times (UTC) ``expression`` matches in ``tz`` after ``after``."""
    found: list[datetime] = []
    it = CronSim(expression, after.astimezone(tz))
    for moment in it:
        found.append(to_utc(moment))
        if len(found) == count:
            break
    return found


def parse_in(text: str) -> timedelta:
    """A delay like ``90m``, ``2h``, ``1d 3h``, ``2h30m``; ``ScheduleError`` otherwise."""
    if not DURATION_WHOLE.fullmatch(text):
        raise ScheduleError(
            f"cannot read the delay {text!r}: write it like 90m, 2h, 2h30m or 1d (d, h, m)"
        )
    units = {"d": "days", "h": "hours", "m": "minutes"}
    total = timedelta()
    for amount, unit in DURATION.findall(text):
        total += timedelta(**{units[unit.lower()]: int(amount)})
    if total <= timedelta():
        raise ScheduleError("the delay must be more than zero")
    return total


def parse_at(text: str, tz: tzinfo) -> datetime:
    """An ISO 8601 date and time (in ``tz`` unless it carries an offset), in UTC.

    A wall-clock time the spring change skips (02:30 in Rome on the last Sunday of
    March) is read with the offset before the change, so it lands just after the jump.
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ScheduleError(
            f"cannot read the time {text!r}: write it as ISO 8601 local time, e.g. 2026-11-23T18:00"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return to_utc(moment)


def check_future(moment: datetime, now: datetime, tz: tzinfo) -> datetime:
    """``moment`` if it is in the future (and within five years), else ``ScheduleError``."""
    if moment <= now:
        raise ScheduleError(
            f"{format_local(moment, tz)} is in the past (it is now {format_local(now, tz)}); "
            "give a future time"
        )
    if moment - now > MAX_AHEAD:
        raise ScheduleError(f"{format_local(moment, tz)} is more than five years away")
    return moment


def format_local(moment: datetime, tz: tzinfo) -> str:
    """A UTC time on the owner's wall clock: ``Mon 2026-11-23 18:00 CET``."""
    local = moment.astimezone(tz)
    return f"{local:%a %Y-%m-%d %H:%M} {local.tzname()}"
