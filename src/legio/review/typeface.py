"""The monospace font pictures are drawn in, loaded so that it never fails, and its text
drawn once per distinct run.

DejaVu Sans Mono (Book and Bold) ships in the package (``fonts/``, with its licence): wide
Unicode coverage (Latin, Greek, Cyrillic, box drawing, arrows, ``⟨⟩``), hinted for small
sizes, free to redistribute. The chain, each step tried when the one before is missing
or unreadable: the vendored files, the system's DejaVu, then Pillow's own
``ImageFont.load_default(size)`` (proportional: drawn cell by cell, slower, still readable).

Layout is Pillow's BASIC engine, never raqm: characters are drawn one cell each, in the
order they are in the file: no bidi reordering or shaping can make a line look other than
it is. A character the font lacks is found by drawing it and comparing with what the font
draws for a code point no font has (U+10FFFD, its ``.notdef`` box): ``has`` tells, and the
caller shows ``⟨U+XXXX⟩`` instead.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageChops, ImageDraw, ImageFont

logger = logging.getLogger(__name__)

VENDORED = Path(__file__).parent / "fonts"
SYSTEM = Path("/usr/share/fonts/truetype/dejavu")
FOLDERS = (VENDORED, SYSTEM)
REGULAR, BOLD = "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf"
NOWHERE = "\U0010fffd"  # a private-use code point no font draws: its .notdef
MAX_MASK_BYTES = 16 * 1024 * 1024  # drawn runs kept; the cache starts over past it
PAD = 2  # pixels left of a run's first cell, for glyphs that overhang their cell

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def _load(name: str, size: int, folders: Sequence[Path]) -> tuple[Font, str]:
    for folder in folders:
        path = folder / name
        try:  # the bytes, not the name: given a name it cannot open, Pillow searches
            data = io.BytesIO(path.read_bytes())  # the system's fonts for one like it
            font = ImageFont.truetype(data, size, layout_engine=ImageFont.Layout.BASIC)
        except (OSError, ValueError) as e:
            logger.debug("font %s not usable: %s", path, e)
            continue
        return font, str(path)
    logger.warning("no DejaVu Sans Mono found in %s: Pillow's own font draws", list(folders))
    return ImageFont.load_default(size), "Pillow's default font"


class Typeface:
    """A font at one size (``regular``, ``bold``), its cell, its glyph check and a cache
    of drawn runs (white on black masks, one row high, to paste in any colour)."""

    def __init__(self, size: int, row: int, folders: Sequence[Path] = FOLDERS) -> None:
        self.size, self.row = size, row
        self.regular, self.source = _load(REGULAR, size, folders)
        self.bold, _ = _load(BOLD, size, folders)
        self.advance = max(1, round(self.regular.getlength("M")))
        widths = {round(self.regular.getlength(c)) for c in "iMW.|_"}
        self.monospace = widths == {self.advance}
        if isinstance(self.regular, ImageFont.FreeTypeFont):
            ascent, descent = self.regular.getmetrics()
            self.top = max(0, (row - ascent - descent) // 2)
        else:
            self.top = 0
        self._notdef = self._glyph(NOWHERE)
        self._has: dict[str, bool] = {}
        self._masks: dict[tuple[str, bool], Image.Image] = {}
        self._mask_bytes = 0
        self._cells: dict[tuple[str, bool], Image.Image] = {}
        self.open, self.close = ("⟨", "⟩") if self.has("⟨") and self.has("⟩") else ("<", ">")
        self.minus = "−" if self.has("−") else "-"

    def _glyph(self, ch: str) -> bytes:
        im = Image.new("L", (self.advance * 2 + PAD, self.row))
        ImageDraw.Draw(im).text((PAD, self.top), ch, font=self.regular, fill=255)
        return im.tobytes()

    def has(self, ch: str) -> bool:
        """Whether the font draws ``ch`` (not its ``.notdef`` box)."""
        known = self._has.get(ch)
        if known is None:
            known = self._glyph(ch) != self._notdef
            self._has[ch] = known
        return known

    def _cell(self, ch: str, bold: bool) -> Image.Image:
        """One character drawn in its cell, ``PAD`` pixels of room on each side."""
        key = (ch, bold)
        found = self._cells.get(key)
        if found is None:
            found = Image.new("L", (self.advance + 2 * PAD, self.row))
            font = self.bold if bold else self.regular
            ImageDraw.Draw(found).text((PAD, self.top), ch, font=font, fill=255)
            self._cells[key] = found
        return found

    def mask(self, text: str, bold: bool = False) -> Image.Image:
        """``text`` drawn white on black, ``PAD`` pixels in, one row high: made of each
        character's cell (drawn once), odd and even cells apart so that a glyph that
        overhangs its cell is kept whole where they meet."""
        key = (text, bold)
        found = self._masks.get(key)
        if found is not None:
            return found
        if self._mask_bytes >= MAX_MASK_BYTES:
            self._masks.clear()
            self._mask_bytes = 0
        size = (len(text) * self.advance + 2 * PAD, self.row)
        if self.monospace:
            layers = (Image.new("L", size), Image.new("L", size))
            for i, ch in enumerate(text):
                if ch != " ":
                    layers[i & 1].paste(self._cell(ch, bold), (i * self.advance, 0))
            im = ImageChops.lighter(*layers)
        else:  # a proportional fallback: each character centred in its cell
            im = Image.new("L", size)
            draw = ImageDraw.Draw(im)
            font = self.bold if bold else self.regular
            for i, ch in enumerate(text):
                x = PAD + i * self.advance + (self.advance - font.getlength(ch)) / 2
                draw.text((x, self.top), ch, font=font, fill=255)
        self._masks[key] = im
        self._mask_bytes += im.width * im.height
        return im
