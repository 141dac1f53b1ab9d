"""Legio's log file, ``castra/state/legio.log``: rotated by size, and read back by ``legio status``.

``legio run`` and ``legio console`` write their log records there (``legio run`` to its
stderr too, for the journal). The file is rotated when it passes ``[log] max_mb``,
keeping ``[log] keep`` older files (``legio.log.1`` the newest of them), so it never grows
without end. ``tail`` gives the last lines, for ``legio status`` when the daemon is not
running.
"""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

from legio.config import Config

LOG_NAME = "legio.log"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_path(castra_root: Path) -> Path:
    return castra_root / "state" / LOG_NAME


def file_handler(config: Config) -> logging.Handler:
    """A handler writing to the castra's log file, rotated as ``[log]`` says."""
    path = log_path(config.castra)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(
        path,
        maxBytes=max(1, int(config.log.max_mb * 1024 * 1024)),
        backupCount=config.log.keep,
        encoding="utf-8",
    )
    handler.setFormatter(logging.Formatter(FORMAT, datefmt="%Y-%m-%d %H:%M:%S"))
    return handler


def tail(path: Path, count: int = 20, *, chunk: int = 64 * 1024) -> list[str]:
    """The last ``count`` lines of a text file ([] if there is none)."""
    try:
        with path.open("rb") as file:
            file.seek(0, 2)
            size = file.tell()
            file.seek(max(0, size - chunk))
            data = file.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > chunk:
        lines = lines[1:]  # the first may be cut
    return lines[-count:]


class LastError(logging.Handler):
    """Keeps the latest ERROR (or worse) record, for ``legio status``."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.record: logging.LogRecord | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.record = record

    def summary(self) -> dict[str, object] | None:
        record = self.record
        if record is None:
            return None
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        return {"time": record.created, "logger": record.name, "message": message[:500]}
