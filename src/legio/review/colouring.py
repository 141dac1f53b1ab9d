"""A hunk's lines as coloured runs of text: Pygments tokens by the file's language, and
every character a reader could miss made visible.

Each hunk is lexed twice, as its old side (context and removed lines) and its new side
(context and added lines), so that a string or a comment that spans lines is coloured as
it is in each file; a context line takes the new side's colours. The lexer comes from the
file's name (``get_lexer_for_filename``; plain text when none fits or it fails). Lexing is
bounded: a line is cut to ``MAX_LINE_CHARS`` before any lexer sees it (a 100,000-character
line costs what 768 characters cost), and a side over ``MAX_LEX_CHARS`` is not lexed.

``shown`` turns a token's text into what is drawn: ``legio.visible`` marks controls and
bidi characters as ``⟨U+202E⟩`` (as approvals do), an invalid UTF-8 byte becomes
``⟨0xFF⟩``, a character the font lacks ``⟨U+XXXX⟩``, and tabs become spaces to the next
stop. Marks are runs of their own, drawn in their own colour on a chip.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.style import Style
from pygments.token import (
    Comment,
    Error,
    Generic,
    Keyword,
    Literal,
    Name,
    Number,
    Operator,
    String,
    Token,
    _TokenType,
)
from pygments.util import ClassNotFound

from legio.review.unified import Hunk
from legio.visible import visible

MAX_LINE_CHARS = 768  # 12 rows of 64 columns: the rest of a longer line is counted, not drawn
MAX_LEX_CHARS = 200_000  # one side of one hunk; more is drawn uncoloured
TAB = 4
CR = "\ud800"  # stands for a carriage return while Pygments reads (it turns "\r" into lines)
MARKED = re.compile(r"⟨U\+([0-9A-F]{4,6})⟩")

Token_ = _TokenType
Run = tuple[str, Token_]  # a token's text and type
MarkedRun = tuple[str, Token_, bool]  # shown text, type, whether it is a mark


class PhoneStyle(Style):
    """Colours that read on a white page and on the added (green) and removed (red)
    tints, after GitHub's light theme; used by the pictures and the HTML page alike."""

    name = "legio-phone"
    background_color = "#ffffff"
    styles = {  # noqa: RUF012 (Pygments reads a class attribute)
        Token: "#1f2328",
        Comment: "#6e7781",
        Comment.Preproc: "#cf222e",
        Keyword: "#cf222e",
        Keyword.Constant: "#0550ae",
        Keyword.Type: "#953800",
        Name.Builtin: "#0550ae",
        Name.Builtin.Pseudo: "#0550ae",
        Name.Function: "#8250df",
        Name.Class: "#953800",
        Name.Decorator: "#8250df",
        Name.Exception: "#953800",
        Name.Constant: "#0550ae",
        Name.Tag: "#116329",
        Name.Attribute: "#0550ae",
        Name.Namespace: "#953800",
        String: "#0a3069",
        String.Escape: "#116329",
        String.Regex: "#116329",
        String.Doc: "#6e7781",
        Number: "#0550ae",
        Literal: "#0550ae",
        Operator.Word: "#cf222e",
        Generic.Heading: "bold #0550ae",
        Generic.Subheading: "bold #0550ae",
        Generic.Inserted: "#116329",
        Generic.Deleted: "#82071e",
        Generic.Strong: "bold",
        Error: "#82071e",
    }


MARK_COLOUR = (0x9A, 0x67, 0x00)  # a mark's text: dark amber on its chip
MARK_CHIP = (0xFF, 0xF1, 0xB8)


@lru_cache(maxsize=512)
def colour(ttype: Token_) -> tuple[tuple[int, int, int], bool]:
    """A token type's colour and whether it is bold, in ``PhoneStyle``."""
    style = PhoneStyle.style_for_token(ttype)
    hex_ = style["color"] or "1f2328"
    return (int(hex_[0:2], 16), int(hex_[2:4], 16), int(hex_[4:6], 16)), bool(style["bold"])


@lru_cache(maxsize=256)
def lexer_for(path: str) -> Lexer:
    """The lexer for a file named ``path`` (plain text when none fits)."""
    name = path.rsplit("/", 1)[-1]
    try:
        return get_lexer_for_filename(name, None, stripnl=False, ensurenl=True, stripall=False)
    except ClassNotFound:
        pass
    except Exception:  # a broken plugin lexer: plain text, never a failure
        pass
    return TextLexer(stripnl=False, ensurenl=True, stripall=False)


