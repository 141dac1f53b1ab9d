"""The backup folder as another local user could see it: who may write it, how a file is
made in it, and which of the files in it are Legio's archives.

- ``folder_problem``: why other users could steer a backup written into a folder, or
  None. The folder must belong to the user running Legio and be writable by nobody else
  (a sticky bit does not help: others could still plant files by name in it); every
  folder above it (as spelled and as resolved) must belong to that user or root and be
  either closed to others or sticky (else the folder could be renamed away and replaced).
  ``make_backup`` refuses such a folder unless ``[backup] allow_shared_folder`` says so.
- ``create_private``: a new file, ``O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC``, mode 0600
  whatever the umask: never an existing file, never through a link.
- ``archives``: Legio's archives in a folder, recognised by what they are, never by their
  name alone: a regular file (not a link) of Legio's user, not empty, whose first member
  is a ``manifest.json`` of Legio's format; oldest first by the manifest's ``created``.
  Anything else named like an archive is ``foreign``: left alone and reported.
- ``prune``: remove all but the newest ``keep`` of those, never the one just written;
  a file that cannot be removed is reported in ``Pruned.error`` (``last.json``'s
  ``prune_error``), never raised past the backup that was written.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

PREFIX = "legio-backup-"
SUFFIX = ".tar.gz"
MANIFEST = "manifest.json"
MANIFEST_MAX = 64 * 1024
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _chain(path: Path) -> list[Path]:
    """Every folder above ``path``, as spelled (absolute) and as resolved."""
    spelled = Path(os.path.abspath(path))
    resolved = spelled.resolve()
    return [*spelled.parents, *resolved.parents]


def link_problem(folder: Path) -> str | None:
    """Why ``folder``'s path, as written, could lead somewhere else than its writer
    meant, or None: a link on it (the folder itself or any folder above, each ``lstat``-ed)
    owned by anyone but Legio's user or root, or in a folder others can write (sticky or
    not: another user may have planted it before the folder was made). Followed, such a
    link would take the archives, and pruning, into another user's folder."""
    me = os.geteuid()
    target = Path(os.path.abspath(folder))
    for here in [*reversed(target.parents), target]:
        try:
            st = os.lstat(here)
        except OSError:
            return None  # not made yet: nothing below it is a link
        if not stat.S_ISLNK(st.st_mode):
            continue
        if st.st_uid not in (me, 0):
            return f"{here}, on the way to {target}, is a link owned by {_owner(st.st_uid)}"
        above = os.lstat(here.parent)
        if above.st_mode & OTHERS_WRITE:
            return (
                f"{here}, on the way to {target}, is a link in {here.parent}, which others "
                f"can write (mode {above.st_mode & 0o7777:04o}): another user may have planted it"
            )
    return None


def folder_problem(folder: Path) -> str | None:
    """Why another user could plant, swap or read files in ``folder``, or None (see the
    module docstring). A folder not made yet is judged by the folders above it."""
    linked = link_problem(folder)
    if linked:
        return linked
    me = os.geteuid()
    target = Path(os.path.abspath(folder))
    if target.exists():
        st = os.stat(target)
        if st.st_uid != me:
            return f"{target} belongs to {_owner(st.st_uid)}, not to {_owner(me)} who runs Legio"
        if st.st_mode & OTHERS_WRITE:
            mode = st.st_mode & 0o7777
            return f"{target} can be written by its group or by anyone (mode {mode:04o})"
    seen: set[tuple[int, int]] = set()
    for above in _chain(target):
        try:
            st = os.stat(above)
        except OSError:
            continue  # not made yet: the folders above it are judged
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        if st.st_uid not in (me, 0):
            return (
                f"{above}, above {target}, belongs to {_owner(st.st_uid)}: its owner could "
                "swap the folder"
            )
        if st.st_mode & OTHERS_WRITE and not st.st_mode & stat.S_ISVTX:
            return (
                f"{above}, above {target}, can be written by its group or by anyone and is "
                f"not sticky (mode {st.st_mode & 0o7777:04o}): the folder could be swapped"
            )
    return None


