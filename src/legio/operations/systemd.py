"""systemd's notify protocol, spoken directly (no dependency): ready, stopping, watchdog.

Under a unit with ``Type=notify`` systemd gives the daemon ``$NOTIFY_SOCKET``, a datagram
socket (a path, or ``@name`` in the abstract namespace), and with ``WatchdogSec=`` also
``$WATCHDOG_USEC`` (and ``$WATCHDOG_PID``). Each message is one datagram of
``KEY=value`` lines: ``READY=1`` once Legio listens, ``STOPPING=1`` when it begins to stop,
``STATUS=…`` a line ``systemctl status`` shows, ``WATCHDOG=1`` a sign of life. The pings
are sent by a task on the event loop itself (``keep_alive``), every half period: a loop
that stalls stops pinging, and systemd restarts the service. Without ``$NOTIFY_SOCKET``
every call does nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Mapping

logger = logging.getLogger(__name__)

NOTIFY_SOCKET = "NOTIFY_SOCKET"
WATCHDOG_USEC = "WATCHDOG_USEC"
WATCHDOG_PID = "WATCHDOG_PID"


def socket_address(value: str) -> str | bytes:
    """The address of ``$NOTIFY_SOCKET``: ``@name`` is the abstract namespace (a NUL first)."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    return value


def watchdog_period(env: Mapping[str, str], pid: int | None = None) -> float | None:
    """systemd's watchdog period in seconds, if it watches this process."""
    usec = env.get(WATCHDOG_USEC, "")
    owner = env.get(WATCHDOG_PID, "")
    if not usec.isdigit() or int(usec) <= 0:
        return None
    if owner and owner != str(os.getpid() if pid is None else pid):
        return None  # meant for another process (the one that started us)
    return int(usec) / 1_000_000


class Notifier:
    """Tells systemd how Legio is (see the module docstring); silent outside systemd."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.address = env.get(NOTIFY_SOCKET) or None
        self.period = watchdog_period(env) if self.address else None
        self._socket: socket.socket | None = None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *lines: str) -> bool:
        """Send one datagram of ``KEY=value`` lines; whether it went (failures are logged)."""
        if self.address is None:
            return False
        try:
            if self._socket is None:
                self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._socket.sendto("\n".join(lines).encode(), socket_address(self.address))
        except OSError as e:
            logger.warning("could not tell systemd %s: %s", lines[0], e)
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}")

    def stopping(self, status: str = "stopping") -> bool:
        return self.send("STOPPING=1", f"STATUS={status}")

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    async def keep_alive(self) -> None:
        """Ping the watchdog every half period, from the event loop, until cancelled."""
        if self.period is None:
            return
        while True:
            self.send("WATCHDOG=1")
            await asyncio.sleep(self.period / 2)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
