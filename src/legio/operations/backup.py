"""``legio backup``: one dated archive of a castra, consistent while the daemon runs.

What goes in (an allow-list: nothing else of the castra is read, so no login or key in
``castra/state/`` can slip in):

- ``castra/praetorium.db``: copied by SQLite's online backup API from its own
  connection. In WAL mode the copy is one read transaction: writers go on (a reader
  never blocks them in WAL), and the copy is the database as it was when it began, so
  nothing committed before the backup began is missing. (Copying in steps of N pages
  would release the snapshot between steps, and SQLite restarts a stepped backup each
  time another connection writes: under a steady flow of messages it never finishes.)
  Jobs, approvals, grants, usage and conversation facts are tables of it.
- the prompts (``legatus/prompt.md``, ``centuriones/<name>/prompt.md``), memoria
  (``edicta/``, ``acta/``, ``centuriones/<name>/commentarii/``), and with
  ``attachments`` the files in ``castra/attachments/``; regular files only, never a link.
- ``legio.toml`` with ``castra = "castra"`` and every token-like value removed (Legio
  reads tokens from the environment; a key or value that looks like one is dropped).
- ``manifest.json``: when, which Legio, the praetorium's schema version.

The archive (the whole conversation: mode 0600 whatever the umask, in a folder made
0700) is written to a new ``.<name>.<random>.part`` file (``O_EXCL|O_NOFOLLOW``: never an
existing file, never through a link planted there), flushed to disk (``fsync``), renamed
and its folder synced: a backup killed at any point leaves the earlier archives whole and
at worst a ``.part`` file, removed by the next backup. The praetorium's copy is staged in
a private folder of its own (in the backup folder, or in ``castra/state/`` when the backup
folder is shared). A folder other users can write is refused unless ``[backup]
allow_shared_folder`` (``legio.operations.backupfolder``, which also says which files are
Legio's archives when pruning).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import os
import re
import secrets
import shutil
import sqlite3
import stat
import tarfile
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import tomli_w

from legio import __version__
from legio.castra import PROMPT_FILE, Castra
from legio.config import Config
from legio.errors import LegioError
from legio.fence.cliconfig import state_dir
from legio.operations.backupfolder import (
    PREFIX,
    SUFFIX,
    clean_leftovers,
    create_private,
    link_problem,
)
from legio.operations.backupfolder import Pruned as Pruned
from legio.operations.backupfolder import archives as archives
from legio.operations.backupfolder import folder_problem as folder_problem
from legio.operations.backupfolder import prune as prune
from legio.timing import now

PART = ".part"
STAGE = ".stage"
PART_TRIES = 8
COMPRESS_LEVEL = 3  # gzip: most of level 9's size at a fraction of its time
ALL_PAGES = -1
SECRET_KEY = re.compile(r"token|secret|passw|api_?key|credential|private", re.IGNORECASE)
SECRET_VALUE = re.compile(
    r"\d{6,}:[A-Za-z0-9_-]{30,}"  # a Telegram bot token
    r"|sk-ant-|sk-[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_|xox[abp]-"
    r"|AKIA[0-9A-Z]{16}|-----BEGIN"
)


class BackupError(LegioError):
    """A backup or a restore could not be made; the message says why and what to do."""


@dataclass(frozen=True)
class BackupResult:
    """One archive written: where, how large, how long it took, what it holds."""

    archive: Path
    size: int
    seconds: float
    files: int
    removed: tuple[str, ...] = ()  # legio.toml keys left out as secrets
    warning: str | None = None  # the folder is shared ([backup] allow_shared_folder)


def default_dir(castra_root: Path) -> Path:
    """Where archives go without ``[backup] dir``: ``castra/state/backups/``."""
    return state_dir(castra_root) / "backups"


def backup_dir(config: Config) -> Path:
    return config.backup.dir if config.backup.dir.is_absolute() else default_dir(config.castra)


def archive_name(moment: datetime) -> str:
    return f"{PREFIX}{moment:%Y-%m-%dT%H%M%S}Z{SUFFIX}"


def part_token() -> str:
    """The random part of a temporary name (no other user can guess it to plant a link)."""
    return secrets.token_hex(8)


def shared_folder_refusal(folder: Path, problem: str) -> str:
    """Why a backup folder is refused, and the two ways out."""
    return (
        f"{problem}; other users could plant links or files there, or swap the folder. "
        f"Make it private (owned by the user running Legio, `chmod 700 {folder}`), or accept "
        "that with `[backup] allow_shared_folder = true` in legio.toml"
    )


def folder_verdict(config: Config) -> tuple[str, str]:
    """``legio check``'s line on the backup folder: ("ok" | "warn" | "bad", text)."""
    folder = backup_dir(config)
    problem = folder_problem(folder)
    if problem is None:
        return "ok", f"backups: {folder} (no other user can write there)"
    if config.backup.allow_shared_folder and not link_problem(folder):
        return "warn", f"backups: {folder}: {problem} (allowed by [backup] allow_shared_folder)"
    return "bad", f"backups: {folder}: {shared_folder_refusal(folder, problem)}"


