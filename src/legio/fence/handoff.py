"""The tokens handed to a new image of the daemon (``/restart``, the start without secrets),
taken before anything else runs.

``legio.fence.launch`` starts the daemon again with ``execve`` and hands the bot and forge
tokens over through an inherited pipe (``LEGIO_TOKEN_FD``). ``execve`` of a readable
binary makes the process dumpable again (its memory and ``/proc`` files open to other
processes of the same user), and until the pipe is read the tokens wait in it. So
``python -m legio`` calls ``receive`` first, before importing anything heavy: the process
is made non-dumpable, then the pipe is read to its end and closed, and the variable
leaves ``os.environ``. This module imports the standard library only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

TOKEN_FD_ENV = "LEGIO_TOKEN_FD"
PR_SET_DUMPABLE = 4

_received: tuple[str, str] | None = None  # (bot token, forge token), until taken
_failed = ""  # why the pipe could not be read ("" if it was, or there was none)
_given = False  # this process was started with a pipe


def non_dumpable() -> bool:
    """Make this process non-dumpable (Linux); False where the platform cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def receive() -> None:
    """If this process was given a pipe: make it non-dumpable, read the tokens to the
    pipe's end, close it, and hold them for ``take``. Never raises: a pipe that cannot be
    read is remembered, and ``failure`` says why."""
    global _received, _failed, _given
    fd_text = os.environ.pop(TOKEN_FD_ENV, None)
    if fd_text is None:
        return
    _given = True
    non_dumpable()  # before the tokens are in this process's memory
    chunks = []
    try:
        fd = int(fd_text)
        try:
            while chunk := os.read(fd, 4096):
                chunks.append(chunk)
        finally:
            os.close(fd)
    except (ValueError, OSError) as e:
        _failed = f"{TOKEN_FD_ENV}={fd_text}: {e}"
        return
    bot, _, forge = b"".join(chunks).decode(errors="replace").partition("\n")
    _received = (bot, forge)


def take() -> tuple[str, str] | None:
    """The (bot, forge) tokens ``receive`` read, once; None if there were none."""
    global _received
    taken, _received = _received, None
    return taken


def failure() -> str:
    """Why a handed-over pipe could not be read ("" if it could, or there was none)."""
    return _failed


def given() -> bool:
    """Whether this process was started with tokens handed over (a restart of itself)."""
    return _given
