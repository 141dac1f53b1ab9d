"""A check's output on its way, never held whole: to its log file (cut at a size, with a
marker), through the runner's count reader (``legio.projects.tally``, linear in each
line), and into a ring of its last lines (each cut at ``LINE_CHARS``, colours stripped)
that becomes the run's tail. A chunk is read without a Python loop over its lines (a
check printing blank lines would pin the daemon's CPU): its lines counted, only those
the count reader's ``HINT`` finds read, only its last ``TAIL_LINES`` kept. A line without
an end is cut past ``PARTIAL_BYTES``: a check printing one endless line holds no more.
``write`` runs in a worker thread (``Checks`` hands it each chunk), never on the daemon's
event loop. ``remove_tree`` empties a check's temporary folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import threading
from collections import deque
from pathlib import Path

from legio.projects.tally import ANSI, HINT, READ, TallyReader

MAX_LOG_BYTES = 5 * 1024 * 1024  # a check's log file stops growing here
TAIL_LINES = 60
TAIL_CHARS = 8000  # the tail as stored and shown: its last characters
LINE_CHARS = 500  # a longer line is cut in the tail (the log has it whole)
LINE_BYTES = 4 * LINE_CHARS  # what the ring keeps of a line (UTF-8, colour codes)
PARTIAL_BYTES = 64 * 1024  # a line without a newline is cut past this
NOT_BLANK = re.compile(rb"[^ \t\r\n\f\v]")


class CheckOutput:
    """A check's output on its way: to the log (bounded), the count reader, the tail ring."""

    def __init__(self, log: Path, max_bytes: int) -> None:
        self.file = log.open("wb")
        self.max_bytes = max_bytes
        self.written = 0
        self.cut = False
        self.tally = TallyReader()
        self.ring: deque[tuple[bytes, bool]] = deque(maxlen=TAIL_LINES)  # (start, was cut)
        self.first = b""  # its first line's start (bubblewrap's own error, if it failed)
        self.lines = 0
        self._partial = bytearray()
        self._skipping = False  # inside a line already cut
        self._lock = threading.Lock()  # written from a worker thread, closed from the loop

    def write(self, chunk: bytes) -> None:
        """Take one chunk (called off the event loop: ``Checks`` hands each to a thread)."""
        with self._lock:
            self._write(chunk)

    def _write(self, chunk: bytes) -> None:
        if self.file.closed:
            return  # the run already ended (a write still on its way from the thread)
        if not self.cut:
            room = self.max_bytes - self.written
            self.file.write(chunk[:room])
            self.written += min(len(chunk), room)
            if len(chunk) > room:
                self.cut = True
                mark = f"\n… cut: the log stops at {self.max_bytes // 1024} KB; the rest "
                mark += "of the output was not kept (its last lines are in the tail)\n"
                self.file.write(mark.encode())
        self._lines(chunk)

    def _lines(self, chunk: bytes) -> None:
        """The chunk's lines, without a loop over them: the one it ends (with what came
        before), then the whole ones between its first and last newline, counted; only
        those that may hold a count (``HINT``) read, only the last ``TAIL_LINES`` kept."""
        end = chunk.find(b"\n")
        if end < 0:
            self._take(chunk)
            return
        self._take(chunk[:end])
        self._line(bytes(self._partial), self._skipping)
        self._partial.clear()
        self._skipping = False
        last = chunk.rfind(b"\n")
        if last > end:
            self._whole(chunk, end + 1, last)
        self._take(chunk[last + 1 :])

    def _whole(self, chunk: bytes, start: int, stop: int) -> None:
        """The whole lines of ``chunk[start:stop]`` (``chunk[stop]`` is a newline; each
        is shorter than ``PARTIAL_BYTES``: a chunk is no longer)."""
        self.lines += chunk.count(b"\n", start, stop) + 1
        pos = start
        while pos <= stop:
            waiting = self.tally.waiting  # unittest's OK / FAILED: the next line not blank
            found = (NOT_BLANK if waiting else HINT).search(chunk, pos, stop)
            if found is None:
                break
            begin = chunk.rfind(b"\n", start, found.start()) + 1 or start
            finish = chunk.find(b"\n", found.end(), stop)
            finish = stop if finish < 0 else finish
            if waiting or found.end() - begin <= READ * 2:
                self.tally.feed(chunk[begin:finish].decode("utf-8", "replace"))
            pos = finish + 1
        ends = [stop]
        while len(ends) <= TAIL_LINES:
            before = chunk.rfind(b"\n", start, ends[-1])
            if before < 0:
                break
            ends.append(before)
        begins = [e + 1 for e in ends[1:]]
        if len(ends) <= TAIL_LINES:
            begins.append(start)  # the region's first line is among the last ones
        for begin, finish in reversed(list(zip(begins, ends, strict=False))):
            size = finish - begin
            self.ring.append((chunk[begin : begin + min(size, LINE_BYTES)], size > LINE_BYTES))

    def _take(self, piece: bytes) -> None:
        if self._skipping:
            return
        room = PARTIAL_BYTES - len(self._partial)
        self._partial += piece[:room]
        if len(piece) > room:
            self._skipping = True

    def _line(self, raw: bytes, cut: bool) -> None:
        """One whole line: to the count reader when it may hold a count, into the ring
        (its start only: decoded when the tail is read)."""
        if not self.lines:
            self.first = raw[:LINE_BYTES]
        self.lines += 1
        if self.tally.wants(raw):
            self.tally.feed(raw.decode("utf-8", "replace"))
        self.ring.append((raw[:LINE_BYTES], cut or len(raw) > LINE_BYTES))

    def close(self) -> None:
        with self._lock:
            if self.file.closed:
                return
            if self._partial or self._skipping:
                self._line(bytes(self._partial), self._skipping)
                self._partial.clear()
                self._skipping = False
            self.file.close()

    @property
    def tail(self) -> str:
        """The last lines, colours stripped, each cut at ``LINE_CHARS`` (`` …`` marks a
        cut line), the whole at most ``TAIL_CHARS``."""
        lines = []
        for raw, cut in self.ring:
            text = ANSI.sub("", raw.decode("utf-8", "replace"))
            cut = cut or len(text) > LINE_CHARS
            lines.append(text[:LINE_CHARS] + (" …" if cut else ""))
        text = "\n".join(lines)
        return text if len(text) <= TAIL_CHARS else "…" + text[-(TAIL_CHARS - 1) :]


def remove_tree(folder: Path) -> None:
    """``folder`` and all in it, read-only folders too (a Go module cache); never
    through a link."""
    if not folder.exists() and not folder.is_symlink():
        return
    if folder.is_symlink() or not folder.is_dir():
        folder.unlink()
        return
    for root, dirs, _ in os.walk(folder):
        for name in dirs:
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(path).st_mode):
                    os.chmod(path, 0o700)
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o700)
    shutil.rmtree(folder, ignore_errors=True)
