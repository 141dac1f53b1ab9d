"""``legio restore ARCHIVE DIR``: a castra rebuilt from a backup, checked before it is used;
data comes back, control does not.

``DIR`` must be empty (or not exist): a restore never mixes with, or overwrites, a castra.
Every member of the archive is checked before a byte of it is written: only
``manifest.json``, ``legio.toml`` and files or folders under ``castra/``; no absolute path,
no ``..``, no link of any kind, no device. Of ``castra/``, only what ``legio backup``
writes is restored (``legio.operations.restoreguard``): nothing under ``castra/state/``
(Legio's login sync, sockets), no WAL, no workspace; the rest is named as left out. Files
are created with ``O_EXCL`` and ``O_NOFOLLOW`` in folders the restore made itself. Then
the praetorium is verified: its schema must be exactly what a fresh migration to its
version writes (a trigger, view or table Legio never made refuses the restore, named),
``PRAGMA integrity_check`` must say ``ok``, and its version must be one this Legio knows
(an older one is upgraded by ``legio run``, as any praetorium is). The archive's files
must fit on the target with room to spare (their unpacked sizes, summed, before a byte is
written), and the praetorium is written and verified before any other file. Its scheduled
jobs come back disabled and its "Always" grants revoked, each named
(``restoreguard.disarm``). A restore that fails removes what it wrote.

The archive's ``legio.toml`` is never put in place: it is written as
``DIR/legio.toml.restored`` and its differences from the running configuration, in the
keys that matter, are said. ``DIR/legio.toml`` is the running configuration with
``castra = "castra"`` (``legio run -c DIR/legio.toml`` starts from it; export the
Telegram token again: secrets are never in a backup); without a running configuration
there is none, and Caesar writes it.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import shutil
import sqlite3
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from legio.config import Config, config_to_toml
from legio.operations.backup import BackupError
from legio.operations.backupfolder import create_private, folder_problem
from legio.operations.restoreguard import (
    config_differences,
    disarm,
    prompt_differences,
    restorable,
    schema_problems,
    standing_grants,
)
from legio.store.migrations import MIGRATIONS

TOP_FILES = ("manifest.json", "legio.toml")
SET_ASIDE = "legio.toml.restored"
PRAETORIUM = "castra/praetorium.db"
CHUNK = 1 << 20
MARGIN = 256 << 20  # free space a restore leaves on the target's file system


@dataclass(frozen=True)
class RestoreReport:
    """What a restore rebuilt: where, how many files, the praetorium's state."""

    castra: Path
    config: Path | None  # the running configuration, pointed at the castra (None: none)
    restored_config: Path  # the archive's legio.toml, set aside, never used
    files: int
    nuntii: int
    schema_version: int
    left_out: tuple[str, ...] = ()  # files in the archive a backup never holds
    differences: tuple[str, ...] = ()  # the archive's legio.toml against the running one
    grants: tuple[str, ...] = ()  # "agent: rule" of each Always grant, revoked on restore
    prompts: tuple[str, ...] = ()  # restored prompts unlike the running castra's
    jobs: tuple[str, ...] = ()  # each scheduled job restored, kept disabled


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


