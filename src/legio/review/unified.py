"""Git's unified diff, as bytes, read into typed file records without ever reading more
than is needed.

The input is ``git diff --no-ext-diff --no-textconv -M`` output (a ``--stat`` before it is
skipped), perhaps cut short, perhaps with invalid UTF-8. ``files`` finds each file's
section with ``bytes.find`` (C speed: a 50 MB file costs one scan) and reads only its
header lines: names (C-quoted names unquoted: a newline or a bidi character in a name
comes through, to be shown visibly later), status, modes, binary, submodule; its ``+``/``-``
counts come from ``bytes.count`` over its body, never a Python loop. ``hunks`` reads one
file's lines, and stops at a limit: a huge file is never read line by line.

Text is decoded as UTF-8 with ``surrogateescape``: an invalid byte becomes U+DC80–U+DCFF
and is shown as ``⟨0xFF⟩`` by ``colouring.shown``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SECTION = b"\ndiff --"
MAX_HEADER_LINES = 40  # a file's header is a handful of lines; more is not a header
GITLINK = "160000"
HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
ESCAPES = {
    ord("a"): 7,
    ord("b"): 8,
    ord("t"): 9,
    ord("n"): 10,
    ord("v"): 11,
    ord("f"): 12,
    ord("r"): 13,
    ord('"'): 34,
    ord("\\"): 92,
}
PREFIXES = (b"a/", b"b/", b"c/", b"i/", b"w/", b"o/")  # default and mnemonic prefixes


def decode(raw: bytes) -> str:
    """UTF-8, an invalid byte kept as a lone surrogate (U+DC80–U+DCFF) to be shown as such."""
    return raw.decode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a hunk: ``kind`` is ``+``, ``-`` or a space (context)."""

    kind: str
    old: int | None  # its number in the old file (None for an added line)
    new: int | None  # its number in the new file (None for a removed line)
    text: str
    no_newline: bool = False  # git said "\\ No newline at end of file" after it


