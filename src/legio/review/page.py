"""The whole diff as one self-contained HTML page: highlighted, unified on a narrow screen
and side by side on a wide one, safe to open anywhere.

Self-contained and inert: inline CSS only (Pygments' classes for ``PhoneStyle``), no
script, no link, no image, no font from anywhere, and a Content-Security-Policy of
``default-src 'none'`` that forbids the browser any request even if something slipped
through. Both layouts are in the page; a media query shows one. Everything that comes
from the diff — names, code, hunk headers — is HTML-escaped, and hidden characters are
marked as in the pictures (``⟨U+202E⟩``, ``⟨0xFF⟩``). Bounded like the pictures: at most
``MAX_FILES`` files and ``MAX_ROWS`` lines in all; what is left out is said.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from functools import cache

from pygments.formatters import HtmlFormatter
from pygments.token import STANDARD_TYPES

from legio.review import colouring, filekinds
from legio.review.colouring import MarkedRun, PhoneStyle, Token_
from legio.review.rendering import MAX_FILE_BYTES, MAX_FILE_LINES, MAX_READ, moved, name, said
from legio.review.unified import FileDiff, Hunk, Line, files, hunks

MAX_FILES = 300
MAX_ROWS = 30_000

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; padding: 12px; color: #1f2328; }
h1 { font-size: 18px; margin: 0 0 4px; overflow-wrap: anywhere; }
h2 { font: bold 15px ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
     background: #f6f8fa; border: 1px solid #d0d7de; border-bottom: 0; margin: 18px 0 0;
     padding: 8px 10px; overflow-wrap: anywhere; }
ul.words { padding-left: 20px; overflow-wrap: anywhere; }
.plus { color: #1a7f37; } .minus { color: #cf222e; }
table { border-collapse: collapse; width: 100%; table-layout: fixed;
        font: 13px/1.5 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
        border: 1px solid #d0d7de; }
td { vertical-align: top; padding: 0 6px; white-space: pre-wrap; overflow-wrap: anywhere; }
td.n { width: 3.5em; color: #6e7781; text-align: right; user-select: none; }
td.m { width: 1em; user-select: none; }
tr.a td { background: #e6ffec; } tr.a td.n { background: #ccffd8; }
tr.d td { background: #ffebe9; } tr.d td.n { background: #ffd7d5; }
td.a { background: #e6ffec; } td.na { background: #ccffd8; }
td.d { background: #ffebe9; } td.nd { background: #ffd7d5; }
tr.h td { background: #ddf4ff; color: #57606a; }
.mark { background: #fff1b8; color: #9a6700; border-radius: 3px; }
.note { color: #6e7781; font-style: italic; }
table.s { display: none; }
@media (min-width: 900px) {
  table.u { display: none; }
  table.s { display: table; }
}
"""


@cache
def _stylesheet() -> str:
    """Pygments' CSS for ``PhoneStyle``'s classes, under ``.code``."""
    defs: str = HtmlFormatter(style=PhoneStyle).get_style_defs(".code")  # type: ignore[no-untyped-call]
    return defs


def _css_class(ttype: Token_) -> str:
    while ttype not in STANDARD_TYPES and ttype.parent is not None:
        ttype = ttype.parent
    return STANDARD_TYPES.get(ttype, "")


def _code(runs: list[MarkedRun]) -> str:
    out = []
    for text, ttype, mark in runs:
        escaped = html.escape(text, quote=True)
        if mark:
            out.append(f'<span class="mark">{escaped}</span>')
        elif cls := _css_class(ttype):
            out.append(f'<span class="{cls}">{escaped}</span>')
        else:
            out.append(escaped)
    return "".join(out)


def _cell(line: Line, runs: list[MarkedRun]) -> str:
    code = _code(runs)
    more = len(line.text) - colouring.MAX_LINE_CHARS
    if more > 0:
        code += f'<span class="note"> … {more:,} more characters</span>'
    return code


def _number(value: int | None) -> str:
    return "" if value is None else str(value)


KINDS = {"+": "a", "-": "d", " ": "c"}
SIGNS = {"+": "+", "-": "−", " ": " "}


def _unified(hunk: Hunk, coloured: list[list[MarkedRun]]) -> Iterator[str]:
    yield f'<tr class="h"><td colspan="4">{html.escape(_title(hunk))}</td></tr>'
    for line, runs in zip(hunk.lines, coloured, strict=True):
        yield (
            f'<tr class="{KINDS[line.kind]}"><td class="n">{_number(line.old)}</td>'
            f'<td class="n">{_number(line.new)}</td><td class="m">{SIGNS[line.kind]}</td>'
            f"<td>{_cell(line, runs)}</td></tr>"
        )


