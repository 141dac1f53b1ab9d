"""Files an agent sends to Caesar: the ``send_file`` tool, checked, queued, then recorded.

``send_file(path, caption)`` (a tool of every agent: in each centurio's memoria server
and among the Legatus's tools) checks the path against the agent's policy: inside its
workspace or a granted folder (``add_dirs``), symlinks resolved, never a path the path
guard refuses (``legio.fence.guard.PathGuard``, the same rules as its file tools); then the
size (Telegram's 50 MB). The file is opened once, by descriptor, without following a
link (``legio.fence.safefs``), and copied into the castra from that descriptor at once (the
agent may delete or swap its own afterwards: what was checked is what is sent); it is
queued on the agent's running turn (``Outbox``), recorded on the answer's nuntius
(``record_outgoing``) and handed to the front-end, which sends it after the text.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legio.castra import AgentPrompt, Castra
from legio.config import Config
from legio.errors import AttachmentError
from legio.fence import safefs
from legio.fence.folders import granted_dirs
from legio.fence.guard import PathGuard
from legio.fence.policy import _within, working_dir
from legio.request import SentFile
from legio.store.attachments import AttachmentStore
from legio.store.files import (
    UPLOAD_LIMIT,
    FileStore,
    StoredFile,
    guess_mime,
    kind_of,
    megabytes,
    safe_name,
)
from legio.toolkit import Result, guarded, result, schema, string, tool, tool_error

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import SdkMcpTool

logger = logging.getLogger(__name__)

CAPTION_MAX = 900


@dataclass(frozen=True)
class OutgoingFile:
    """A file an agent asked to send to Caesar, copied into the castra when it asked."""

    path: Path
    name: str
    caption: str
    mime_type: str
    size: int
    stored: StoredFile


class Outbox:
    """Files queued by ``send_file`` on each agent's running turn (one turn at a time),
    copied into ``files`` (the castra's store) when queued."""

    def __init__(self, files: FileStore) -> None:
        self.files = files
        self._queued: dict[str, list[OutgoingFile]] = {}

    def put(self, agent: str, file: OutgoingFile) -> int:
        self._queued.setdefault(agent, []).append(file)
        return len(self._queued[agent])

    def take(self, agent: str) -> list[OutgoingFile]:
        return self._queued.pop(agent, [])


def take_outgoing(raw: str, guard: PathGuard, files: FileStore) -> OutgoingFile:
    """The file ``raw`` names, checked and copied into the castra now; else
    ``AttachmentError``.

    It must be in the guard's workspace or granted folders (``raw`` may be relative to
    the workspace) and pass the guard's read check. It is opened once, without following
    a link at any component below its folder (``legio.fence.safefs``), checked through that
    descriptor (a regular file, the very file the guard checked, within the limits) and
    copied from it: a link or a swap made after the check sends nothing else."""
    if not raw.strip():
        raise AttachmentError("give the path of the file to send")
    workspace = guard.workspace or guard.home
    candidate = Path(os.path.expanduser(raw.strip()))
    if not candidate.is_absolute():
        candidate = workspace / candidate
    path = Path(os.path.realpath(candidate))
    root = next((r for r in (workspace, *guard.granted) if _within(path, r)), None)
    if root is None or path == root:
        granted = ", ".join(str(g) for g in guard.granted)
        also = f" and your granted folders ({granted})" if granted else ""
        raise AttachmentError(
            f"{raw} is outside your workspace ({workspace}){also}; copy the file there first"
        )
    reason = guard.check_path(path, write=False)
    if reason:
        raise AttachmentError(f"{raw} cannot be sent: {reason}")
    try:
        fd = safefs.open_file(root, path.relative_to(root))
    except safefs.UnsafePath as e:
        raise AttachmentError(f"{raw} cannot be sent: {e.strerror}; send the file itself") from e
    except OSError as e:
        raise AttachmentError(f"{raw} is not a file (write it first, then send it)") from e
    try:
        return _copy_checked(raw, path, fd, guard, files)
    finally:
        os.close(fd)


def _copy_checked(
    raw: str, path: Path, fd: int, guard: PathGuard, files: FileStore
) -> OutgoingFile:
    opened = os.fstat(fd)
    try:
        now = os.stat(path, follow_symlinks=False)
    except OSError:
        now = None
    reason = guard.check_path(path, write=False)  # by the identity the path has now
    if reason or now is None or (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
        raise AttachmentError(f"{raw} changed while it was being sent; send it again")
    if opened.st_nlink > 1:  # another name elsewhere: perhaps a file the guard would refuse
        raise AttachmentError(
            f"{raw} has other hard links; send a copy of it instead (cp {path.name} copy)"
        )
    size = opened.st_size
    if size > UPLOAD_LIMIT:
        raise AttachmentError(
            f"{path.name} is {megabytes(size)}; Telegram lets a bot send files up to "
            f"{UPLOAD_LIMIT // 2**20} MB: compress or split it"
        )
    if size == 0:
        raise AttachmentError(f"{path.name} is empty; Telegram does not send empty files")
    name = safe_name(path.name, "file")
    mime_type = guess_mime(name)
    try:
        stored = files.add_from_fd(fd, name, mime_type, UPLOAD_LIMIT)
    except ValueError as e:
        raise AttachmentError(f"{e}: send it when it is finished") from e
    return OutgoingFile(path, name, "", mime_type, stored.size, stored)


def send_file_tool(outbox: Outbox, agent: str, guard: PathGuard) -> SdkMcpTool[Any]:
    """The ``send_file`` tool of agent ``agent``: queue a file for Caesar with its answer."""

    @tool(
        "send_file",
        "Send a file from your workspace to Caesar (images arrive as photos, anything else as "
        "a document), after your answer. Write the file first; up to 50 MB.",
        schema(
            {
                "path": string("the file, e.g. 'report.pdf'"),
                "caption": string("a short caption (optional)"),
            },
            required=["path"],
        ),
    )
    @guarded(AttachmentError)
    async def send_file(args: dict[str, Any]) -> Result:
        raw = str(args.get("path", ""))
        try:
            checked = await asyncio.to_thread(take_outgoing, raw, guard, outbox.files)
        except OSError as e:
            logger.warning("%s: send_file %r failed: %s", agent, raw, e)
            return tool_error(f"{raw} could not be read ({e.strerror or e})")
        caption = str(args.get("caption") or "")[:CAPTION_MAX]
        file = dataclasses.replace(checked, caption=caption)
        count = outbox.put(agent, file)
        text = (
            f"Queued {file.name} ({megabytes(file.size)}): Caesar receives it after your "
            f"answer ({count} file{'s' if count > 1 else ''} queued in this turn)."
        )
        return result(text)

    return send_file


def send_file_for(
    config: Config, castra: Castra, prompt: AgentPrompt, outbox: Outbox, copy: Path | None = None
) -> SdkMcpTool[Any]:
    """``send_file`` for the agent of ``prompt``: its workspace and granted folders, and
    its project ``copy`` when it works in one (then relative paths start there)."""
    workspace = working_dir(castra, prompt)
    guard = PathGuard(
        castra,
        prompt.name,
        config.path,
        workspace=copy or workspace,
        granted=[*([workspace] if copy else []), *granted_dirs(castra, prompt, config)],
        hide=config.sandbox.hide,
    )
    return send_file_tool(outbox, prompt.name, guard)


async def record_outgoing(
    outbox: Outbox, store: AttachmentStore, agent: str, seq: int
) -> tuple[SentFile, ...]:
    """Record the files ``agent`` queued in its turn (copied when queued) on its answer."""
    sent: list[SentFile] = []
    for outgoing in outbox.take(agent):
        stored = outgoing.stored
        await store.add_outgoing(
            seq,
            kind=kind_of(outgoing.mime_type),
            mime_type=outgoing.mime_type,
            name=outgoing.name,
            size=stored.size,
            sha256=stored.sha256,
            source_path=str(outgoing.path),
        )
        sent.append(
            SentFile(
                stored.path,
                outgoing.name,
                outgoing.caption,
                outgoing.mime_type,
                stored.size,
                outgoing.path,
            )
        )
    return tuple(sent)
