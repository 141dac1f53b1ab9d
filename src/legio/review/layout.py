"""A file's hunks laid out as the rows of its pictures: coloured runs wrapped at the
page's width, line numbers on a line's first row, hunk headers and notes, pages cut at
line starts.

Every bound is here: a line wraps into at most ``MAX_WRAP_ROWS`` rows (then a note says
how much more it holds), a file gets at most ``max_rows`` rows (its hunks are read no
further), a page holds ``ROWS_PER_PAGE`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pygments.lexers.special import TextLexer
from pygments.token import Token

from legio.review import colouring
from legio.review.colouring import MarkedRun
from legio.review.filekinds import says_generated
from legio.review.typeface import Typeface
from legio.review.unified import FileDiff, Hunk, hunks

WIDTH = 1080  # px: a phone's width in pixels, which Telegram keeps (a photo's long side ≤ 1280)
MAX_HEIGHT = 1280  # px: Telegram stores a photo at most 1280 px on its long side
CODE_SIZE, SMALL_SIZE = 24, 18  # px: the code, and the line numbers
ROW = 30  # px
HEADER = 56  # px: the band with the path and +/−
BOTTOM = 8  # px
COLUMNS = 64  # code columns: wrapped past this
ROWS_PER_PAGE = (MAX_HEIGHT - HEADER - BOTTOM) // ROW  # 40
MAX_WRAP_ROWS = 12  # rows one line may take
MIN_DIGITS, MAX_DIGITS = 3, 7  # line numbers' width (a longer one shows its end)
MARGIN = 8  # px left of the numbers and right of the code

ADDED, REMOVED, CONTEXT, HUNK, NOTE = "+", "-", " ", "@", "~"


@dataclass(slots=True)
class Row:
    kind: str  # ADDED, REMOVED, CONTEXT, HUNK or NOTE
    old: int | None = None  # line numbers, on a line's first row only
    new: int | None = None
    runs: list[MarkedRun] = field(default_factory=list)
    first: bool = True  # a line's first row (a page may start here)
    line: int = -1  # which of the file's lines it shows (-1: a hunk header or a note)


@dataclass(slots=True)
class Laid:
    """A file's rows, the width of its line numbers, and what was left out."""

    rows: list[Row]
    digits: int
    complete: bool  # False: a limit left lines out
    generated: bool = False  # its first lines say @generated / DO NOT EDIT
    lines: int = 0  # diff lines laid out
    path: str = ""
    columns: int = COLUMNS
    hunks: list[Hunk] = field(default_factory=list)  # what ``colour`` lexes
    coloured: bool = False


