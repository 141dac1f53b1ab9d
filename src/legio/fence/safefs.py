"""Reading and writing in folders an agent can change, never through the agent's links.

An agent's shell can turn any entry of its workspace into a symlink (``inbox`` →
``castra/edicta``) or a hard link, between Legio's check of a path and Legio's use of
it. So Legio never uses such a path by name: it walks it from a root it trusts, one
component at a time, each opened relative to the folder before (``openat``) with
``O_NOFOLLOW``, and then works through the descriptor it holds:

- ``open_dir``: a folder under a root; a link (or a file) where a folder should be is
  removed (the link itself, never what it points at) and a real folder made, when asked
  to create;
- ``write_copy``: a file written into such a folder under a temporary name and renamed
  over the final name (a link of that name is replaced, never written through);
- ``open_file``: a regular file under a root, opened once, without following a link
  at any component, for a check and a copy from the same descriptor.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 20


class UnsafePath(OSError):
    """A path Legio will not use: a link, or not what it should be."""


def _component(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UnsafePath(errno.EINVAL, f"{name!r} is not a plain file name")
    return name


def open_dir(root: Path, parts: Sequence[str], *, create: bool = False, mode: int = 0o755) -> int:
    """A descriptor of the folder ``root/parts…``, reached without following a link.

    ``root`` is Legio's own path (its links are followed: the owner made them). With
    ``create``, a missing folder is made and a link or file in a folder's place is
    removed first (logged); without it, a link or file there raises ``UnsafePath``."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            name = _component(part)
            try:
                inner = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, mode, dir_fd=fd)
                inner = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR) or not create:
                    raise UnsafePath(e.errno, f"{name} in {root} is not a folder") from e
                logger.warning("%s/%s was a link or a file, not a folder: replaced", root, name)
                os.unlink(name, dir_fd=fd)  # the link itself
                os.mkdir(name, mode, dir_fd=fd)
                inner = os.open(name, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def entry_size(dir_fd: int, name: str) -> int | None:
    """The size of the regular file ``name`` in the folder ``dir_fd`` (a link: None)."""
    try:
        st = os.stat(_component(name), dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def write_copy(dir_fd: int, name: str, source: Path, mode: int = 0o644) -> None:
    """Copy Legio's own file ``source`` to ``name`` in the folder ``dir_fd``, atomically:
    written under a fresh name (``O_EXCL``, no link followed), renamed over ``name``."""
    final = _component(name)
    temp = f".legio-{secrets.token_hex(6)}.part"
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    try:
        with open(source, "rb") as src, os.fdopen(out, "wb", closefd=False) as dst:
            while chunk := src.read(CHUNK):
                dst.write(chunk)
            dst.flush()
            os.fsync(out)
        os.replace(temp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    finally:
        os.close(out)


def open_file(root: Path, relative: Path) -> int:
    """A read descriptor of the regular file ``root/relative``, opened without following a
    link at any component below ``root`` (a FIFO does not block: it is refused)."""
    parts = relative.parts
    if not parts or relative.is_absolute():
        raise UnsafePath(errno.EINVAL, f"{relative} is not a file below {root}")
    dir_fd = open_dir(root, parts[:-1])
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(_component(parts[-1]), flags, dir_fd=dir_fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafePath(e.errno, f"{relative} is a link") from e
            raise
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(errno.EINVAL, f"{relative} is not a regular file")
    return fd


def fd_path(fd: int) -> Path | None:
    """Where the open file ``fd`` is now, as the kernel says (None where it cannot)."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None