# ---------------------------------------------------------------- the praetorium


def copy_praetorium(source: Path, target: Path, pages: int = ALL_PAGES) -> int:
    """Copy the database at ``source`` into a new file ``target`` with the online backup
    API (see the module docstring for ``pages``); its schema version."""
    if not source.is_file():
        raise BackupError(f"no praetorium at {source}: is this a castra?")
    os.close(create_private(target))  # never 0644, never through a link
    src = sqlite3.connect(source, timeout=30)
    try:
        src.execute("PRAGMA busy_timeout = 30000")
        dst = sqlite3.connect(target)
        try:
            src.backup(dst, pages=pages)
            dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            version = int(dst.execute("PRAGMA user_version").fetchone()[0])
        finally:
            dst.close()
    except sqlite3.Error as e:
        raise BackupError(f"could not copy the praetorium {source}: {e}") from e
    finally:
        src.close()
    return version


# ---------------------------------------------------------------- legio.toml


def without_secrets(data: Any, path: str = "") -> tuple[Any, list[str]]:
    """``data`` (parsed TOML) less every token-like key or value; the keys removed.
    A key naming an environment variable (``token_env``) is kept: it holds a name."""
    removed: list[str] = []
    if isinstance(data, dict):
        kept: dict[str, Any] = {}
        for key, value in data.items():
            where = f"{path}.{key}" if path else key
            secret_key = SECRET_KEY.search(key) and not key.endswith("_env")
            if secret_key and not isinstance(value, (dict, bool, int, float)):
                removed.append(where)
                continue
            clean, inner = without_secrets(value, where)
            removed += inner
            if not (isinstance(value, str) and inner):
                kept[key] = clean
        return kept, removed
    if isinstance(data, list):
        items = []
        for number, item in enumerate(data):
            clean, inner = without_secrets(item, f"{path}[{number}]")
            if inner == [f"{path}[{number}]"]:
                removed += inner
                continue
            items.append(clean)
            removed += inner
        return items, removed
    if isinstance(data, str) and SECRET_VALUE.search(data):
        return None, [path]
    return data, removed


def config_text(config: Config) -> tuple[bytes, list[str]]:
    """The ``legio.toml`` a restored castra starts from, and the secret keys left out."""
    raw: dict[str, Any] = {}
    if config.path is not None and config.path.is_file():
        raw = tomllib.loads(config.path.read_text(encoding="utf-8"))
    clean, removed = without_secrets(raw)
    clean["castra"] = "castra"
    return tomli_w.dumps(clean).encode(), removed


# ---------------------------------------------------------------- the castra's files


def _walk(root: Path, folder: Path) -> Iterator[tuple[Path, str]]:
    """Regular files under ``folder`` (links never followed), with their archive names."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(top) / name
            yield path, "castra/" + path.relative_to(root).as_posix()


def castra_files(castra: Castra, attachments: bool) -> Iterator[tuple[Path, str]]:
    """The castra's files a backup holds (the allow-list of the module docstring)."""
    root = castra.root
    yield castra.legatus_prompt_path, f"castra/legatus/{PROMPT_FILE}"
    yield from _walk(root, castra.edicta_dir)
    yield from _walk(root, castra.acta_dir)
    folder = castra.centuriones_dir
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        if entry.is_symlink() or not entry.is_dir():
            continue
        yield entry / PROMPT_FILE, f"castra/centuriones/{entry.name}/{PROMPT_FILE}"
        yield from _walk(root, castra.commentarii_dir(entry.name))
    if attachments:
        yield from _walk(root, castra.attachments_dir)


class _Cancellable:
    """A file read for the archive that stops when the backup is cancelled (shutdown)."""

    def __init__(self, handle: io.BufferedReader, cancel: threading.Event | None) -> None:
        self.handle, self.cancel = handle, cancel

    def read(self, size: int = -1) -> bytes:
        if self.cancel is not None and self.cancel.is_set():
            raise BackupError("the backup was cancelled (Legio is stopping)")
        return self.handle.read(size)