@dataclass(frozen=True, slots=True)
class Geometry:
    """Where things go on a page, for one font and one number width."""

    advance: int
    small_advance: int
    digits: int

    @property
    def gutter(self) -> int:
        """The numbers' columns' width (old, a space, new), margins included."""
        return MARGIN + (2 * self.digits + 1) * self.small_advance + MARGIN

    @property
    def code_x(self) -> int:
        return self.gutter + 2 * self.advance  # the +/− marker and a space

    @property
    def columns(self) -> int:
        return max(16, min(COLUMNS, (WIDTH - self.code_x - MARGIN) // self.advance))


def wrap(runs: list[MarkedRun], columns: int) -> list[list[MarkedRun]]:
    """``runs`` cut into rows of ``columns`` columns (a mark is never split if it fits)."""
    rows: list[list[MarkedRun]] = [[]]
    col = 0
    for text, ttype, mark in runs:
        if mark and col + len(text) > columns >= len(text) and col:
            rows.append([])
            col = 0
        while text:
            room = columns - col
            if room <= 0:
                rows.append([])
                col, room = 0, columns
            piece, text = text[:room], text[room:]
            rows[-1].append((piece, ttype, mark))
            col += len(piece)
    return rows


def _note(text: str, kind: str = NOTE) -> Row:
    return Row(kind, runs=[(text, Token.Comment, False)])


def lay_out(diff: bytes, f: FileDiff, face: Typeface, small: Typeface, max_rows: int) -> Laid:
    """``f``'s hunks as rows, at most ``max_rows`` of them, in plain text: ``colour``
    colours them (later, just before they are drawn: lexing is most of the cost)."""
    read = hunks(diff, f, max_rows)
    top = max((h.old_start + h.old_count for h in read.hunks), default=1)
    top = max([top, *(h.new_start + h.new_count for h in read.hunks)])
    digits = min(MAX_DIGITS, max(MIN_DIGITS, len(str(top))))
    columns = Geometry(face.advance, small.advance, digits).columns
    brackets = (face.open, face.close)
    rows: list[Row] = []
    generated = False
    complete = read.complete
    index = 0
    for hunk in read.hunks:
        if len(rows) >= max_rows:
            complete = False
            break
        header = f"@@ -{hunk.old_start},{hunk.old_count} +{hunk.new_start},{hunk.new_count} @@"
        section = colouring.shown([(hunk.section, Token.Comment)], face.has, brackets)
        title = f"{header} {''.join(r[0] for r in section)}".rstrip()
        rows.append(_note(title[:columns], HUNK))
        for line in hunk.lines:
            if line.kind != REMOVED and (line.new or 99) <= 10 and says_generated(line.text):
                generated = True
            text = line.text[: colouring.MAX_LINE_CHARS]
            pieces = wrap(colouring.shown([(text, Token.Text)], face.has, brackets), columns)
            cut = len(pieces) > MAX_WRAP_ROWS
            for i, piece in enumerate(pieces[:MAX_WRAP_ROWS]):
                first = i == 0
                old, new = (line.old, line.new) if first else (None, None)
                rows.append(Row(line.kind, old, new, piece, first, index))
            index += 1
            more = len(line.text) - colouring.MAX_LINE_CHARS
            if more > 0 or cut:
                said = f"{more:,} more characters" if more > 0 else "more"
                rows.append(_note(f"… this line goes on: {said}", line.kind))
                rows[-1].first = False
            if line.no_newline:
                rows.append(_note("\\ no newline at the end of the file", line.kind))
                rows[-1].first = False
            if len(rows) >= max_rows:
                complete = complete and line is hunk.lines[-1] and hunk is read.hunks[-1]
                break
    laid = Laid(rows[:max_rows], digits, complete, generated, read.lines, f.path, columns)
    laid.hunks = read.hunks
    return laid


def colour(laid: Laid, face: Typeface) -> None:
    """``laid``'s rows coloured by the file's language, in place. A line whose coloured
    rows would not match its plain ones (a lexer splitting a character from its accent)
    stays plain: the pages and their count never change."""
    if laid.coloured:
        return
    laid.coloured = True
    lexer = colouring.lexer_for(laid.path)
    if isinstance(lexer, TextLexer):
        return
    shown: dict[int, list[Row]] = {}
    for row in laid.rows:
        if row.line >= 0:
            shown.setdefault(row.line, []).append(row)
    brackets = (face.open, face.close)
    index = 0
    for hunk in laid.hunks:
        if index > max(shown, default=-1):
            break
        for tokens in colouring.hunk_runs(lexer, hunk):
            rows = shown.get(index)
            index += 1
            if not rows:
                continue
            pieces = wrap(colouring.shown(tokens, face.has, brackets), laid.columns)
            if len(pieces) < len(rows):
                continue
            plain = [sum(len(t) for t, _, _ in row.runs) for row in rows]
            if plain == [sum(len(t) for t, _, _ in piece) for piece in pieces[: len(rows)]]:
                for row, piece in zip(rows, pieces, strict=False):
                    row.runs = piece


def pages(rows: list[Row], per_page: int = ROWS_PER_PAGE) -> list[list[Row]]:
    """``rows`` cut into pages, a page starting where a line starts when the line fits."""
    out: list[list[Row]] = []
    start = 0
    while start < len(rows):
        end = min(start + per_page, len(rows))
        if end < len(rows) and not rows[end].first:
            back = end
            while back > start and not rows[back].first:
                back -= 1
            if back > start and end - back <= MAX_WRAP_ROWS + 1:
                end = back
        out.append(rows[start:end])
        start = end
    return out
