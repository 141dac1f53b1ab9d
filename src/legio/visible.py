"""Text someone else wrote, as Caesar reads it: every character that could hide or reorder
what he sees made visible.

Approvals show commands with it; ``/diff``, ``/projects`` and ``legio check`` show branch
names, commit subjects, authors and file names with it (an agent chooses all of them).

Shown as ``⟨U+XXXX⟩``:

- what Python calls non-printable: controls, a carriage return, bidirectional overrides
  (U+202E), line and paragraph separators, spaces other than U+0020;
- what it calls printable but draws as nothing: Unicode's default-ignorable code points
  (``DEFAULT_IGNORABLE``: zero-width characters U+200B–U+200F, word joiner and invisible
  operators U+2060–U+206F, U+FEFF, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0,
  U+034F, U+17B4–U+17B5, variation selectors U+FE00–U+FE0F and U+E0100–U+E01EF, tags
  U+E0000–U+E007F, U+180B–U+180F…) and the braille blank U+2800;
- combining marks (Mn, Me) that could hide or blur a name: one with no visible base
  (at the start, after a space or after a character shown as ``⟨U+XXXX⟩``), and a
  stack of more than ``MAX_MARKS`` marks on one base that stay after NFC composition
  (Zalgo text drawn over its neighbours).

Combining marks are otherwise kept: escaping every one would garble names written
decomposed (macOS writes ``é`` as ``e`` + U+0301, which NFC composes: no mark stays),
Thai (a vowel and a tone mark on one consonant), vocalised Arabic (shadda and a vowel)
and Hebrew (dagesh and a vowel), where two marks on a base that NFC does not compose are
ordinary writing. A mark kept is drawn: it cannot make one name look like another
without being seen.
"""

from __future__ import annotations

import unicodedata

# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 15.1)
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
BLANKS = {0x2800}  # the braille pattern blank: printable, drawn as nothing
MAX_MARKS = 2  # combining marks one base may carry after NFC (Thai, Arabic, Hebrew use two)


def _ignorable(c: str) -> bool:
    code = ord(c)
    return code in BLANKS or any(lo <= code <= hi for lo, hi in DEFAULT_IGNORABLE)


def _hidden(c: str) -> bool:
    return not c.isprintable() or _ignorable(c)


def _mark(c: str) -> bool:
    return unicodedata.category(c) in ("Mn", "Me") and not _ignorable(c)


def _shown(c: str) -> str:
    return f"⟨U+{ord(c):04X}⟩"


def visible(text: str, keep: str = "\n\t") -> str:
    """``text`` with every character that is not drawn, or that could hide or reorder
    what is drawn, shown as ``⟨U+XXXX⟩`` (see the module's docstring): controls, a
    carriage return, bidirectional overrides such as U+202E, zero-width and other
    default-ignorable characters, and combining marks with no base or stacked.

    ``keep``: characters left as they are (newlines and tabs by default, so a script reads
    as lines); ``keep=""`` for a name that must stay on one line (a branch, a file name).
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in keep and not _mark(c):
            out.append(c)
            i += 1
            continue
        if _hidden(c) or _mark(c):  # a mark here has no base: the one before was not drawn
            out.append(_shown(c))
            i += 1
            continue
        end = i + 1
        while end < n and _mark(text[end]):
            end += 1
        marks = text[i + 1 : end]
        if marks and (
            c.isspace()
            or sum(_mark(m) for m in unicodedata.normalize("NFC", text[i:end])) > MAX_MARKS
        ):
            out.append(c + "".join(_shown(m) for m in marks))
        else:
            out.append(text[i:end])
        i = end
    return "".join(out)


def visible_name(text: str) -> str:
    """One name on one line: a newline or a tab in it is shown as ``⟨U+000A⟩``/``⟨U+0009⟩``."""
    return visible(text, keep="")
