"""A diff made ready for a phone: which files are drawn, in what order, in how many
pages, and what is said in words instead. The one entry point for callers.

``render(diff)`` reads the diff (headers and counts of every file, bounded), orders the
files (source, tests, docs and config, generated), lays out the files it will draw, up to
``max_files`` files and ``max_pictures`` pages, and says the rest in words: renames, mode
changes, deletions, binary, submodule, generated and over-long files, and past the limits
"N more files not drawn: …". ``Rendering.pictures()`` then draws page after page, a
generator: the caller (in a worker thread) can send the first before the last is drawn.
``albums`` groups pictures by ten for ``sendMediaGroup``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path

from legio.review import colouring, filekinds
from legio.review.drawing import Heading, draw
from legio.review.layout import (
    CODE_SIZE,
    ROW,
    ROWS_PER_PAGE,
    SMALL_SIZE,
    Laid,
    colour,
    lay_out,
    pages,
)
from legio.review.typeface import FOLDERS, Typeface
from legio.review.unified import FileDiff, files

MAX_FILES = 40  # files drawn
MAX_PICTURES = 100  # pages drawn in all
MAX_PAGES_PER_FILE = 8
MAX_FILE_LINES = 5_000  # a file changing more lines is said in words, not drawn
MAX_FILE_BYTES = 2 * 1024 * 1024  # nor one whose part of the diff is bigger
MAX_READ = 20_000  # file headers read; more files are only counted
MAX_WORDS = 30  # lines of words about single files; the rest summed up in one line
MAX_NAMES = 10  # names listed in "N more files not drawn: …"
MAX_NAME = 160  # characters of one name in words and captions
NOTHING = "nothing to show: the change is empty"


@dataclass(frozen=True, slots=True)
class Picture:
    """One page of one file, ready to send as a photo."""

    path: str  # the file's path as shown (marks made visible)
    page: int  # 1-based
    pages: int
    png: bytes
    caption: str  # "src/app.py · +12 −3 · 1/2"
    width: int
    height: int
    kinds: str  # one character per row: + - space @ (hunk) ~ (note)


def name(path: str) -> str:
    """A path as words and captions show it: on one line, every hidden character and
    invalid byte made visible, cut in the middle past ``MAX_NAME`` characters."""
    text = colouring.shown_name(path)
    if len(text) > MAX_NAME:
        text = text[: MAX_NAME // 2] + "…" + text[-(MAX_NAME // 2 - 1) :]
    return text


def _counts(f: FileDiff) -> str:
    return f"+{f.added:,} −{f.removed:,}"


@dataclass
class Rendering:
    """What will be drawn and what is said in words, for one diff."""

    diff: bytes
    files: list[FileDiff]  # every file read, in the order they are shown
    file_count: int  # files in the diff (more than ``files`` past MAX_READ)
    words: list[str] = field(default_factory=list)
    face: Typeface | None = None
    small: Typeface | None = None
    planned: list[tuple[FileDiff, Laid, int]] = field(default_factory=list)  # file, rows, pages
    label: str = ""  # put before each caption ("uncommitted")

    @property
    def summary(self) -> str:
        """One line: "4 files +120 −30" ("nothing to show" when empty)."""
        if not self.file_count:
            return NOTHING
        files = "1 file" if self.file_count == 1 else f"{self.file_count:,} files"
        return f"{files} +{self.added:,} −{self.removed:,}"

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed for f in self.files)

    @property
    def picture_count(self) -> int:
        """How many pictures ``pictures()`` yields."""
        return sum(n for _, _, n in self.planned)

    def pictures(self) -> Iterator[Picture]:
        """Each planned page drawn, in order: a generator, one page drawn per step; the
        next page is drawn while this one is written as PNG in a second thread."""
        if self.face is None or self.small is None:
            return
        pending: Future[bytes] | None = None
        made: Picture | None = None
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="legio-png") as pool:
            for f, laid, count in self.planned:
                shown = name(f.path)
                colour(laid, self.face)
                for i, rows in enumerate(pages(laid.rows)[:count], start=1):
                    page = draw(
                        Heading(shown, f.added, f.removed, i, count),
                        rows,
                        laid.digits,
                        self.face,
                        self.small,
                    )
                    if pending is not None and made is not None:
                        yield replace(made, png=pending.result())
                    pending = pool.submit(page.png)
                    of = f" · {i}/{count}" if count > 1 else ""
                    made = Picture(
                        path=shown,
                        page=i,
                        pages=count,
                        png=b"",
                        caption=f"{self.label}{shown} · {_counts(f)}{of}",
                        width=page.image.width,
                        height=page.image.height,
                        kinds="".join(r.kind for r in rows),
                    )
            if pending is not None and made is not None:
                yield replace(made, png=pending.result())


def said(f: FileDiff) -> str:
    """What words say of a file that is not drawn; "" when it may be drawn."""
    if f.has_text and f.status != "deleted" and not f.submodule:
        return ""  # the common case first: names are made only for what is said
    old, new = name(f.old_path), name(f.new_path)
    if f.combined:
        return f"{new}: a merge's combined diff, not drawn"
    if f.submodule:
        if not f.new_path:
            return f"submodule {old} removed"
        verb = "added" if f.status == "added" else "now at"
        return f"submodule {new} {verb} {f.submodule_commit[:12] or '(unknown commit)'}"
    if f.status == "deleted":
        if f.binary:
            return f"deleted {old} (binary)"
        return f"deleted {old} (−{f.removed:,} lines)" if f.removed else f"deleted {old} (empty)"
    if f.binary:
        if f.status in ("renamed", "copied"):
            return ""  # said by ``moved``
        verb = "added" if f.status == "added" else "changed"
        return f"{verb} {new} (binary, not drawn)"
    if f.status == "added" and not f.has_text:
        return f"added {new} (empty)"
    return ""


def moved(f: FileDiff) -> list[str]:
    """Words for a rename, a copy and a mode change (the file may be drawn as well)."""
    out = []
    if f.status in ("renamed", "copied") and not f.submodule:
        verb = "renamed" if f.status == "renamed" else "copied"
        extra = " (binary)" if f.binary else f" ({_counts(f)})" if f.has_text else ""
        out.append(f"{verb} {name(f.old_path)} → {name(f.new_path)}{extra}")
    if f.mode_changed and not f.submodule:
        out.append(f"{name(f.path)}: mode {f.old_mode} → {f.new_mode}")
    return out


def render(
    diff: bytes,
    *,
    max_files: int = MAX_FILES,
    max_pictures: int = MAX_PICTURES,
    max_pages_per_file: int = MAX_PAGES_PER_FILE,
    fonts: Sequence[Path] = FOLDERS,
    label: str = "",
) -> Rendering:
    """``diff`` (``git diff`` output, bytes) planned for a phone: see the module.
    ``label`` starts each caption (``"uncommitted"`` gives "uncommitted · app.py · +1 −0")."""
    found, count = files(diff, MAX_READ)
    found.sort(key=lambda f: (filekinds.role(f.path), f.order))
    rendering = Rendering(diff, found, count, label=f"{name(label)} · " if label else "")
    if not found:
        rendering.words.append(NOTHING)
        return rendering
    words: list[str] = []
    left_out: list[FileDiff] = []
    budget = max_pictures
    for f in found:
        words.extend(moved(f))
        what = said(f)
        if what:
            words.append(what)
            continue
        if not f.has_text:
            continue
        reason = filekinds.generated_reason(f.path)
        if reason:
            words.append(f"{name(f.path)}: {reason}, {_counts(f)}, not drawn")
            continue
        if f.added + f.removed > MAX_FILE_LINES or f.size > MAX_FILE_BYTES:
            words.append(f"{name(f.path)}: {_counts(f)}, too long to draw")
            continue
        if len(rendering.planned) >= max_files or budget <= 0:
            left_out.append(f)
            continue
        if rendering.face is None:
            rendering.face = Typeface(CODE_SIZE, ROW, fonts)
            rendering.small = Typeface(SMALL_SIZE, ROW, fonts)
        assert rendering.small is not None
        most = min(max_pages_per_file, budget)
        laid = lay_out(diff, f, rendering.face, rendering.small, most * ROWS_PER_PAGE)
        if laid.generated:
            words.append(f"{name(f.path)}: says it is generated, {_counts(f)}, not drawn")
            continue
        total = len(pages(laid.rows))
        shown = min(total, most)
        if shown < total or not laid.complete:
            words.append(f"{name(f.path)}: {_counts(f)}, only the first {shown} pages drawn")
        rendering.planned.append((f, laid, shown))
        budget -= shown
    rendering.words = _bounded(words, left_out, count - len(found))
    return rendering


def _bounded(words: list[str], left_out: list[FileDiff], unread: int) -> list[str]:
    out = words[:MAX_WORDS]
    if len(words) > MAX_WORDS:
        out.append(f"…and {len(words) - MAX_WORDS:,} more such lines (see the .diff)")
    more = len(left_out) + unread
    if more:
        names = ", ".join(name(f.path) for f in left_out[:MAX_NAMES])
        tail = ", …" if more > MAX_NAMES else ""
        out.append(f"{more:,} more files not drawn: {names}{tail} (see the .diff)")
    return out


def pictures(
    diff: bytes,
    *,
    max_files: int = MAX_FILES,
    max_pictures: int = MAX_PICTURES,
    max_pages_per_file: int = MAX_PAGES_PER_FILE,
    fonts: Sequence[Path] = FOLDERS,
) -> Iterator[Picture]:
    """The pictures of ``diff`` alone: ``render(diff, …).pictures()``."""
    yield from render(
        diff,
        max_files=max_files,
        max_pictures=max_pictures,
        max_pages_per_file=max_pages_per_file,
        fonts=fonts,
    ).pictures()


def words(
    diff: bytes, *, max_files: int = MAX_FILES, max_pictures: int = MAX_PICTURES
) -> list[str]:
    """What is said in words of ``diff`` (see ``render``; it lays the drawn files out)."""
    return render(diff, max_files=max_files, max_pictures=max_pictures).words


def albums(items: Iterable[Picture], size: int = 10) -> Iterator[list[Picture]]:
    """``items`` in groups of at most ``size`` (Telegram's album), each as soon as full."""
    it = iter(items)
    while group := list(islice(it, size)):
        yield group
