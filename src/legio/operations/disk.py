"""The castra's disk: a notice once it runs low, and no new file once it is nearly full.

``DiskGuard.check`` (called now and then) returns a notice for Caesar the first time the
free space of the castra's file system falls under ``[disk] warn_mb``, and nothing again
until it has risen back over it. ``DiskGuard.refusal(size)`` is asked before a file of
Caesar's is accepted: under ``[disk] refuse_mb`` (counting the file) it says why the file
is refused, so a download never fails half-written on a full disk. The free-space
function is injected (tests give one they control).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

MB = 1024 * 1024
FreeSpace = Callable[[Path], int]  # bytes free to this user on the path's file system


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


class DiskGuard:
    """Watches the free space under ``root``; see the module docstring."""

    def __init__(
        self, root: Path, warn_mb: float, refuse_mb: float, free: FreeSpace = free_bytes
    ) -> None:
        self.root = root
        self.warn_mb = warn_mb
        self.refuse_mb = refuse_mb
        self.free = free
        self.low = False  # under warn_mb since the last notice

    def free_mb(self) -> float | None:
        """The free space in MB, or None if it cannot be read."""
        try:
            return self.free(self.root) / MB
        except OSError as e:
            logger.warning("cannot read the free disk space of %s: %s", self.root, e)
            return None

    def refusal(self, size: int) -> str | None:
        """Why a file of ``size`` bytes cannot be taken now, or None."""
        free = self.free_mb()
        if free is None or free - size / MB >= self.refuse_mb:
            return None
        return (
            f"Not enough disk space to keep this file: {free:,.0f} MB free on Legio's disk, "
            f"and files are refused under {self.refuse_mb:,.0f} MB ([disk] refuse_mb). "
            "Free some space on the server, then send it again."
        )

    def check(self) -> str | None:
        """A notice the first time the free space falls under ``warn_mb``, else None."""
        free = self.free_mb()
        if free is None:
            return None
        if free >= self.warn_mb:
            self.low = False
            return None
        if self.low:
            return None
        self.low = True
        logger.warning("the castra's disk has %.0f MB free", free)
        return (
            f"⚠️ Legio's disk is running low: {free:,.0f} MB free (under {self.warn_mb:,.0f} "
            f"MB, [disk] warn_mb). Under {self.refuse_mb:,.0f} MB new files are refused. "
            "Free some space on the server."
        )
