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

The archive (the whole conversation: mode 0600, in a folder made 0700) is written to
``<name>.part``, flushed to disk (``fsync``), renamed and its
folder synced: a backup killed at any point leaves the earlier archives whole and at
worst a ``.part`` file, removed by the next backup.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import sqlite3
import stat
import tarfile
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
from legio.timing import now

PREFIX = "legio-backup-"
SUFFIX = ".tar.gz"
PART = ".part"
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


def default_dir(castra_root: Path) -> Path:
    """Where archives go without ``[backup] dir``: ``castra/state/backups/``."""
    return state_dir(castra_root) / "backups"


def backup_dir(config: Config) -> Path:
    return config.backup.dir if config.backup.dir.is_absolute() else default_dir(config.castra)


def archive_name(moment: datetime) -> str:
    return f"{PREFIX}{moment:%Y-%m-%dT%H%M%S}Z{SUFFIX}"


def archives(folder: Path) -> list[Path]:
    """The finished archives in ``folder``, oldest first (their names sort by time)."""
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir() if p.name.startswith(PREFIX) and p.name.endswith(SUFFIX)
    )


def prune(folder: Path, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` archives; the ones removed."""
    old = archives(folder)[:-keep] if keep > 0 else []
    for path in old:
        path.unlink(missing_ok=True)
    return old


# ---------------------------------------------------------------- the praetorium


def copy_praetorium(source: Path, target: Path, pages: int = ALL_PAGES) -> int:
    """Copy the database at ``source`` into a new file ``target`` with the online backup
    API (see the module docstring for ``pages``); its schema version."""
    if not source.is_file():
        raise BackupError(f"no praetorium at {source}: is this a castra?")
    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # never 0644
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
    """What a killed backup left: ``.part`` files and staged database copies."""
    for path in folder.iterdir():
        if path.name.startswith((PREFIX, "." + PREFIX)) and path.name.endswith((PART, ".db")):
            path.unlink(missing_ok=True)


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
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = os.open(folder / ".backup.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise BackupError(f"cannot write backups into {folder}: {e.strerror}") from e
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupError(f"another backup is being written into {folder}") from None
        _clean_leftovers(folder)
        return _write(config, castra, folder, with_files, pages, moment or now(), started, cancel)
    except OSError as e:
        raise BackupError(f"the backup into {folder} failed: {e}") from e
    finally:
        os.close(lock)


def _write(
    config: Config,
    castra: Castra,
    folder: Path,
    with_files: bool,
    pages: int,
    moment: datetime,
    started: float,
    cancel: threading.Event | None,
) -> BackupResult:
    final = folder / archive_name(moment)
    while final.exists():  # two backups in one second: the later one a second on
        moment += timedelta(seconds=1)
        final = folder / archive_name(moment)
    part = final.with_name(final.name + PART)
    staged = folder / f".{final.name}.db"
    toml, removed = config_text(config)
    try:
        version = copy_praetorium(castra.praetorium_path, staged, pages)
        manifest = {
            "format": 1,
            "legio": __version__,
            "created": moment.isoformat(),
            "schema_version": version,
            "attachments": with_files,
        }
        files = 0
        with os.fdopen(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=COMPRESS_LEVEL) as tar:
                _add_bytes(tar, "manifest.json", json.dumps(manifest, indent=1).encode())
                _add_bytes(tar, "legio.toml", toml)
                _add_file(tar, staged, "castra/praetorium.db", cancel)
                for path, name in castra_files(castra, with_files):
                    files += _add_file(tar, path, name, cancel)
            raw.flush()
            os.fsync(raw.fileno())
        os.rename(part, final)
        _sync_folder(folder)
    finally:
        staged.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
    return BackupResult(
        final, final.stat().st_size, time.monotonic() - started, files + 3, tuple(removed)
    )
