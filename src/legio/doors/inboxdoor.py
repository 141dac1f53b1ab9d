"""``InboxDoor``: what comes in beside words, through the door: Caesar's files (recorded
before their download, fetched, finished after a restart; the console's local files) and
voice notes heard. ``LegioApp.inbox``; the front-end parts that take files are given it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from legio.engine import Engine
from legio.legatus.intake import Fetch, take_local_file
from legio.media.voice import Progress, Transcript
from legio.request import PendingFile


class InboxDoor:
    """Files and voice notes, for the front-ends."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def accept_file(self, pending: PendingFile) -> PendingFile | None:
        """Record a file of Caesar's message ``pending.origin`` before its download (a
        restart finishes it): None if that message is already stored. Raises
        ``AttachmentError`` (one line for Caesar) if it is refused; nothing is kept then."""
        return await self.engine.intake.accept(pending)

    async def fetch_files(
        self, files: Sequence[PendingFile], fetch: Fetch
    ) -> tuple[list[PendingFile], list[str]]:
        """Download accepted files (one message's, or an album's): those complete, for
        ``handle_message``, and a line for Caesar per file refused."""
        return await self.engine.intake.fetch_all(files, fetch)

    async def resume_downloads(self, fetch: Fetch) -> list[tuple[str, str]]:
        """At start-up: finish the files a restart cut off and store their messages,
        unanswered (``notice_interruptions`` then reports them). Returns (origin, line
        for Caesar) for each file that could not be fetched for good and was dropped."""
        return await self.engine.intake.resume(fetch, self.engine.legatus.record)

    async def attach_local(self, path: str, text: str = "") -> PendingFile:
        """A file of this machine, stored for ``handle_message`` (``AttachmentError``)."""
        return await asyncio.to_thread(take_local_file, self.engine.sessions.files, path, text)

    def hears(self, file: PendingFile) -> bool:
        """Whether ``file`` is a voice note or audio Legio transcribes."""
        return self.engine.voice.hears(file)

    async def transcribe(self, file: PendingFile, progress: Progress | None = None) -> Transcript:
        """``file``'s words (``VoiceError`` with a line for Caesar when it cannot)."""
        return await self.engine.voice.transcribe(file, progress)
