"""``castra/attachments/``: every file sent to or by the agents, stored once.

Files are kept content-addressed (``<sha256>.<ext>``), written atomically (a temp file
in that folder, fsync, rename) and stored once however often they are sent. The
praetorium's ``attachments`` table (``legio.store.attachments``) says which nuntius a
file belongs to. Here also: the limits Telegram sets, and the names, extensions, MIME
types and kinds files are stored under.
"""

from __future__ import annotations

import contextlib
import hashlib
import mimetypes
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from legio.castra import Castra

DOWNLOAD_LIMIT = 20 * 1024 * 1024  # Bot API getFile
UPLOAD_LIMIT = 50 * 1024 * 1024  # Bot API sendDocument
MAX_NAME = 120
IMAGE_KINDS = ("photo", "image")  # shown to the model as image blocks
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f/\\]+")


def megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def too_big(name: str, size: int, limit: int) -> str:
    return f"{name} is {megabytes(size)}; Telegram lets a bot take files up to {limit // 2**20} MB"


def safe_name(name: str | None, fallback: str) -> str:
    """A file name fit for a folder: no path, no control characters, not too long."""
    cleaned = _UNSAFE_NAME.sub("_", (name or "").strip()).strip(". ")
    if not cleaned:
        cleaned = fallback
    if len(cleaned) > MAX_NAME:
        stem, dot, ext = cleaned.rpartition(".")
        cleaned = stem[: MAX_NAME - len(ext) - 1] + dot + ext if dot and len(ext) < 10 else ""
        cleaned = cleaned or fallback[:MAX_NAME]
    return cleaned


def extension(name: str, mime_type: str) -> str:
    """The extension to store a file under: the name's, else the MIME type's, else ``bin``."""
    suffix = Path(name).suffix.lower().lstrip(".")
    if suffix and suffix.isalnum() and len(suffix) <= 10:
        return suffix
    guessed = mimetypes.guess_extension(mime_type or "") or ".bin"
    return guessed.lstrip(".")


def guess_mime(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def kind_of(mime_type: str) -> str:
    """``image`` for image files, else ``document`` (Telegram says photo/voice/... itself)."""
    return "image" if mime_type.startswith("image/") else "document"


@dataclass(frozen=True)
class StoredFile:
    """A file complete in the castra."""

    sha256: str
    size: int
    path: Path


class FileStore:
    """``castra/attachments/``: content-addressed, atomic, deduplicated."""

    def __init__(self, castra_root: Path) -> None:
        self.folder = Castra(castra_root).attachments_dir

    def path_of(self, sha256: str, name: str, mime_type: str) -> Path:
        return self.folder / f"{sha256}.{extension(name, mime_type)}"

    def temp_path(self) -> Path:
        """A fresh temp file in the store's folder (same filesystem: rename is atomic)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.folder, prefix=".incoming-", suffix=".part")
        os.close(fd)
        return Path(name)

    def clean_temp(self) -> int:
        """Remove temp files a crash left; return how many."""
        removed = 0
        if self.folder.is_dir():
            for leftover in self.folder.glob(".incoming-*.part"):
                with contextlib.suppress(OSError):
                    leftover.unlink()
                    removed += 1
        return removed

    def adopt(self, temp: Path, name: str, mime_type: str) -> StoredFile:
        """Make a complete temp file (in this folder) the stored copy of its content."""
        digest = hashlib.sha256()
        size = 0
        with temp.open("rb") as f:
            while chunk := f.read(1024 * 1024):
                digest.update(chunk)
                size += len(chunk)
            os.fsync(f.fileno())
        target = self.path_of(digest.hexdigest(), name, mime_type)
        if target.exists() and target.stat().st_size == size:
            temp.unlink()  # the same content is already stored
        else:
            os.replace(temp, target)
            _fsync_dir(self.folder)
        return StoredFile(digest.hexdigest(), size, target)

    def add_copy(self, source: Path, name: str, mime_type: str) -> StoredFile:
        """Store a copy of ``source`` (a console /attach, an agent's send_file)."""
        temp = self.temp_path()
        try:
            shutil.copyfile(source, temp)
            return self.adopt(temp, name, mime_type)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()

    def add_from_fd(self, fd: int, name: str, mime_type: str, limit: int) -> StoredFile:
        """Store a copy of the open file ``fd`` (read from its start; it stays open).
        ``ValueError`` if it holds more than ``limit`` bytes by the time it is read."""
        temp = self.temp_path()
        try:
            copied = 0
            with open(temp, "wb") as out:
                while chunk := os.pread(fd, 1024 * 1024, copied):
                    copied += len(chunk)
                    if copied > limit:
                        raise ValueError(f"{name} grew past {limit} bytes while being read")
                    out.write(chunk)
            return self.adopt(temp, name, mime_type)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()

    def find(self, sha256: str, name: str, mime_type: str) -> Path | None:
        path = self.path_of(sha256, name, mime_type)
        return path if path.exists() else None


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
