"""A page of a file's rows drawn as a PNG a phone shows at full width.

The page is 1080 px wide and at most 1280 px high: Telegram keeps a photo at most 1280 px
on its long side, so a taller page would reach the phone shrunk and need zooming. Code is
DejaVu Sans Mono at 24 px (a 14 px cell), 64 columns: shown across a phone's width, that is
text the size of the phone's own small print (about 8.5 pt on a 390 pt-wide screen),
readable without zooming; 64 columns hold most lines of indented code, and longer ones
wrap. A header band names the file (its path, ``+N −M``, the page), the gutter holds the
old and the new line numbers (18 px, grey), then ``+``/``−`` and the code: added lines on a
green tint, removed on a red one, hunk headers on blue, marks on an amber chip.

Speed: each distinct run of text is drawn once (``Typeface.mask``) and pasted in its
colour; the page is then mapped onto a palette made of its own colours and their blends
(no dithering: flat colours stay exact) and written as an 8-bit PNG, which is several
times faster to write and smaller than RGB.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from functools import lru_cache

from PIL import Image, ImageDraw
from pygments.token import Token

from legio.review import colouring
from legio.review.layout import (
    ADDED,
    BOTTOM,
    HEADER,
    HUNK,
    MARGIN,
    REMOVED,
    ROW,
    WIDTH,
    Geometry,
    Row,
)
from legio.review.typeface import PAD, Typeface

RGB = tuple[int, int, int]
WHITE: RGB = (255, 255, 255)
TEXT: RGB = (0x1F, 0x23, 0x28)
GREY: RGB = (0x6E, 0x77, 0x81)
ADD_BG: RGB = (0xE6, 0xFF, 0xEC)
ADD_GUTTER: RGB = (0xCC, 0xFF, 0xD8)
ADD_FG: RGB = (0x1A, 0x7F, 0x37)
DEL_BG: RGB = (0xFF, 0xEB, 0xE9)
DEL_GUTTER: RGB = (0xFF, 0xD7, 0xD5)
DEL_FG: RGB = (0xCF, 0x22, 0x2E)
HUNK_BG: RGB = (0xDD, 0xF4, 0xFF)
HEADER_BG: RGB = (0xF6, 0xF8, 0xFA)
RULE: RGB = (0xD0, 0xD7, 0xDE)
BACKGROUNDS = {ADDED: (ADD_BG, ADD_GUTTER), REMOVED: (DEL_BG, DEL_GUTTER), HUNK: (HUNK_BG,) * 2}
MARKERS = {ADDED: ("+", ADD_FG), REMOVED: ("−", DEL_FG)}
MAX_BLENDS = 7  # shades between a background and a text colour, when the palette has room
# Pillow maps a pixel to the palette through a cache of 4-unit cells: a shade this close to
# a flat colour could steal its pixels, so none is kept (flat colours then stay exact)
NEAR = 10


@dataclass(frozen=True, slots=True)
class Heading:
    """What a page's header band says."""

    path: str  # shown (marks made)
    added: int
    removed: int
    page: int
    pages: int


class Page:
    """One page being drawn (RGB), then written as an 8-bit PNG (``png``, which another
    thread may run: Pillow lets go of the GIL while it maps and compresses)."""

    def __init__(self, height: int) -> None:
        self.image = Image.new("RGB", (WIDTH, height), WHITE)
        self.draw = ImageDraw.Draw(self.image)

    def fill(self, box: tuple[int, int, int, int], colour: RGB) -> None:
        self.draw.rectangle(box, fill=colour)

    def text(self, x: int, y: int, mask: Image.Image, colour: RGB) -> None:
        self.image.paste(colour, (x - PAD, y), mask)

    def png(self) -> bytes:
        """The page as an 8-bit PNG on its own palette."""
        out = io.BytesIO()
        self.image.quantize(palette=_palette(), dither=Image.Dither.NONE).save(
            out, "PNG", compress_level=3
        )
        return out.getvalue()