def _add_file(
    tar: tarfile.TarFile, path: Path, name: str, cancel: threading.Event | None = None
) -> bool:
    """Add one regular file, opened without following a link; False if it is not one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            return False
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = st.st_size, int(st.st_mtime), 0o600
        tar.addfile(info, _Cancellable(handle, cancel))
    return True


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
    tar.addfile(info, io.BytesIO(data))


# ---------------------------------------------------------------- the archive


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _clean_leftovers(folder: Path) -> None:
    """What a killed backup left: ``.part`` files and staged database copies (Legio's
    user's own only: in a shared folder, a file someone else planted is left alone)."""
    clean_leftovers(folder, (PREFIX, "." + PREFIX), (PART, ".db", STAGE))


def _lock(folder: Path) -> int:
    """The folder's ``.backup.lock``, opened without following a link (the folder itself
    opened ``O_NOFOLLOW``: never a link to another); Legio's own."""
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = os.open(
            ".backup.lock",
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dir_fd,
        )
    finally:
        os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise BackupError(f"{folder / '.backup.lock'} is not Legio's own lock file; remove it")
    return fd


def make_backup(
    config: Config,
    folder: Path | None = None,
    *,
    attachments: bool | None = None,
    pages: int = ALL_PAGES,
    moment: datetime | None = None,
    cancel: threading.Event | None = None,
) -> BackupResult:
    """Write one archive of ``config``'s castra into ``folder`` (default ``backup_dir``)
    and return it; ``BackupError`` (nothing half-written left as an archive) if it fails
    or ``cancel`` is set (checked at every read of a file going into the archive)."""
    started = time.monotonic()
    castra = Castra(config.castra)
    folder = folder if folder is not None else backup_dir(config)
    with_files = config.backup.attachments if attachments is None else attachments
    try:
        linked = link_problem(folder)  # refused even in a folder shared on purpose
        if linked:
            raise BackupError(
                f"backups into {folder} refused: {linked}; write the folder's real path in "
                "[backup] dir"
            )
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = folder_problem(folder)
        if problem and not config.backup.allow_shared_folder:
            raise BackupError(
                f"backups into {folder} refused: {shared_folder_refusal(folder, problem)}"
            )
        lock = _lock(folder)
    except OSError as e:
        raise BackupError(f"cannot write backups into {folder}: {e.strerror or e}") from e
    warning = (
        f"warning: backups: {problem}; other users could plant files there (allowed by "
        "[backup] allow_shared_folder)"
        if problem
        else None
    )
    stage_in = state_dir(castra.root) if problem else folder
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupError(f"another backup is being written into {folder}") from None
        _clean_leftovers(folder)
        if stage_in != folder and stage_in.is_dir():
            _clean_leftovers(stage_in)
        stage_in.mkdir(mode=0o700, parents=True, exist_ok=True)
        result = _write(
            config, castra, folder, stage_in, with_files, pages, moment or now(), started, cancel
        )
        return dataclasses.replace(result, warning=warning)
    except OSError as e:
        raise BackupError(f"the backup into {folder} failed: {e}") from e
    finally:
        os.close(lock)


def _open_part(final: Path) -> tuple[Path, int]:
    """A new ``.part`` file beside ``final`` under a random name; a name taken (a link
    planted there) is never opened: another random name is drawn."""
    for _ in range(PART_TRIES):
        part = final.with_name(f".{final.name}.{part_token()}{PART}")
        try:
            return part, create_private(part)
        except FileExistsError:
            continue
    raise BackupError(f"could not create a temporary file in {final.parent}: every name was taken")


def _write(
    config: Config,
    castra: Castra,
    folder: Path,
    stage_in: Path,
    with_files: bool,
    pages: int,
    moment: datetime,
    started: float,
    cancel: threading.Event | None,
) -> BackupResult:
    final = folder / archive_name(moment)
    while os.path.lexists(final):  # two backups in one second: the later one a second on
        moment += timedelta(seconds=1)
        final = folder / archive_name(moment)
    toml, removed = config_text(config)
    stage = Path(tempfile.mkdtemp(prefix="." + PREFIX, suffix=STAGE, dir=stage_in))
    part: Path | None = None
    try:
        version = copy_praetorium(castra.praetorium_path, stage / "praetorium.db", pages)
        manifest = {
            "format": 1,
            "legio": __version__,
            "created": moment.isoformat(),
            "schema_version": version,
            "attachments": with_files,
        }
        files = 0
        part, fd = _open_part(final)
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=COMPRESS_LEVEL) as tar:
                _add_bytes(tar, "manifest.json", json.dumps(manifest, indent=1).encode())
                _add_bytes(tar, "legio.toml", toml)
                _add_file(tar, stage / "praetorium.db", "castra/praetorium.db", cancel)
                for path, name in castra_files(castra, with_files):
                    files += _add_file(tar, path, name, cancel)
            raw.flush()
            os.fsync(raw.fileno())
        os.rename(part, final)
        part = None
        _sync_folder(folder)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if part is not None:
            with contextlib.suppress(FileNotFoundError):
                part.unlink()
    return BackupResult(
        final, final.stat().st_size, time.monotonic() - started, files + 3, tuple(removed)
    )
