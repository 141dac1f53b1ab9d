"""Files an agent sends to Caesar: the ``send_file`` tool, checked, queued, then recorded.

``send_file(path, caption)`` (a tool of every agent: in each centurio's memoria server
and among the Legatus's tools) checks the path against the agent's policy: inside its
workspace or a granted folder (``add_dirs``), symlinks resolved, never a path the path
guard refuses (``legio.guard.PathGuard``, the same rules as its file tools); then the
size (Telegram's 50 MB). The file is queued on the agent's running turn (``Outbox``);
the answer's delivery stores a copy in the castra (``record_outgoing``: the agent may
delete its own), records it on the answer's nuntius, and hands it to the front-end,
which sends it after the text.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claude_agent_sdk import SdkMcpTool, tool

from legio.castra import AgentPrompt, Castra
from legio.config import Config
from legio.errors import AttachmentError
from legio.folders import granted_dirs
from legio.guard import PathGuard
from legio.policy import _within, working_dir
from legio.store.attachments import AttachmentStore
from legio.store.files import (
    PHOTO_LIMIT,
    UPLOAD_LIMIT,
    FileStore,
    StoredFile,
    guess_mime,
    kind_of,
    megabytes,
    safe_name,
)

logger = logging.getLogger(__name__)

CAPTION_MAX = 900


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
    sender: str = ""  # the centurio that sent it, when another agent's reply carries it

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


def check_outgoing(raw: str, guard: PathGuard) -> OutgoingFile:
    """The file ``raw`` names, if the agent may send it; else ``AttachmentError``.

    It must be in the guard's workspace or granted folders (``raw`` may be relative
    to the workspace) and pass the guard's read check."""
    if not raw.strip():
        raise AttachmentError("give the path of the file to send")
    workspace = guard.workspace or guard.home
    candidate = Path(os.path.expanduser(raw.strip()))
    if not candidate.is_absolute():
        candidate = workspace / candidate
    path = Path(os.path.realpath(candidate))
    if not any(_within(path, root) for root in (workspace, *guard.granted)):
        granted = ", ".join(str(g) for g in guard.granted)
        also = f" and your granted folders ({granted})" if granted else ""
        raise AttachmentError(
            f"{raw} is outside your workspace ({workspace}){also}; copy the file there first"
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


def send_file_tool(outbox: Outbox, agent: str, guard: PathGuard) -> SdkMcpTool[Any]:
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
            checked = check_outgoing(str(args.get("path", "")), guard)
        except AttachmentError as e:
            return {"content": [{"type": "text", "text": f"Error: {e}"}], "is_error": True}
        caption = str(args.get("caption") or "")[:CAPTION_MAX]
        file = OutgoingFile(checked.path, checked.name, caption, checked.mime_type, checked.size)
        count = outbox.put(agent, file)
        text = (
            f"Queued {file.name} ({megabytes(file.size)}): Caesar receives it after your "
            f"answer ({count} file{'s' if count > 1 else ''} queued in this turn)."
        )
        return {"content": [{"type": "text", "text": text}]}

    return send_file


def send_file_for(
    config: Config, castra: Castra, prompt: AgentPrompt, outbox: Outbox
) -> SdkMcpTool[Any]:
    """``send_file`` for the agent of ``prompt``: its workspace and granted folders."""
    guard = PathGuard(
        castra,
        prompt.name,
        config.path,
        workspace=working_dir(castra, prompt),
        granted=granted_dirs(castra, prompt),
    )
    return send_file_tool(outbox, prompt.name, guard)


def store_outgoing(files: FileStore, outgoing: OutgoingFile) -> tuple[SentFile, StoredFile]:
    """Keep a copy of an outgoing file in the castra (the agent may delete its own)."""
    stored = files.add_copy(outgoing.path, outgoing.name, outgoing.mime_type)
    sent = SentFile(
        stored.path, outgoing.name, outgoing.caption, outgoing.mime_type, stored.size, outgoing.path
    )
    return sent, stored


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