@lru_cache(maxsize=1)
def _palette() -> Image.Image:
    """One palette for every page: the flat colours, then shades between each text colour
    and each background it is drawn on, as many as fit in 256."""
    codes = {colouring.colour(ttype)[0] for ttype in colouring.PhoneStyle.styles}
    codes |= {TEXT, GREY, ADD_FG, DEL_FG}
    pairs = {(bg, fg) for bg in (WHITE, ADD_BG, DEL_BG) for fg in codes}
    pairs |= {(bg, GREY) for bg in (ADD_GUTTER, DEL_GUTTER, HUNK_BG)}
    pairs |= {(HEADER_BG, fg) for fg in (TEXT, GREY, ADD_FG, DEL_FG)}
    pairs.add((colouring.MARK_CHIP, colouring.MARK_COLOUR))
    solids = sorted({c for pair in pairs for c in pair} | {RULE})
    blends = max(0, min(MAX_BLENDS, (256 - len(solids)) // len(pairs)))
    colours = list(solids)
    for under, over in sorted(pairs):
        for k in range(1, blends + 1):
            a = k / (blends + 1)
            blend = (
                round(under[0] * (1 - a) + over[0] * a),
                round(under[1] * (1 - a) + over[1] * a),
                round(under[2] * (1 - a) + over[2] * a),
            )
            if all(max(abs(p - q) for p, q in zip(blend, s, strict=True)) >= NEAR for s in solids):
                colours.append(blend)
    colours = colours[:256]
    colours += [colours[0]] * (256 - len(colours))
    palette = Image.new("P", (1, 1))
    palette.putpalette([v for c in colours for v in c])
    return palette


def _elide(text: str, room: int) -> str:
    if len(text) <= room:
        return text
    head = max(1, room // 3)
    return text[:head] + "…" + text[len(text) - (room - head - 1) :]


def _header(page: Page, heading: Heading, face: Typeface) -> None:
    page.fill((0, 0, WIDTH, HEADER - 1), HEADER_BG)
    page.fill((0, HEADER - 1, WIDTH, HEADER), RULE)
    y = (HEADER - ROW) // 2
    right = f"{heading.page}/{heading.pages}" if heading.pages > 1 else ""
    plus, minus = f"+{heading.added:,}", f"{face.minus}{heading.removed:,}"
    tail = len(plus) + 1 + len(minus) + (len(right) + 2 if right else 0)
    room = (WIDTH - 2 * MARGIN) // face.advance - tail - 2
    x = MARGIN + PAD
    path = colouring.shown([(heading.path, Token.Text)], face.has, (face.open, face.close))
    shown = _elide("".join(text for text, _, _ in path), room)
    marks = re.compile(
        f"{re.escape(face.open)}(?:U\\+[0-9A-F]{{4,6}}|0x[0-9A-F]{{2}}){re.escape(face.close)}"
    )
    col = 0
    for part in marks.split(shown):  # marks as in the code: on a chip, not in bold
        if part:
            page.text(x + col * face.advance, y, face.mask(part, bold=True), TEXT)
            col += len(part)
        found = marks.match(shown, col)
        if found:
            mark = found.group(0)
            left = x - PAD + col * face.advance
            right_x = left + len(mark) * face.advance - 1
            page.fill((left, y + 3, right_x, y + ROW - 4), colouring.MARK_CHIP)
            page.text(x + col * face.advance, y, face.mask(mark), colouring.MARK_COLOUR)
            col += len(mark)
    x = WIDTH - MARGIN - tail * face.advance
    page.text(x, y, face.mask(plus, bold=True), ADD_FG)
    x += (len(plus) + 1) * face.advance
    page.text(x, y, face.mask(minus, bold=True), DEL_FG)
    if right:
        x += (len(minus) + 2) * face.advance
        page.text(x, y, face.mask(right), GREY)


def _row(page: Page, row: Row, y: int, geo: Geometry, face: Typeface, small: Typeface) -> None:
    code_bg, gutter_bg = BACKGROUNDS.get(row.kind, (WHITE, WHITE))
    if code_bg != WHITE:
        page.fill((0, y, geo.gutter - 1, y + ROW - 1), gutter_bg)
        page.fill((geo.gutter, y, WIDTH, y + ROW - 1), code_bg)
    number_y = y + (face.row - small.row) // 2
    for value, field in ((row.old, 0), (row.new, geo.digits + 1)):
        if value is not None:
            digits = str(value)
            if len(digits) > geo.digits:
                digits = "…" + digits[-(geo.digits - 1) :]
            x = MARGIN + (field + geo.digits - len(digits)) * geo.small_advance
            page.text(x, number_y, small.mask(digits), GREY)
    marker = MARKERS.get(row.kind)
    if marker and row.first:
        sign = face.minus if marker[0] == "−" else marker[0]
        page.text(geo.gutter + geo.advance // 2, y, face.mask(sign), marker[1])
    for col, text, look in _spans(row):
        x = geo.code_x + col * geo.advance
        if look is None:
            page.fill((x, y + 3, x + len(text) * geo.advance - 1, y + ROW - 4), colouring.MARK_CHIP)
            page.text(x, y, face.mask(text), colouring.MARK_COLOUR)
        else:
            page.text(x, y, face.mask(text, look[1]), look[0])


def _spans(row: Row) -> list[tuple[int, str, tuple[RGB, bool] | None]]:
    """A row's runs joined where they share a colour (spaces join either side): each
    span's column, text and (colour, bold), None for a mark. Fewer, longer pastes."""
    out: list[tuple[int, str, tuple[RGB, bool] | None]] = []
    col = 0
    start, text, look = 0, "", None
    for run, ttype, mark in row.runs:
        if mark:
            if text.strip():
                out.append((start, text, look))
            out.append((col, run, None))
            col += len(run)
            start, text, look = col, "", None
            continue
        if run.isspace():
            if text:
                text += run
            else:
                start = col + len(run)
            col += len(run)
            continue
        this = (GREY, False) if row.kind == HUNK else colouring.colour(ttype)
        if text and this != look:
            out.append((start, text, look))
            text = ""
        if not text:
            start, look = col, this
        text += run
        col += len(run)
    if text.strip():
        out.append((start, text, look))
    stripped = []
    for begin, span, how in out:
        lead = len(span) - len(span.lstrip(" "))
        stripped.append((begin + lead, span.strip(" "), how))
    return stripped


def draw(heading: Heading, rows: list[Row], digits: int, face: Typeface, small: Typeface) -> Page:
    """One page drawn (call ``png()`` on it for its bytes)."""
    page = Page(HEADER + len(rows) * ROW + BOTTOM)
    geo = Geometry(face.advance, small.advance, digits)
    _header(page, heading, face)
    for i, row in enumerate(rows):
        _row(page, row, HEADER + i * ROW, geo, face, small)
    return page