@dataclass(frozen=True, slots=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    section: str  # what git names after the second @@ (the function it is in)
    lines: tuple[Line, ...]


@dataclass(slots=True)
class FileDiff:
    """One file's part of a diff: what its header says and where its body lies in the
    diff's bytes (``hunks`` reads it)."""

    old_path: str  # "" for an added file
    new_path: str  # "" for a deleted file
    status: str = "modified"  # added, deleted, modified, renamed, copied
    old_mode: str = ""
    new_mode: str = ""
    binary: bool = False
    submodule: bool = False
    submodule_commit: str = ""  # the commit a submodule names now
    combined: bool = False  # a merge's combined diff (diff --cc): not drawn
    similarity: int = 100
    added: int = 0
    removed: int = 0
    start: int = 0  # the section's bytes in the diff: [start, end)
    body: int = -1  # where its first "@@" line starts (-1: no hunks)
    end: int = 0
    order: int = 0  # its place in git's output

    @property
    def path(self) -> str:
        """The name it has now (the old one for a deleted file)."""
        return self.new_path or self.old_path

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def mode_changed(self) -> bool:
        return bool(self.old_mode and self.new_mode and self.old_mode != self.new_mode)

    @property
    def has_text(self) -> bool:
        return self.body >= 0 and not (self.binary or self.submodule or self.combined)


@dataclass(slots=True)
class Hunks:
    """A file's hunks as read: ``complete`` is False when a limit stopped the reading."""

    hunks: list[Hunk] = field(default_factory=list)
    lines: int = 0
    complete: bool = True


def sections(diff: bytes, limit: int) -> tuple[list[tuple[int, int]], int]:
    """Where each file's section lies: the first ``limit`` as (start, end), and how many
    there are in all."""
    found: list[tuple[int, int]] = []
    pos = 0 if diff.startswith(b"diff --") else diff.find(SECTION)
    if pos > 0:
        pos += 1
    count = 0
    while pos >= 0:
        nxt = diff.find(SECTION, pos)
        end = len(diff) if nxt < 0 else nxt + 1
        count += 1
        if len(found) < limit:
            found.append((pos, end))
        pos = nxt + 1 if nxt >= 0 else -1
    return found, count


def files(diff: bytes, limit: int = 20_000) -> tuple[list[FileDiff], int]:
    """The first ``limit`` files of ``diff`` (their headers read, lines counted) and how
    many files it holds in all."""
    spans, count = sections(diff, limit)
    out = [_header(diff, start, end, i) for i, (start, end) in enumerate(spans)]
    return out, count


def _lines(diff: bytes, pos: int, end: int) -> tuple[bytes, int]:
    """The line at ``pos`` (without its newline) and where the next one starts."""
    nl = diff.find(b"\n", pos, end)
    if nl < 0:
        return diff[pos:end], end
    return diff[pos:nl], nl + 1


def unquote(raw: bytes) -> tuple[bytes, bytes]:
    """A C-quoted name at the start of ``raw`` (git's quoting of odd names): the name and
    what follows it. ``raw`` that does not start with a quote is returned as the name."""
    if not raw.startswith(b'"'):
        return raw, b""
    out = bytearray()
    i, n = 1, len(raw)
    while i < n:
        c = raw[i]
        if c == ord('"'):
            return bytes(out), raw[i + 1 :]
        if c == ord("\\") and i + 1 < n:
            nxt = raw[i + 1]
            if ord("0") <= nxt <= ord("7"):
                digits = raw[i + 1 : i + 4]
                octal = re.match(rb"[0-7]{1,3}", digits)
                text = octal.group(0) if octal else b"0"
                out.append(int(text, 8) & 0xFF)
                i += 1 + len(text)
                continue
            out.append(ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out), b""  # no closing quote: the rest is the name


def _strip(name: bytes, prefixes: tuple[bytes, ...]) -> bytes:
    for prefix in prefixes:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _side(raw: bytes, prefixes: tuple[bytes, ...]) -> str:
    """A name from a ``---``/``+++``/``rename`` line: unquoted, its prefix and git's tab
    after a name with a space taken off; ``/dev/null`` is ""."""
    if raw.startswith(b'"'):
        name, _ = unquote(raw)
    else:
        name = raw[:-1] if raw.endswith(b"\t") else raw
    if name == b"/dev/null":
        return ""
    return decode(_strip(name, prefixes))


def _git_line(rest: bytes) -> tuple[str, str]:
    """Both names of a ``diff --git a/x b/y`` line (best effort: the ``---``/``+++`` and
    ``rename`` lines, when there are any, say them for certain)."""
    if rest.startswith(b'"'):
        old, after = unquote(rest)
        after = after.lstrip(b" ")
        new = unquote(after)[0] if after.startswith(b'"') else after
    elif b' "' in rest:
        old, _, tail = rest.partition(b' "')
        new = unquote(b'"' + tail)[0]
    else:
        half = (len(rest) - 1) // 2  # "a/P b/P": both halves alike
        old, new = rest[:half], rest[half + 1 :]
        if old[2:] != new[2:]:
            old, _, new = rest.partition(b" b/")
            new = b"b/" + new
    return decode(_strip(old, PREFIXES)), decode(_strip(new, PREFIXES))


def _header(diff: bytes, start: int, end: int, order: int) -> FileDiff:
    first, pos = _lines(diff, start, end)
    f = FileDiff(old_path="", new_path="", start=start, end=end, order=order)
    if first.startswith((b"diff --cc ", b"diff --combined ")):
        f.combined = True
        f.old_path = f.new_path = decode(first.split(b" ", 2)[-1])
        f.body = diff.find(b"\n@@@", start, end) + 1 or -1
        return f
    f.old_path, f.new_path = _git_line(first[len(b"diff --git ") :])
    for _ in range(MAX_HEADER_LINES):
        if pos >= end:
            break
        if diff.startswith(b"@@", pos):
            f.body = pos
            break
        line, nxt = _lines(diff, pos, end)
        _read_header_line(f, line)
        pos = nxt
        if line.startswith(b"GIT binary patch"):
            break
    if f.body >= 0:
        if f.submodule:
            f.added, f.removed = 1 if f.new_path else 0, 1 if f.old_path else 0
            at = diff.find(b"\n+Subproject commit ", f.body - 1, end)
            if at >= 0:
                commit = _lines(diff, at + 1, end)[0][len(b"+Subproject commit ") :]
                f.submodule_commit = decode(commit[:40])
        else:
            f.added = diff.count(b"\n+", f.body - 1, end)
            f.removed = diff.count(b"\n-", f.body - 1, end)
    return f


def _read_header_line(f: FileDiff, line: bytes) -> None:
    word, _, rest = line.partition(b" ")
    if line.startswith(b"--- "):
        if line[4:] == b"/dev/null":
            f.status = "added"
            f.old_path = ""
        else:
            f.old_path = _side(line[4:], (b"a/", b"c/", b"i/", b"w/", b"o/"))
    elif line.startswith(b"+++ "):
        if line[4:] == b"/dev/null":
            f.status = "deleted"
            f.new_path = ""
        else:
            f.new_path = _side(line[4:], (b"b/", b"c/", b"i/", b"w/", b"o/"))
    elif line.startswith(b"new file mode "):
        f.status, f.old_path, f.new_mode = "added", "", decode(line[14:])
    elif line.startswith(b"deleted file mode "):
        f.status, f.new_path, f.old_mode = "deleted", "", decode(line[18:])
    elif line.startswith(b"old mode "):
        f.old_mode = decode(line[9:])
    elif line.startswith(b"new mode "):
        f.new_mode = decode(line[9:])
    elif line.startswith((b"rename from ", b"copy from ")):
        f.status = "renamed" if word == b"rename" else "copied"
        f.old_path = _side(line.split(b" ", 2)[2], ())
    elif line.startswith((b"rename to ", b"copy to ")):
        f.new_path = _side(line.split(b" ", 2)[2], ())
    elif line.startswith((b"similarity index ", b"dissimilarity index ")):
        digits = line.rsplit(b" ", 1)[-1].rstrip(b"%")
        f.similarity = int(digits) if digits.isdigit() else 0
    elif word == b"index":
        modes = rest.split(b" ")
        if len(modes) > 1 and modes[1] == GITLINK.encode():
            f.submodule = True
    elif line.startswith((b"Binary files ", b"GIT binary patch")):
        f.binary = True
    if GITLINK in (f.old_mode, f.new_mode):
        f.submodule = True


def hunks(diff: bytes, f: FileDiff, max_lines: int) -> Hunks:
    """``f``'s hunks, at most ``max_lines`` lines of them (``complete`` False past it)."""
    out = Hunks()
    if f.body < 0:
        return out
    pos, end = f.body, f.end
    while pos < end:
        header, pos = _lines(diff, pos, end)
        match = HUNK.match(header)
        if match is None:
            break
        old_no, new_no = int(match.group(1)), int(match.group(3))
        old_left = int(match.group(2) or b"1")
        new_left = int(match.group(4) or b"1")
        lines: list[Line] = []
        while pos < end and (old_left > 0 or new_left > 0 or diff.startswith(b"\\", pos)):
            if out.lines >= max_lines:
                out.complete = False
                break
            raw, pos = _lines(diff, pos, end)
            kind = raw[:1]
            text = decode(raw[1:])
            if kind == b"\\":
                if lines:
                    last = lines[-1]
                    lines[-1] = Line(last.kind, last.old, last.new, last.text, True)
                continue
            out.lines += 1
            if kind == b"+":
                lines.append(Line("+", None, new_no, text))
                new_no, new_left = new_no + 1, new_left - 1
            elif kind == b"-":
                lines.append(Line("-", old_no, None, text))
                old_no, old_left = old_no + 1, old_left - 1
            else:  # a context line (an empty one: a tool took its space off)
                lines.append(Line(" ", old_no, new_no, text))
                old_no, new_no = old_no + 1, new_no + 1
                old_left, new_left = old_left - 1, new_left - 1
        out.hunks.append(
            Hunk(
                int(match.group(1)),
                int(match.group(2) or b"1"),
                int(match.group(3)),
                int(match.group(4) or b"1"),
                decode(match.group(5)),
                tuple(lines),
            )
        )
        if not out.complete:
            break
    if pos < end and out.complete and diff.find(b"\n@@", pos - 1, end) >= 0:
        out.complete = False  # something unreadable stopped it
    return out