def free_bytes(folder: Path) -> int:
    """Bytes free to an unprivileged writer on the file system holding ``folder`` (or its
    nearest existing parent)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def check_room(archive: Path, members: list[tarfile.TarInfo], target: Path) -> None:
    """Refuse, before a byte is written, an archive whose files (their real sizes: a
    sparse member counts what it unpacks to) would not fit on ``target``'s file system
    with ``MARGIN`` to spare: a small archive can unpack to gigabytes."""
    total = sum(m.size for m in members if m.isfile())
    free = free_bytes(target)
    if total + MARGIN > free:
        raise BackupError(
            f"{archive} unpacks to {total / 2**20:,.0f} MiB, more than the "
            f"{max(free - MARGIN, 0) / 2**20:,.0f} MiB free at {target} (keeping "
            f"{MARGIN >> 20} MiB spare); free space there or restore elsewhere; nothing "
            "was restored"
        )


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
        made = False
    else:
        target.mkdir(parents=True, mode=0o700)
        made = True
    problem = folder_problem(target)
    if problem:
        if made:
            target.rmdir()
        raise BackupError(
            f"{problem}: another user could swap what the restore writes there; restore "
            "into a new folder only you can write (it is made 0700)"
        )
    return made


def verify_praetorium(path: Path) -> tuple[int, int, list[str]]:
    """The schema against a fresh migration, ``PRAGMA integrity_check``, the version;
    (schema version, nuntii, the standing "Always" grants)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise BackupError(f"the restored praetorium cannot be opened: {e}") from e
    try:
        db.execute("PRAGMA trusted_schema = OFF")
        db.execute("PRAGMA query_only = ON")
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > len(MIGRATIONS):
            raise BackupError(
                f"the backup was made by a newer Legio (schema {version}, this one knows "
                f"{len(MIGRATIONS)}): upgrade Legio, then restore"
            )
        problems = schema_problems(db, version)
        if problems:
            raise BackupError(
                "the archive's praetorium is not as Legio writes it (a backup holds data, "
                f"never code): {'; '.join(problems[:5])}; nothing was restored"
            )
        verdict = [row[0] for row in db.execute("PRAGMA integrity_check")]
        if verdict != ["ok"]:
            raise BackupError(f"the restored praetorium is damaged: {'; '.join(verdict[:5])}")
        nuntii = int(db.execute("SELECT count(*) FROM nuntii").fetchone()[0])
        grants = standing_grants(db)
    except sqlite3.Error as e:
        raise BackupError(f"the restored praetorium cannot be read: {e}") from e
    finally:
        db.close()
    return version, nuntii, grants


def _write_new(path: Path, source: IO[bytes], size: int | None = None) -> None:
    """``source`` into a new private file at ``path``; never more than ``size`` bytes (a
    member's declared size) when given."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with os.fdopen(create_private(path), "wb") as out:
        if size is None:
            shutil.copyfileobj(source, out, CHUNK)
        else:
            left = size
            while chunk := source.read(min(CHUNK, left + 1)):
                if len(chunk) > left:
                    raise BackupError(f"{path.name}: more bytes than the archive declares")
                out.write(chunk)
                left -= len(chunk)
        out.flush()
        os.fsync(out.fileno())


def restore(archive: Path, target: Path, running: Config | None = None) -> RestoreReport:
    """Rebuild a castra in ``target`` from ``archive``; its ``legio.toml`` set aside, and
    ``running`` (the configuration in use, if any) pointed at the castra."""
    members = check_archive(archive)
    files = [m for m in members if m.isfile() and m.name not in TOP_FILES]
    kept = [m for m in files if restorable(m.name)]
    left_out = tuple(m.name for m in files if not restorable(m.name))
    check_room(archive, members, target)
    made = _empty_target(target)
    aside = target / SET_ASIDE
    config_path: Path | None = None
    praetorium = target / "castra" / "praetorium.db"
    # the praetorium first, verified before the rest is written
    kept.sort(key=lambda m: m.name != PRAETORIUM)
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in kept:
                source = tar.extractfile(member)
                assert source is not None
                path = target.joinpath(*PurePosixPath(member.name).parts)
                _write_new(path, source, member.size)
                if member.name == PRAETORIUM:
                    version, nuntii, _ = verify_praetorium(praetorium)
            toml = next(m for m in members if m.name == "legio.toml")
            text = tar.extractfile(toml)
            assert text is not None
            raw = text.read()
        _write_new(aside, io.BytesIO(raw))
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        jobs, grants = disarm(praetorium, now)
        if running is not None:
            config_path = target / "legio.toml"
            _write_new(config_path, io.BytesIO(config_to_toml(running, "castra").encode()))
    except BaseException as e:
        _undo(target, made)
        if isinstance(e, OSError):
            raise BackupError(f"the restore into {target} failed: {e}") from e
        raise
    differences = config_differences(raw.decode("utf-8", "replace"), running)
    prompts = prompt_differences([m.name for m in kept], target, running.castra) if running else []
    return RestoreReport(
        target / "castra",
        config_path,
        aside,
        len(kept) + 1,
        nuntii,
        version,
        left_out,
        tuple(differences),
        tuple(grants),
        tuple(prompts),
        jobs=tuple(jobs),
    )


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