def _side_by_side(hunk: Hunk, coloured: list[list[MarkedRun]]) -> Iterator[str]:
    yield f'<tr class="h"><td colspan="4">{html.escape(_title(hunk))}</td></tr>'
    pairs = list(zip(hunk.lines, coloured, strict=True))
    i = 0
    while i < len(pairs):
        line, runs = pairs[i]
        if line.kind == " ":
            code = _cell(line, runs)
            yield (
                f'<tr><td class="n">{line.old}</td><td>{code}</td>'
                f'<td class="n">{line.new}</td><td>{code}</td></tr>'
            )
            i += 1
            continue
        removed, added = [], []
        while i < len(pairs) and pairs[i][0].kind == "-":
            removed.append(pairs[i])
            i += 1
        while i < len(pairs) and pairs[i][0].kind == "+":
            added.append(pairs[i])
            i += 1
        for k in range(max(len(removed), len(added))):
            left = right = '<td class="n"></td><td></td>'
            if k < len(removed):
                old, old_runs = removed[k]
                left = f'<td class="n nd">{old.old}</td><td class="d">{_cell(old, old_runs)}</td>'
            if k < len(added):
                new, new_runs = added[k]
                right = f'<td class="n na">{new.new}</td><td class="a">{_cell(new, new_runs)}</td>'
            yield f"<tr>{left}{right}</tr>"


def _title(hunk: Hunk) -> str:
    section = name(hunk.section)
    head = f"@@ -{hunk.old_start},{hunk.old_count} +{hunk.new_start},{hunk.new_count} @@"
    return f"{head} {section}".rstrip()


def _file(diff: bytes, f: FileDiff, rows: int) -> tuple[str, int, bool]:
    """One file's section of the page, the lines it holds, and whether all are there."""
    read = hunks(diff, f, rows)
    lexer = colouring.lexer_for(f.path)
    unified: list[str] = []
    split: list[str] = []
    for hunk in read.hunks:
        coloured = [colouring.shown(runs) for runs in colouring.hunk_runs(lexer, hunk)]
        unified.extend(_unified(hunk, coloured))
        split.extend(_side_by_side(hunk, coloured))
    heading = (
        f'<h2>{html.escape(name(f.path))} <span class="plus">+{f.added:,}</span> '
        f'<span class="minus">−{f.removed:,}</span></h2>'
    )
    body = (
        f'<table class="u code">{"".join(unified)}</table>'
        f'<table class="s code">{"".join(split)}</table>'
    )
    return heading + body, read.lines, read.complete


def html_page(diff: bytes, title: str) -> bytes:
    """``diff`` (``git diff`` output) as one self-contained HTML page, UTF-8."""
    found, count = files(diff, MAX_READ)
    found.sort(key=lambda f: (filekinds.role(f.path), f.order))
    words: list[str] = []
    sections: list[str] = []
    rows_left = MAX_ROWS
    left_out = count - len(found)
    for f in found:
        words.extend(moved(f))
        what = said(f)
        reason = filekinds.generated_reason(f.path)
        if what:
            words.append(what)
        elif not f.has_text:
            continue
        elif reason:
            words.append(f"{name(f.path)}: {reason}, +{f.added:,} −{f.removed:,}, not shown")
        elif f.added + f.removed > MAX_FILE_LINES or f.size > MAX_FILE_BYTES:
            words.append(f"{name(f.path)}: +{f.added:,} −{f.removed:,}, too long to show")
        elif len(sections) >= MAX_FILES or rows_left <= 0:
            left_out += 1
        else:
            text, lines, complete = _file(diff, f, rows_left)
            sections.append(text)
            rows_left -= lines
            if not complete:
                words.append(f"{name(f.path)}: only its first {lines:,} lines shown")
    if left_out:
        words.append(f"{left_out:,} more files not shown (see the .diff)")
    if not found:
        words.append("nothing to show: the change is empty")
    added = sum(f.added for f in found)
    removed = sum(f.removed for f in found)
    shown_title = html.escape(colouring.shown_name(title))
    listed = "".join(f"<li>{html.escape(w)}</li>" for w in words)
    style = _stylesheet()
    page = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{shown_title}</title><style>{CSS}{style}</style></head><body>"
        f"<h1>{shown_title}</h1>"
        f'<p>{count:,} files · <span class="plus">+{added:,}</span> '
        f'<span class="minus">−{removed:,}</span></p>'
        f'<ul class="words">{listed}</ul>{"".join(sections)}</body></html>\n'
    )
    return page.encode("utf-8", "replace")