def create_private(path: Path) -> int:
    """A new file at ``path`` opened for writing, mode 0600; ``FileExistsError`` if the
    name is taken (a file, or a link planted there: never followed)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
    except OSError:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True)
class Archive:
    """One of Legio's archives: where, and when its manifest says it was made."""

    path: Path
    created: str


def read_manifest(path: Path) -> dict[str, object] | None:
    """The manifest of a Legio archive at ``path``, or None if it is not one of Legio's
    (not a regular file of Legio's user, empty, a link, or no manifest first)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size == 0:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        same = os.fstat(fd)
        if (same.st_dev, same.st_ino) != (st.st_dev, st.st_ino):
            return None
        try:
            with tarfile.open(fileobj=handle, mode="r:gz") as tar:
                first = tar.next()
                if first is None or first.name != MANIFEST or not first.isfile():
                    return None
                if first.size > MANIFEST_MAX:
                    return None
                member = tar.extractfile(first)
                data = json.loads(member.read()) if member is not None else None
        except (OSError, tarfile.TarError, EOFError, ValueError):
            return None
    if not isinstance(data, dict) or data.get("format") != 1 or "created" not in data:
        return None
    return data


def _named_like(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir() if p.name.startswith(PREFIX) and p.name.endswith(SUFFIX)
    )


def scan(folder: Path) -> tuple[list[Archive], list[Path]]:
    """Legio's archives in ``folder`` (oldest first) and the other files named like one."""
    found: list[Archive] = []
    foreign: list[Path] = []
    inodes: set[tuple[int, int]] = set()
    for path in _named_like(folder):
        manifest = read_manifest(path)
        st = os.lstat(path) if manifest is not None else None
        if manifest is None or st is None or (st.st_dev, st.st_ino) in inodes:
            foreign.append(path)  # a second name of one archive counts once
            continue
        inodes.add((st.st_dev, st.st_ino))
        found.append(Archive(path, str(manifest["created"])))
    found.sort(key=lambda a: (a.created, a.path.name))
    return found, foreign


def archives(folder: Path) -> list[Path]:
    """Legio's archives in ``folder``, oldest first (see the module docstring)."""
    return [a.path for a in scan(folder)[0]]


@dataclass(frozen=True)
class Pruned:
    """What a prune removed, the files named like archives it left alone, and why a
    removal failed (None: none did)."""

    removed: list[Path]
    foreign: list[Path]
    error: str | None = None


def prune(folder: Path, keep: int, written: Path | None = None) -> Pruned:
    """Remove all but the newest ``keep`` of Legio's archives in ``folder``; ``written``
    (the archive just made) is always one of those kept."""
    linked = link_problem(folder)
    if linked:
        return Pruned([], [], f"{linked}: nothing was pruned")
    found, foreign = scan(folder)
    others = [a.path for a in found if written is None or a.path != written]
    room = keep - (1 if written is not None else 0)
    old = others[: max(len(others) - room, 0)] if keep > 0 else []
    try:  # the folder itself, never a link to another: names removed relative to it
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        return Pruned([], foreign, f"could not open {folder}: {e.strerror or e}")
    try:
        return _remove(dir_fd, old, foreign)
    finally:
        os.close(dir_fd)


def _remove(dir_fd: int, old: list[Path], foreign: list[Path]) -> Pruned:
    removed: list[Path] = []
    errors: list[str] = []
    for path in old:
        try:
            os.unlink(path.name, dir_fd=dir_fd)
        except FileNotFoundError:
            continue
        except OSError as e:
            errors.append(f"could not remove {path}: {e.strerror or e}")
            continue
        removed.append(path)
    return Pruned(removed, foreign, "; ".join(errors) or None)


def clean_leftovers(folder: Path, names: tuple[str, ...], ends: tuple[str, ...]) -> None:
    """Remove what a killed backup left: Legio's user's own regular files (or staging
    folders) whose names start with ``names`` and end with ``ends``; nothing else, and
    a failure is no reason to stop the next backup."""
    me = os.geteuid()
    for path in folder.iterdir():
        if not (path.name.startswith(names) and path.name.endswith(ends)):
            continue
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if st.st_uid != me:
                continue
            if stat.S_ISREG(st.st_mode):
                os.unlink(path)
            elif stat.S_ISDIR(st.st_mode):
                for child in path.iterdir():
                    child.unlink()
                path.rmdir()
