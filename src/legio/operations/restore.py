"""``legio restore ARCHIVE DIR``: a castra rebuilt from a backup, checked before it is used.

``DIR`` must be empty (or not exist): a restore never mixes with, or overwrites, a castra.
Every member of the archive is checked before a byte of it is written: only
``manifest.json``, ``legio.toml`` and files or folders under ``castra/``; no absolute path,
no ``..``, no link of any kind, no device. Files are created with ``O_EXCL`` and
``O_NOFOLLOW`` in folders the restore made itself. Then the praetorium is verified:
``PRAGMA integrity_check`` must say ``ok`` and its schema must be one this Legio knows
(an older one is upgraded by ``legio run``, as any praetorium is). A restore that fails
removes what it wrote.

``DIR/legio.toml`` names ``castra = "castra"``: ``legio run -c DIR/legio.toml`` starts
from it (export the Telegram token again: secrets are never in a backup).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from legio.operations.backup import BackupError
from legio.store.migrations import MIGRATIONS

TOP_FILES = ("manifest.json", "legio.toml")
CHUNK = 1 << 20


@dataclass(frozen=True)
class RestoreReport:
    """What a restore rebuilt: where, how many files, the praetorium's state."""

    castra: Path
    config: Path
    files: int
    nuntii: int
    schema_version: int


def member_problem(member: tarfile.TarInfo) -> str | None:
    """Why ``member`` may not be restored, or None."""
    name = member.name
    parts = PurePosixPath(name).parts
    if not name or name.startswith("/") or "\\" in name or "\0" in name:
        return f"{name!r}: not a relative path"
    if ".." in parts or any(p in ("", ".") for p in parts[1:]):
        return f"{name!r}: a path that leaves the castra"
    if not (member.isfile() or member.isdir()):
        return f"{name!r}: a link or special file (a backup holds regular files only)"
    if member.isdir() and parts[0] != "castra":
        return f"{name!r}: unexpected folder"
    if member.isfile() and name not in TOP_FILES and parts[0] != "castra":
        return f"{name!r}: not part of a Legio backup"
    return None


def check_archive(archive: Path) -> list[tarfile.TarInfo]:
    """Every member of ``archive``, checked; ``BackupError`` naming the first bad one."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
    except (OSError, tarfile.TarError, EOFError) as e:
        raise BackupError(f"{archive} is not a readable backup archive: {e}") from e
    for member in members:
        problem = member_problem(member)
        if problem:
            raise BackupError(f"{archive} refused: {problem}; nothing was restored")
    names = {m.name for m in members}
    if "castra/praetorium.db" not in names or "legio.toml" not in names:
        raise BackupError(f"{archive} is not a Legio backup (no praetorium or legio.toml)")
    return members


def _empty_target(target: Path) -> bool:
    """Whether ``target`` was made here (True) or existed empty (False); refuses others."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise BackupError(f"{target} is not a folder; restore into a new, empty folder")
    if target.exists():
        if any(target.iterdir()):
            raise BackupError(
                f"{target} is not empty; restore into a new, empty folder (a restore "
                "never overwrites a castra)"
            )
        return False
    target.mkdir(parents=True)
    return True


def verify_praetorium(path: Path) -> tuple[int, int]:
    """``PRAGMA integrity_check`` and the schema version; (schema version, nuntii)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise BackupError(f"the restored praetorium cannot be opened: {e}") from e
    try:
        verdict = [row[0] for row in db.execute("PRAGMA integrity_check")]
        if verdict != ["ok"]:
            raise BackupError(f"the restored praetorium is damaged: {'; '.join(verdict[:5])}")
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        nuntii = int(db.execute("SELECT count(*) FROM nuntii").fetchone()[0])
    except sqlite3.Error as e:
        raise BackupError(f"the restored praetorium cannot be read: {e}") from e
    finally:
        db.close()
    if version > len(MIGRATIONS):
        raise BackupError(
            f"the backup was made by a newer Legio (schema {version}, this one knows "
            f"{len(MIGRATIONS)}): upgrade Legio, then restore"
        )
    return version, nuntii


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    path = target.joinpath(*PurePosixPath(member.name).parts)
    if member.isdir():
        path.mkdir(parents=True, exist_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    assert source is not None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(source, out, CHUNK)
        out.flush()
        os.fsync(out.fileno())


def restore(archive: Path, target: Path) -> RestoreReport:
    """Rebuild a castra and its ``legio.toml`` in ``target`` from ``archive``."""
    members = check_archive(archive)
    made = _empty_target(target)
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in members:
                _extract(tar, member, target)
        (target / "manifest.json").unlink(missing_ok=True)
        version, nuntii = verify_praetorium(target / "castra" / "praetorium.db")
    except BaseException as e:
        _undo(target, made)
        if isinstance(e, OSError):
            raise BackupError(f"the restore into {target} failed: {e}") from e
        raise
    files = sum(1 for m in members if m.isfile() and m.name != "manifest.json")
    return RestoreReport(target / "castra", target / "legio.toml", files, nuntii, version)


def _undo(target: Path, made: bool) -> None:
    """Remove what a failed restore wrote (``target`` was empty or new)."""
    if made:
        shutil.rmtree(target, ignore_errors=True)
        return
    for child in target.iterdir():
        with contextlib.suppress(OSError):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
