"""Files to and from the agents: stored once, copied to workspaces, shown to the model.

- **Storage.** Every file is kept content-addressed in ``castra/attachments/<sha256>.<ext>``,
  written atomically (a temp file in that folder, fsync, rename) and stored once however
  often it is sent. The praetorium's ``attachments`` table (``legio.store.attachments``)
  says which nuntius it belongs to.
- **What an agent gets.** For each file of the nuntius it answers: a copy in its workspace
  (``inbox/<seq>-<name>``, readable by its Read tool and its sandbox) named in the message
  as ``<attachment kind=… name=… path=…/>``; for images also an image content block in
  that query, once. History windows show the element only, never the bytes.
- **Images** go to the Messages API as base64 blocks (JPEG, PNG, GIF, WebP; at most 5 MB of
  base64 and 8000 px a side). Larger or other formats are downscaled / re-encoded with
  Pillow so that the model still sees them; the original stays in the inbox. An image
  Pillow cannot read is refused when it arrives, with a one-line reason.
- **Outgoing.** ``send_file(path, caption)`` (a tool of every agent's memoria server)
  checks the path (the agent's workspace or granted folders, symlinks resolved, never a
  path the path guard refuses) and the size, and queues the file on the agent's running
  turn (``Outbox``); the answer's delivery stores it, records it on the answer's nuntius
  and hands it to the front-end after the text.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hashlib
import io
import logging
import mimetypes
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claude_agent_sdk import SdkMcpTool, tool
from lxml import etree

from legio.errors import LegioError
from legio.history import xml_safe
from legio.policy import PathGuard
from legio.store.attachments import Attachment, AttachmentStore, PendingFile

logger = logging.getLogger(__name__)

FOLDER = "attachments"
INBOX = "inbox"
DOWNLOAD_LIMIT = 20 * 1024 * 1024  # Bot API getFile
UPLOAD_LIMIT = 50 * 1024 * 1024  # Bot API sendDocument
PHOTO_LIMIT = 10 * 1024 * 1024  # Bot API sendPhoto
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")  # the Messages API's
MAX_IMAGE_BASE64 = 5 * 1024 * 1024
MAX_IMAGE_SIDE = 8000
MAX_NAME = 120
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f/\\]+")
IMAGE_KINDS = ("photo", "image")


class AttachmentError(LegioError):
    """A file Legio cannot take or send; the message is one line for Caesar or the agent."""


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


# ------------------------------------------------------------------ the castra store


class FileStore:
    """``castra/attachments/``: content-addressed, atomic, deduplicated."""

    def __init__(self, castra_root: Path) -> None:
        self.folder = castra_root / FOLDER

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


# ------------------------------------------------------------------ images


def check_image(path: Path, name: str) -> None:
    """Raise ``AttachmentError`` if Pillow cannot read the image at ``path``."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            image.load()
    except Exception as e:
        raise AttachmentError(
            f"{name} is not a readable image ({type(e).__name__}); "
            "send it again, or as a file if it is not a picture"
        ) from e


def image_source(path: Path) -> dict[str, str]:
    """A base64 image source within the Messages API's limits (downscaled if need be).

    The media type is the one Pillow reads in the bytes, not the one declared: the API
    refuses an image whose type does not match its content.
    """
    from PIL import Image

    data = path.read_bytes()
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        mime_type = Image.MIME.get(image.format or "", "")
        fits = (
            mime_type in IMAGE_TYPES
            and max(width, height) <= MAX_IMAGE_SIDE
            and len(data) * 4 / 3 <= MAX_IMAGE_BASE64
        )
        if fits:
            return {"type": "base64", "media_type": mime_type, "data": _b64(data)}
        image.load()
        picture = image.convert("RGBA" if _has_alpha(image) else "RGB")
    side = min(MAX_IMAGE_SIDE, max(width, height))
    while True:
        copy = picture.copy()
        copy.thumbnail((side, side))
        buffer = io.BytesIO()
        if copy.mode == "RGBA":
            copy.save(buffer, format="PNG", optimize=True)
            media = "image/png"
        else:
            copy.save(buffer, format="JPEG", quality=85)
            media = "image/jpeg"
        encoded = buffer.getvalue()
        if len(encoded) * 4 / 3 <= MAX_IMAGE_BASE64 or side <= 256:
            return {"type": "base64", "media_type": media, "data": _b64(encoded)}
        side = int(side * 0.7)


