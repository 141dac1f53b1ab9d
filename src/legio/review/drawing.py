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
from dataclasses import dataclass

from PIL import Image, ImageDraw

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
    """One page being drawn: the image, and the colour pairs used (for the palette)."""

    def __init__(self, height: int) -> None:
        self.image = Image.new("RGB", (WIDTH, height), WHITE)
        self.draw = ImageDraw.Draw(self.image)
        self.solids: set[RGB] = {WHITE}
        self.pairs: set[tuple[RGB, RGB]] = set()

    def fill(self, box: tuple[int, int, int, int], colour: RGB) -> None:
        self.draw.rectangle(box, fill=colour)
        self.solids.add(colour)

    def text(self, x: int, y: int, mask: Image.Image, colour: RGB, under: RGB) -> None:
        self.image.paste(colour, (x - PAD, y), mask)
        self.solids.add(colour)
        self.pairs.add((under, colour))

    def png(self) -> bytes:
        """The page as an 8-bit PNG on its own palette."""
        solids = sorted(self.solids)
        pairs = sorted(self.pairs)
        room = 256 - len(solids)
        blends = max(0, min(MAX_BLENDS, room // max(1, len(pairs))))
        colours = list(solids)
        for under, over in pairs:
            for k in range(1, blends + 1):
                a = k / (blends + 1)
                blend = (
                    round(under[0] * (1 - a) + over[0] * a),
                    round(under[1] * (1 - a) + over[1] * a),
                    round(under[2] * (1 - a) + over[2] * a),
                )
                if all(
                    max(abs(p - q) for p, q in zip(blend, s, strict=True)) >= NEAR for s in solids
                ):
                    colours.append(blend)
        colours = colours[:256]
        colours += [colours[0]] * (256 - len(colours))
        palette = Image.new("P", (1, 1))
        palette.putpalette([v for c in colours for v in c])
        out = io.BytesIO()
        self.image.quantize(palette=palette, dither=Image.Dither.NONE).save(
            out, "PNG", compress_level=3
        )
        return out.getvalue()


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
    plus, minus = f"+{heading.added:,}", f"−{heading.removed:,}"
    tail = len(plus) + 1 + len(minus) + (len(right) + 2 if right else 0)
    room = (WIDTH - 2 * MARGIN) // face.advance - tail - 2
    x = MARGIN + PAD
    page.text(x, y, face.mask(_elide(heading.path, room), bold=True), TEXT, HEADER_BG)
    x = WIDTH - MARGIN - tail * face.advance
    page.text(x, y, face.mask(plus, bold=True), ADD_FG, HEADER_BG)
    x += (len(plus) + 1) * face.advance
    page.text(x, y, face.mask(minus, bold=True), DEL_FG, HEADER_BG)
    if right:
        x += (len(minus) + 2) * face.advance
        page.text(x, y, face.mask(right), GREY, HEADER_BG)


def _row(page: Page, row: Row, y: int, geo: Geometry, face: Typeface, small: Typeface) -> None:
    code_bg, gutter_bg = BACKGROUNDS.get(row.kind, (WHITE, WHITE))
    if code_bg != WHITE:
        page.fill((0, y, geo.gutter - 1, y + ROW - 1), gutter_bg)
        page.fill((geo.gutter, y, WIDTH, y + ROW - 1), code_bg)
    number_y = y + (face.row - small.row) // 2
    for value, field in ((row.old, 0), (row.new, geo.digits + 1)):
        if value is not None:
            digits = str(value)
            x = MARGIN + (field + geo.digits - len(digits)) * geo.small_advance
            page.text(x, number_y, small.mask(digits), GREY, gutter_bg)
    marker = MARKERS.get(row.kind)
    if marker and row.first:
        page.text(geo.gutter + geo.advance // 2, y, face.mask(marker[0]), marker[1], code_bg)
    col = 0
    for text, ttype, mark in row.runs:
        x = geo.code_x + col * geo.advance
        col += len(text)
        if mark:
            page.fill((x, y + 3, x + len(text) * geo.advance - 1, y + ROW - 4), colouring.MARK_CHIP)
            page.text(x, y, face.mask(text), colouring.MARK_COLOUR, colouring.MARK_CHIP)
            continue
        stripped = text.lstrip(" ")
        if not stripped.strip():
            continue
        x += (len(text) - len(stripped)) * geo.advance
        fg, bold = colouring.colour(ttype)
        if row.kind == HUNK:
            fg, bold = GREY, False
        page.text(x, y, face.mask(stripped.rstrip(" "), bold), fg, code_bg)


def draw(
    heading: Heading, rows: list[Row], digits: int, face: Typeface, small: Typeface
) -> tuple[bytes, int]:
    """One page: its PNG and its height."""
    height = HEADER + len(rows) * ROW + BOTTOM
    page = Page(height)
    geo = Geometry(face.advance, small.advance, digits)
    _header(page, heading, face)
    for i, row in enumerate(rows):
        _row(page, row, HEADER + i * ROW, geo, face, small)
    return page.png(), height
