"""Files from Caesar, on their way in: staged, downloaded, stored, resumed after a restart.

A front-end says what file a message carries (a ``PendingFile``) and how to fetch it
(``Fetch``: write it to a path, or raise ``AttachmentError``); it never sees the store.

1. ``Intake.accept`` refuses a file over Telegram's 20 MB download limit before
   anything is stored or fetched, and a message already stored (delivered twice) is
   neither fetched nor stored again. Otherwise the file is recorded as pending
   (``attachments_pending``, keyed by the message's origin) as soon as it arrives;
   ``Intake.fetch_all`` then downloads it (an album's files: once all have come),
   fetched into a temp file in ``castra/attachments/``, checked with Pillow if it is an
   image, and stored content-addressed. The files of one Telegram album share one
   origin, as parts numbered by their message ids. The caller then hands it to
   ``Legatus.handle_message``, which stores the nuntius; a trigger moves the pending
   row into ``attachments`` in that same INSERT. A refused file leaves nothing behind.
2. A restart mid-way (a crash, or a shutdown that cancels the download) leaves the
   pending row: ``Intake.resume`` at the next start fetches it again (its Telegram
   file_id stays valid; an album's files all of them) and records its nuntius without
   answering it; Caesar is then
   told about the unanswered request like any other interrupted one (``/retry``).
3. ``take_local_file``: a file of this machine (the console's ``/attach``), stored the
   same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from legio.errors import AttachmentError, DownloadLater
from legio.media.images import check_image
from legio.request import PendingFile
from legio.store.attachments import AttachmentStore
from legio.store.files import (
    DOWNLOAD_LIMIT,
    IMAGE_KINDS,
    FileStore,
    guess_mime,
    kind_of,
    megabytes,
    safe_name,
    too_big,
)
from legio.store.praetorium import Praetorium

logger = logging.getLogger(__name__)

Fetch = Callable[[PendingFile, Path], Awaitable[None]]  # write the file at the path
Record = Callable[[PendingFile], Awaitable[bool]]  # store its nuntius, unanswered


class Intake:
    """Incoming files: the attachment tables, the castra's file store, the praetorium."""

    def __init__(self, praetorium: Praetorium, store: AttachmentStore, files: FileStore) -> None:
        self.praetorium = praetorium
        self.store = store
        self.files = files
        self.room: Callable[[int], str | None] | None = None  # why a file cannot be kept now

    async def accept(self, pending: PendingFile) -> PendingFile | None:
        """Record a file of Caesar's as pending, before its download (a restart finishes
        it): None if its message is already stored (delivered twice). ``AttachmentError``
        (one line) if it is refused; nothing is kept then."""
        if pending.size > DOWNLOAD_LIMIT:
            refusal = too_big(pending.name, pending.size, DOWNLOAD_LIMIT)
            raise AttachmentError(f"{refusal}: send a link or a smaller file.")
        full = self.room(pending.size) if self.room is not None else None
        if full is not None:  # a nearly full disk: refused before a byte is written
            raise AttachmentError(full)
        if await self.praetorium.get_by_origin(pending.origin) is not None:
            logger.info("message %s was already received; not downloading it again", pending.origin)
            return None
        await self.store.stage(pending)
        return pending

    async def fetch_all(
        self, files: Sequence[PendingFile], fetch: Fetch
    ) -> tuple[list[PendingFile], list[str]]:
        """Download accepted files (those of one message, an album's parts): the ones
        complete in the castra, for ``handle_message``, and a line per file refused."""
        taken: list[PendingFile] = []
        refusals: list[str] = []
        for pending in files:
            try:
                taken.append(await self.download(pending, fetch))
            except AttachmentError as e:
                await self.store.drop_pending(pending.origin, pending.part)
                refusals.append(str(e))
        return taken, refusals

    async def download(self, pending: PendingFile, fetch: Fetch) -> PendingFile:
        """Fetch a pending file into the castra and mark it complete."""
        if pending.file_id is None:
            raise AttachmentError(f"{pending.name} cannot be fetched again: no Telegram file id")
        temp = await asyncio.to_thread(self.files.temp_path)
        try:
            await fetch(pending, temp)
            if pending.kind in IMAGE_KINDS:
                await asyncio.to_thread(check_image, temp, pending.name)
            stored = await asyncio.to_thread(
                self.files.adopt, temp, pending.name, pending.mime_type
            )
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
        await self.store.downloaded(pending, stored.sha256, stored.size)
        return dataclasses.replace(pending, sha256=stored.sha256, size=stored.size)

    async def resume(self, fetch: Fetch, record: Record) -> list[tuple[str, str]]:
        """Finish incoming files a restart interrupted: fetch them, ``record`` their
        nuntius (not answered: Caesar is told, and ``/retry`` runs it). A file that
        cannot be fetched for now (``DownloadLater``) keeps its whole message pending for
        the next start; one refused for good is dropped and its message recorded with the
        rest. Returns (origin, line for Caesar) for each file dropped."""
        await asyncio.to_thread(self.files.clean_temp)
        messages: dict[str, list[PendingFile]] = {}
        for pending in await self.store.pending():
            messages.setdefault(pending.origin, []).append(pending)
        stored, dropped = 0, []
        for origin, parts in messages.items():
            if await self.praetorium.get_by_origin(origin) is not None:
                await self.store.drop_pending(origin)
                continue
            try:
                lost = await self._finish(parts, fetch)
            except DownloadLater as e:
                logger.warning("%s; trying again at the next start", e)
                continue
            dropped += [(origin, line) for line in lost]
            text = "\n".join(p.text for p in parts if p.text)  # an album's captions
            asks = len(lost) < len(parts) or text.strip()  # something left to ask
            if asks and await record(dataclasses.replace(parts[0], text=text)):
                stored += 1
        if stored:
            logger.info("finished %d download(s) a restart interrupted", stored)
        return dropped

    async def _finish(self, parts: list[PendingFile], fetch: Fetch) -> list[str]:
        """Download what is missing of one message's files; a line per file refused for
        good (dropped). ``DownloadLater`` propagates: nothing is dropped then."""
        refused: list[tuple[PendingFile, AttachmentError]] = []
        for pending in parts:
            if pending.sha256 is not None and self.files.find(
                pending.sha256, pending.name, pending.mime_type
            ):
                continue
            try:
                await self.download(pending, fetch)
            except DownloadLater:
                raise
            except AttachmentError as e:
                refused.append((pending, e))
        for pending, _ in refused:
            await self.store.drop_pending(pending.origin, pending.part)
        return [f"{e} (after a restart)" for _, e in refused]


def take_local_file(files: FileStore, raw: str, text: str) -> PendingFile:
    """A file from this machine (the console's ``/attach``), stored like a Telegram upload."""
    path = Path(os.path.expanduser(raw))
    if not path.is_file():
        raise AttachmentError(f"{raw} is not a file: give the path of an existing file")
    size = path.stat().st_size
    if size > DOWNLOAD_LIMIT:
        raise AttachmentError(  # the console's own limit, said as such
            f"{path.name} is {megabytes(size)}; the console takes files up to "
            f"{DOWNLOAD_LIMIT // 2**20} MB, as Telegram would"
        )
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