def _has_alpha(image: Any) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or (
        image.mode == "P" and "transparency" in image.info
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# ------------------------------------------------------------------ what an agent gets


def inbox_path(workspace: Path, seq: int, name: str) -> Path:
    return workspace / INBOX / f"{seq}-{name}"


def copy_to_inbox(source: Path, workspace: Path, seq: int, name: str) -> Path:
    """Copy a stored file into the agent's ``inbox/`` (atomically; once)."""
    target = inbox_path(workspace, seq, name)
    if target.exists() and target.stat().st_size == source.stat().st_size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".copy-", suffix=".part")
    os.close(fd)
    try:
        shutil.copyfile(source, temp)
        os.replace(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return target


def attachment_element(attachment: Attachment, path: Path | str | None) -> etree._Element:
    """``<attachment kind=… name=… [path=…]/>`` for a history window or a message."""
    element = etree.Element("attachment", kind=attachment.kind, name=xml_safe(attachment.name))
    if path is not None:
        element.set("path", xml_safe(str(path)))
    element.set("mime_type", attachment.mime_type)
    element.set("size", str(attachment.size))
    if attachment.direction == "out":
        element.set("sent", "true")
    return element


def _render(element: etree._Element) -> str:
    return etree.tostring(element, encoding="unicode")


def window_elements(
    attachments: Mapping[int, Sequence[Attachment]], workspace: Path, viewer: str
) -> dict[int, list[etree._Element]]:
    """For a history window: each nuntius's files as elements, with the path where the
    viewer finds a copy (its inbox, or the file it sent itself), never the bytes."""
    out: dict[int, list[etree._Element]] = {}
    for seq, files in attachments.items():
        elements = []
        for attachment in files:
            copy = inbox_path(workspace, seq, attachment.name)
            path: Path | str | None = copy if copy.exists() else None
            if path is None and attachment.direction == "out" and attachment.source_path:
                path = attachment.source_path
            elements.append(attachment_element(attachment, path))
        out[seq] = elements
    return out


@dataclass
class Delivery:
    """What one query carries for the files of the nuntius it answers."""

    note: str = ""
    images: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


async def prepare_delivery(
    files: FileStore, attachments: Sequence[Attachment], workspace: Path, seq: int
) -> Delivery:
    """Copy the nuntius's files into the agent's inbox; image blocks for its images."""
    delivery = Delivery()
    lines = []
    for attachment in attachments:
        stored = files.find(attachment.sha256, attachment.name, attachment.mime_type)
        if stored is None:
            delivery.problems.append(f"{attachment.name} is missing from the castra")
            lines.append(_render(attachment_element(attachment, None)))
            continue
        copy = await asyncio.to_thread(copy_to_inbox, stored, workspace, seq, attachment.name)
        lines.append(_render(attachment_element(attachment, copy)))
        if attachment.kind in IMAGE_KINDS:
            try:
                source = await asyncio.to_thread(image_source, stored)
            except Exception as e:
                logger.warning("cannot show %s to the model: %s", attachment.name, e)
                delivery.problems.append(f"{attachment.name} could not be shown as an image")
                continue
            delivery.images.append({"type": "image", "source": source})
    if lines:
        shown = " (the images are also shown to you)" if delivery.images else ""
        delivery.note = (
            f"Caesar attached these files; copies are in your workspace{shown}. "
            "Read them with the Read tool:\n" + "\n".join(lines)
        )
        if delivery.problems:
            delivery.note += "\n(" + "; ".join(delivery.problems) + ")"
    return delivery


def user_message(text: str, images: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One SDK user message with content blocks: the images, then the text."""
    return {
        "type": "user",
        "message": {"role": "user", "content": [*images, {"type": "text", "text": text}]},
        "parent_tool_use_id": None,
    }


async def one_message(message: dict[str, Any]) -> Any:
    """``ClaudeSDKClient.query`` takes an async iterable of messages for content blocks."""
    yield message


# ------------------------------------------------------------------ outgoing


@dataclass(frozen=True)
class OutgoingFile:
    """A file an agent asked to send to Caesar."""

    path: Path
    name: str
    caption: str
    mime_type: str
    size: int


@dataclass(frozen=True)
class SentFile:
    """An outgoing file stored in the castra, ready for the front-end."""

    path: Path
    name: str
    caption: str
    mime_type: str
    size: int
    source: Path

    @property
    def is_photo(self) -> bool:
        return (
            self.mime_type in ("image/jpeg", "image/png", "image/webp") and self.size <= PHOTO_LIMIT
        )


class Outbox:
    """Files queued by ``send_file`` on each agent's running turn (one turn at a time)."""

    def __init__(self) -> None:
        self._queued: dict[str, list[OutgoingFile]] = {}

    def put(self, agent: str, file: OutgoingFile) -> int:
        self._queued.setdefault(agent, []).append(file)
        return len(self._queued[agent])

    def take(self, agent: str) -> list[OutgoingFile]:
        return self._queued.pop(agent, [])


def check_outgoing(
    raw: str, workspace: Path, guard: PathGuard, granted: Iterable[Path] = ()
) -> OutgoingFile:
    """The file ``raw`` names, if the agent may send it; else ``AttachmentError``."""
    if not raw.strip():
        raise AttachmentError("give the path of the file to send")
    candidate = Path(os.path.expanduser(raw.strip()))
    if not candidate.is_absolute():
        candidate = workspace / candidate
    path = Path(os.path.realpath(candidate))
    roots = [Path(os.path.realpath(workspace)), *(Path(os.path.realpath(g)) for g in granted)]
    if not any(path == root or root in path.parents for root in roots):
        raise AttachmentError(
            f"{raw} is outside your workspace ({workspace}); copy the file there first"
        )
    reason = guard.check_path(path, write=False)
    if reason:
        raise AttachmentError(f"{raw} cannot be sent: {reason}")
    if not path.is_file():
        raise AttachmentError(f"{raw} is not a file (write it first, then send it)")
    size = path.stat().st_size
    if size > UPLOAD_LIMIT:
        raise AttachmentError(
            f"{path.name} is {megabytes(size)}; Telegram lets a bot send files up to "
            f"{UPLOAD_LIMIT // 2**20} MB: compress or split it"
        )
    if size == 0:
        raise AttachmentError(f"{path.name} is empty; Telegram does not send empty files")
    name = safe_name(path.name, "file")
    return OutgoingFile(path, name, "", guess_mime(name), size)


def store_outgoing(files: FileStore, outgoing: OutgoingFile) -> tuple[SentFile, StoredFile]:
    """Keep a copy of an outgoing file in the castra (the agent may delete its own)."""
    stored = files.add_copy(outgoing.path, outgoing.name, outgoing.mime_type)
    sent = SentFile(
        stored.path, outgoing.name, outgoing.caption, outgoing.mime_type, stored.size, outgoing.path
    )
    return sent, stored


def send_file_tool(
    outbox: Outbox,
    agent: str,
    workspace: Callable[[], Path],
    guard: PathGuard,
    granted: Callable[[], Sequence[Path]] = tuple,
) -> SdkMcpTool[Any]:
    """The ``send_file`` tool of agent ``agent``: queue a file for Caesar with its answer."""

    @tool(
        "send_file",
        "Send a file from your workspace to Caesar (images arrive as photos, anything else as "
        "a document), after your answer. Write the file first; up to 50 MB.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "the file, e.g. 'report.pdf'"},
                "caption": {"type": "string", "description": "a short caption (optional)"},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    )
    async def send_file(args: dict[str, Any]) -> dict[str, Any]:
        try:
            checked = check_outgoing(str(args.get("path", "")), workspace(), guard, granted())
        except AttachmentError as e:
            return {"content": [{"type": "text", "text": f"Error: {e}"}], "is_error": True}
        caption = str(args.get("caption") or "")[:900]
        file = OutgoingFile(checked.path, checked.name, caption, checked.mime_type, checked.size)
        count = outbox.put(agent, file)
        text = (
            f"Queued {file.name} ({megabytes(file.size)}): Caesar receives it after your "
            f"answer ({count} file{'s' if count > 1 else ''} queued in this turn)."
        )
        return {"content": [{"type": "text", "text": text}]}

    return send_file


async def record_outgoing(
    outbox: Outbox, files: FileStore, store: AttachmentStore, agent: str, seq: int
) -> tuple[SentFile, ...]:
    """Store the files ``agent`` queued in its turn and record them on its answer ``seq``."""
    sent: list[SentFile] = []
    for outgoing in outbox.take(agent):
        try:
            file, stored = await asyncio.to_thread(store_outgoing, files, outgoing)
        except OSError as e:
            logger.warning("%s: cannot send %s: %s", agent, outgoing.path, e)
            continue
        await store.add_outgoing(
            seq,
            kind=kind_of(outgoing.mime_type),
            mime_type=outgoing.mime_type,
            name=outgoing.name,
            size=stored.size,
            sha256=stored.sha256,
            source_path=str(outgoing.path),
        )
        sent.append(file)
    return tuple(sent)


async def stage_files(store: AttachmentStore, files: Sequence[PendingFile], origin: str) -> None:
    """Record incoming files (already complete) under the origin their nuntius will have."""
    for pending in files:
        await store.stage(dataclasses.replace(pending, origin=origin))


def take_local_file(files: FileStore, raw: str, text: str) -> PendingFile:
    """A file from this machine (the console's ``/attach``), stored like a Telegram upload."""
    path = Path(os.path.expanduser(raw))
    if not path.is_file():
        raise AttachmentError(f"{raw} is not a file: give the path of an existing file")
    size = path.stat().st_size
    if size > DOWNLOAD_LIMIT:
        raise AttachmentError(too_big(path.name, size, DOWNLOAD_LIMIT))
    name = safe_name(path.name, "file")
    mime = guess_mime(name)
    kind = kind_of(mime)
    if kind == "image":
        check_image(path, name)
    stored = files.add_copy(path, name, mime)
    return PendingFile(
        origin="",
        text=text,
        kind=kind,
        mime_type=mime,
        name=name,
        size=stored.size,
        sha256=stored.sha256,
    )