def _lex(lexer: Lexer, texts: list[str]) -> list[list[Run]]:
    """``texts`` (one side's lines) lexed together, split back into lines."""
    plain = [[(t, Token.Text)] if t else [] for t in texts]
    joined = "\n".join(t.replace("\r", CR) for t in texts)
    if isinstance(lexer, TextLexer) or not texts or len(joined) > MAX_LEX_CHARS:
        return plain
    out: list[list[Run]] = [[]]
    try:
        for ttype, value in lexer.get_tokens(joined + "\n"):
            parts = value.split("\n")
            for i, part in enumerate(parts):
                if i:
                    out.append([])
                if part:
                    out[-1].append((part.replace(CR, "\r"), ttype))
    except Exception:  # a lexer that fails on odd input: plain text
        return plain
    if out and not out[-1]:
        out.pop()
    return out if len(out) == len(texts) else plain


def hunk_runs(lexer: Lexer, hunk: Hunk) -> list[list[Run]]:
    """Each of ``hunk``'s lines as tokens (cut at ``MAX_LINE_CHARS``)."""
    cut = [line.text[:MAX_LINE_CHARS] for line in hunk.lines]
    old_ix = [i for i, line in enumerate(hunk.lines) if line.kind != "+"]
    new_ix = [i for i, line in enumerate(hunk.lines) if line.kind != "-"]
    runs: list[list[Run]] = [[] for _ in hunk.lines]
    for ix, keep in ((old_ix, "-"), (new_ix, None)):
        lexed = _lex(lexer, [cut[i] for i in ix])
        for i, tokens in zip(ix, lexed, strict=True):
            if keep is None or hunk.lines[i].kind == keep:
                runs[i] = tokens
    return runs


def _marks(
    text: str, has: Callable[[str], bool], brackets: tuple[str, str], keep: str = "\t"
) -> Iterable[tuple[str, bool]]:
    """``visible(text)`` split into plain text and marks; bytes and missing glyphs marked."""
    shown = visible(text, keep=keep)
    pos = 0
    for m in MARKED.finditer(shown):
        if m.start() > pos:
            yield from _glyphs(shown[pos : m.start()], has, brackets)
        code = int(m.group(1), 16)
        name = f"0x{code - 0xDC00:02X}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        yield f"{brackets[0]}{name}{brackets[1]}", True
        pos = m.end()
    if pos < len(shown):
        yield from _glyphs(shown[pos:], has, brackets)


def _glyphs(
    text: str, has: Callable[[str], bool], brackets: tuple[str, str]
) -> Iterable[tuple[str, bool]]:
    if text.isascii():
        yield text, False
        return
    text = unicodedata.normalize("NFC", text)  # "e" + U+0301 drawn as one "é", not two cells
    start = 0
    for i, ch in enumerate(text):
        if ch.isascii() or has(ch):
            continue
        if i > start:
            yield text[start:i], False
        yield f"{brackets[0]}U+{ord(ch):04X}{brackets[1]}", True
        start = i + 1
    if start < len(text):
        yield text[start:], False


def shown_name(text: str) -> str:
    """A name on one line as words and captions show it: hidden characters (a newline and
    a tab too) as ``⟨U+XXXX⟩``, an invalid byte as ``⟨0xFF⟩``."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(part for part, _ in _marks(text, _yes, ("⟨", "⟩"), keep=""))


def _yes(_: str) -> bool:
    return True


def shown(
    runs: list[Run],
    has: Callable[[str], bool] = lambda _: True,
    brackets: tuple[str, str] = ("⟨", "⟩"),
) -> list[MarkedRun]:
    """A line's tokens as drawn: marks for what cannot be seen, tabs expanded."""
    out: list[MarkedRun] = []
    col = 0
    for text, ttype in runs:
        if text.isascii() and text.isprintable():
            out.append((text, ttype, False))
            col += len(text)
            continue
        for part, mark in _marks(text, has, brackets):
            if "\t" in part:
                pieces = part.split("\t")
                expanded = pieces[0]
                for piece in pieces[1:]:
                    expanded += " " * (TAB - (col + len(expanded)) % TAB) + piece
                part = expanded
            out.append((part, ttype, mark))
            col += len(part)
    return out
