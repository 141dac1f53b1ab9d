"""The diff renderer on hostile diffs: real git output (renames, modes, deletions, binary,
quoted names with a newline or a bidi character), invalid UTF-8, a 100,000-character line,
a 50 MB generated file, 10,000 files, pages within Telegram's photo limits, the colours at
added and removed rows, wrapping, marks for hidden characters and missing glyphs, and
the fallback font."""

from __future__ import annotations

import io
import os
import subprocess
import types
from pathlib import Path

import pytest
from PIL import Image

from legio.review import drawing, filekinds, layout
from legio.review.rendering import (
    MAX_WORDS,
    NOTHING,
    Picture,
    albums,
    pictures,
    render,
    words,
)
from legio.review.typeface import Typeface
from legio.review.unified import files, hunks, unquote
from tests.gitrepo import git

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def staged_diff(repo: Path) -> bytes:
    """``git diff`` of everything staged, as Legio asks for it (bytes, renames found)."""
    git(repo, "add", "-A")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", "-C", str(repo), "diff", "--cached", "-M", "--no-ext-diff", "--no-textconv"],
        capture_output=True,
        check=True,
        env=env,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "--quiet", "-b", "main")
    (path / "run.sh").write_text("echo one\necho two\necho three\necho four\n")
    (path / "old.py").write_text("".join(f"x{i} = {i}\n" for i in range(20)))
    (path / "app.py").write_text("def add(a, b):\n    return a - b\n")
    git(path, "add", "-A")
    git(path, "commit", "--quiet", "-m", "first")
    return path


def one_file(body: str, path: str = "app.py") -> bytes:
    return (
        f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n"
        f"+++ b/{path}\n{body}"
    ).encode("utf-8", "surrogateescape")


def check_limits(picture: Picture) -> None:
    """Telegram's sendPhoto: width + height ≤ 10000, ratio ≤ 20, ≤ 10 MB; and ours: the
    width a phone shows, at most 1280 px high (what Telegram keeps unshrunk)."""
    image = Image.open(io.BytesIO(picture.png))
    assert image.format == "PNG"
    assert image.size == (picture.width, picture.height) == (1080, picture.height)
    assert picture.height <= layout.MAX_HEIGHT
    assert picture.width + picture.height <= 10_000
    assert max(image.size) / min(image.size) <= 20
    assert len(picture.png) < 10 * 1024 * 1024


def pixel(picture: Picture, row: int, x: int) -> tuple[int, ...]:
    image = Image.open(io.BytesIO(picture.png)).convert("RGB")
    return tuple(image.getpixel((x, layout.HEADER + row * layout.ROW + layout.ROW // 2)))


def test_an_empty_diff_says_nothing_to_show_and_draws_nothing() -> None:
    rendering = render(b"")
    assert rendering.words == [NOTHING]
    assert list(rendering.pictures()) == []
    assert words(b"   \n") == [NOTHING]


def test_renames_mode_changes_deletions_and_binary_files_are_said_in_words(repo: Path) -> None:
    git(repo, "mv", "run.sh", "start.sh")
    (repo / "start.sh").chmod(0o755)
    (repo / "old.py").unlink()
    (repo / "logo.png").write_bytes(PNG)
    (repo / "app.py").write_text("def add(a, b):\n    return a + b\n")
    rendering = render(staged_diff(repo))
    said = "\n".join(rendering.words)
    assert "renamed run.sh → start.sh" in said
    assert "start.sh: mode 100644 → 100755" in said
    assert "deleted old.py (−20 lines)" in said
    assert "added logo.png (binary, not drawn)" in said
    drawn = list(rendering.pictures())
    assert [p.path for p in drawn] == ["app.py"]  # only the text change is drawn
    assert drawn[0].caption == "app.py · +1 −1"
    check_limits(drawn[0])


def test_source_comes_before_tests_docs_and_lock_files(repo: Path) -> None:
    (repo / "yarn.lock").write_text("lock\n" * 5)
    (repo / "README.md").write_text("# readme\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_app.py").write_text("def test(): pass\n")
    (repo / "zeta.py").write_text("z = 1\n")
    rendering = render(staged_diff(repo))
    assert [f.path for f in rendering.files] == [
        "zeta.py",
        "tests/test_app.py",
        "README.md",
        "yarn.lock",
    ]
    assert [p.path for p in rendering.pictures()] == ["zeta.py", "tests/test_app.py", "README.md"]
    assert "yarn.lock: a lock file, +5 −0, not drawn" in rendering.words


def test_a_name_with_a_newline_or_a_bidi_override_is_shown_visibly(repo: Path) -> None:
    (repo / "evil\nname.py").write_text("a = 1\n")
    (repo / "invoice\u202etxt.py").write_text("b = 2\n")
    diff = staged_diff(repo)
    assert b'"b/evil\\nname.py"' in diff  # git quoted it
    names = {f.path for f in files(diff)[0]}
    assert names == {"evil\nname.py", "invoice\u202etxt.py"}
    captions = [p.caption for p in pictures(diff)]
    assert sorted(captions) == [
        "evil⟨U+000A⟩name.py · +1 −0",
        "invoice⟨U+202E⟩txt.py · +1 −0",
    ]


def test_c_quoted_names_are_unquoted() -> None:
    assert unquote(b'"a\\tb\\303\\251\\"q\\\\" rest') == (b'a\tb\xc3\xa9"q\\', b" rest")
    assert unquote(b"plain") == (b"plain", b"")


def test_invalid_utf8_and_bidi_in_a_line_are_marked() -> None:
    diff = one_file("@@ -1 +1 @@\n-ok = 1\n+bad = '\udcff\udcfe' \u202e # x\n")
    f = files(diff)[0][0]
    face, small = Typeface(24, 30), Typeface(18, 30)
    laid = layout.lay_out(diff, f, face, small, 100)
    added = next(r for r in laid.rows if r.kind == "+")
    marks = [text for text, _, mark in added.runs if mark]
    assert marks == ["⟨0xFF⟩", "⟨0xFE⟩", "⟨U+202E⟩"]
    for picture in pictures(diff):
        check_limits(picture)


def test_a_character_the_font_lacks_is_marked_never_dropped() -> None:
    face = Typeface(24, 30)
    assert face.has("a") and face.has("é") and face.has("⟨")
    assert not face.has("中") and not face.has("😀")
    diff = one_file("@@ -0,0 +1 @@\n+title = '中文 😀'\n")
    laid = layout.lay_out(diff, files(diff)[0][0], face, Typeface(18, 30), 100)
    shown = "".join(text for row in laid.rows for text, _, _ in row.runs)
    assert "⟨U+4E2D⟩⟨U+6587⟩" in shown and "⟨U+1F600⟩" in shown


def test_added_and_removed_rows_are_tinted() -> None:
    diff = one_file("@@ -1,3 +1,3 @@\n keep = 0\n-x = 1\n+x = 2\n")
    (picture,) = pictures(diff)
    assert picture.kinds == "@ -+"
    right = layout.WIDTH - 3  # past the code: only the row's background
    assert pixel(picture, 1, right) == drawing.WHITE
    assert pixel(picture, 2, right) == drawing.DEL_BG
    assert pixel(picture, 3, right) == drawing.ADD_BG
    assert pixel(picture, 2, 2) == drawing.DEL_GUTTER
    assert pixel(picture, 3, 2) == drawing.ADD_GUTTER
    assert pixel(picture, 0, right) == drawing.HUNK_BG
    # some text is drawn on the added row, in the code's colours (not background alone)
    image = Image.open(io.BytesIO(picture.png)).convert("RGB")
    y0 = layout.HEADER + 3 * layout.ROW
    colours = {image.getpixel((x, y)) for x in range(150, 400) for y in range(y0, y0 + 30)}
    assert len(colours) > 3


def test_a_long_line_wraps_into_more_rows_than_lines() -> None:
    diff = one_file("@@ -0,0 +1,2 @@\n+short = 1\n+" + "word " * 40 + "\n")
    (picture,) = pictures(diff)
    assert picture.kinds.count("+") == 1 + 4  # 200 characters at 64 columns: 4 rows
    check_limits(picture)


def test_a_100000_character_line_is_cut_and_said() -> None:
    diff = one_file("@@ -0,0 +1 @@\n+x = '" + "A" * 100_000 + "'\n")
    face, small = Typeface(24, 30), Typeface(18, 30)
    laid = layout.lay_out(diff, files(diff)[0][0], face, small, 1000)
    assert len(laid.rows) <= 1 + layout.MAX_WRAP_ROWS + 1
    assert "99,238 more characters" in laid.rows[-1].runs[0][0]
    for picture in pictures(diff):
        check_limits(picture)


def test_no_newline_at_the_end_is_said_and_numbers_follow_both_sides() -> None:
    diff = one_file("@@ -3,2 +3,3 @@\n a\n-b\n\\ No newline at end of file\n+b\n+c\n")
    (hunk,) = hunks(diff, files(diff)[0][0], 100).hunks
    assert [(x.kind, x.old, x.new, x.no_newline) for x in hunk.lines] == [
        (" ", 3, 3, False),
        ("-", 4, None, True),
        ("+", None, 4, False),
        ("+", None, 5, False),
    ]
    (picture,) = pictures(diff)
    assert picture.kinds == "@ --++"  # the note row takes its line's tint


def test_long_files_are_split_into_pages_within_telegram_limits() -> None:
    body = "@@ -0,0 +1,150 @@\n" + "".join(f"+line_{i} = {i}\n" for i in range(150))
    drawn = list(pictures(one_file(body)))
    assert [(p.page, p.pages) for p in drawn] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert drawn[1].caption == "app.py · +150 −0 · 2/4"
    for picture in drawn:
        check_limits(picture)
    assert sum(p.kinds.count("+") for p in drawn) == 150


def test_a_file_past_the_page_limit_draws_its_first_pages_and_says_so() -> None:
    body = "@@ -0,0 +1,1000 @@\n" + "".join(f"+v{i} = {i}\n" for i in range(1000))
    rendering = render(one_file(body), max_pages_per_file=3)
    assert rendering.picture_count == 3
    assert len(list(rendering.pictures())) == 3
    assert "app.py: +1,000 −0, only the first 3 pages drawn" in rendering.words


def test_a_50_mb_generated_file_is_said_in_words_at_once() -> None:
    big = b"+" + b"x" * 99 + b"\n"
    lines = 50 * 1024 * 1024 // len(big)
    head = b"diff --git a/package-lock.json b/package-lock.json\nnew file mode 100644\n"
    head += b"--- /dev/null\n+++ b/package-lock.json\n"
    diff = head + f"@@ -0,0 +1,{lines} @@\n".encode() + big * lines
    other = (
        b"diff --git a/data.csv b/data.csv\n--- a/data.csv\n+++ b/data.csv\n"
        + f"@@ -0,0 +1,{lines} @@\n".encode()
        + big * lines
    )
    rendering = render(diff + other)
    assert rendering.picture_count == 0
    assert rendering.words == [  # data (docs and config) before generated files
        f"data.csv: +{lines:,} −0, too long to draw",
        f"package-lock.json: a lock file, +{lines:,} −0, not drawn",
    ]


def test_ten_thousand_files_are_bounded_in_pictures_and_words() -> None:
    diff = b"".join(
        one_file("@@ -1 +1 @@\n-a\n+b\n", f"pkg/m{i}.py")
        + one_file("@@ -1 +1,0 @@\n-gone\n", f"old/r{i}.txt").replace(
            b"--- a/", b"deleted file mode 100644\n--- a/"
        )
        for i in range(5_000)
    )
    rendering = render(diff, max_files=20, max_pictures=30)
    assert rendering.file_count == 10_000
    assert rendering.picture_count == 20
    assert len(rendering.words) <= MAX_WORDS + 2
    assert rendering.words[-1].startswith("4,980 more files not drawn: pkg/m20.py, pkg/m21.py")
    assert rendering.words[-2] == "…and 4,970 more such lines (see the .diff)"


def test_a_submodule_and_a_combined_diff_are_said_and_a_cut_diff_does_not_break() -> None:
    sub = (
        b"diff --git a/vendor/lib b/vendor/lib\nindex 1111111..2222222 160000\n"
        b"--- a/vendor/lib\n+++ b/vendor/lib\n@@ -1 +1 @@\n"
        b"-Subproject commit 1111111111111111111111111111111111111111\n"
        b"+Subproject commit 2222222222222222222222222222222222222222\n"
    )
    combined = b"diff --cc merged.py\nindex 1,2..3\n@@@ -1,1 -1,1 +1,1 @@@\n- a\n -b\n++c\n"
    cut = one_file("@@ -1,5 +1,5 @@\n a\n-b\n+c\n d")  # stopped mid-hunk
    rendering = render(b" 3 files changed\n\n" + sub + combined + cut)
    assert "submodule vendor/lib now at 222222222222" in rendering.words
    assert "merged.py: a merge's combined diff, not drawn" in rendering.words
    (picture,) = rendering.pictures()
    assert picture.path == "app.py"


def test_pictures_is_a_generator_and_albums_hold_ten() -> None:
    body = "".join(one_file(f"@@ -1 +1 @@\n-a{i}\n+b{i}\n", f"f{i}.py").decode() for i in range(23))
    produced = pictures(body.encode())
    assert isinstance(produced, types.GeneratorType)
    first = next(produced)  # drawn before the others are
    assert first.path == "f0.py"
    groups = list(albums([first, *produced]))
    assert [len(g) for g in groups] == [10, 10, 3]


def test_a_missing_or_corrupt_font_falls_back_and_still_draws(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "DejaVuSansMono.ttf").write_bytes(b"not a font at all")
    (corrupt / "DejaVuSansMono-Bold.ttf").write_bytes(b"\x00" * 100)
    face = Typeface(24, 30, [tmp_path / "nowhere", corrupt])
    assert face.source == "Pillow's default font"
    diff = one_file("@@ -1,2 +1,2 @@\n keep\n-x = 1\n+x = '中' \u202e\n")
    drawn = list(pictures(diff, fonts=[tmp_path / "nowhere", corrupt]))
    assert len(drawn) == 1
    check_limits(drawn[0])
    assert pixel(drawn[0], 3, layout.WIDTH - 3) == drawing.ADD_BG


def test_the_system_font_is_the_second_choice(tmp_path: Path) -> None:
    face = Typeface(24, 30, [tmp_path / "nowhere", Path("/usr/share/fonts/truetype/dejavu")])
    if not Path(face.source).exists():
        pytest.fail(f"the system has no DejaVu Sans Mono: {face.source}")
    assert face.source.startswith("/usr/share/fonts")
    assert face.monospace and face.advance == 14


def test_the_vendored_font_is_in_the_package() -> None:
    face = Typeface(24, 30)
    assert face.source.endswith("review/fonts/DejaVuSansMono.ttf")
    assert (Path(face.source).parent / "LICENSE").read_text().count("Bitstream") >= 2


def test_a_decomposed_accent_is_drawn_on_its_letter_and_the_fallback_font_marks_in_ascii(
    tmp_path: Path,
) -> None:
    diff = one_file("@@ -0,0 +1 @@\n+cafe\u0301 = '\u202e'\n")
    face, small = Typeface(24, 30), Typeface(18, 30)
    laid = layout.lay_out(diff, files(diff)[0][0], face, small, 100)
    layout.colour(laid, face)
    assert [text for text, _, _ in laid.rows[1].runs][:1] == ["café"]  # one token, one cell
    fallback = Typeface(24, 30, [tmp_path / "nowhere"])
    assert (fallback.open, fallback.close, fallback.minus) == ("<", ">", "-")
    laid = layout.lay_out(diff, files(diff)[0][0], fallback, fallback, 100)
    assert "<U+202E>" in [text for text, _, mark in laid.rows[1].runs if mark]


def test_a_label_starts_each_caption_and_the_summary_counts() -> None:
    diff = one_file("@@ -1 +1,2 @@\n-a\n+b\n+c\n") + one_file("@@ -1 +1 @@\n-a\n+b\n", "b.py")
    rendering = render(diff, label="uncommitted")
    assert [p.caption for p in rendering.pictures()] == [
        "uncommitted · app.py · +2 −1",
        "uncommitted · b.py · +1 −1",
    ]
    assert rendering.summary == "2 files +3 −2"
    assert render(b"").summary == NOTHING


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("src/app.py", filekinds.SOURCE),
        ("main.go", filekinds.SOURCE),
        ("tests/test_app.py", filekinds.TESTS),
        ("pkg/app_test.go", filekinds.TESTS),
        ("web/button.spec.ts", filekinds.TESTS),
        ("README.md", filekinds.DOCS),
        ("pyproject.toml", filekinds.DOCS),
        (".github/workflows/ci.yml", filekinds.DOCS),
        ("Makefile", filekinds.DOCS),
        ("package-lock.json", filekinds.GENERATED),
        ("Cargo.lock", filekinds.GENERATED),
        ("go.sum", filekinds.GENERATED),
        ("uv.lock", filekinds.GENERATED),
        ("static/app.min.js", filekinds.GENERATED),
        ("api/v1/service.pb.go", filekinds.GENERATED),
        ("vendor/github.com/x/y.go", filekinds.GENERATED),
    ],
)
def test_each_path_has_its_place_in_the_order(path: str, role: int) -> None:
    assert filekinds.role(path) == role


def test_a_file_that_says_it_is_generated_is_said_in_words() -> None:
    body = "@@ -0,0 +1,3 @@\n+// Code generated by protoc-gen-go. DO NOT EDIT.\n"
    body += "+package x\n+var y = 1\n"
    rendering = render(one_file(body, "api/service.go"))
    assert rendering.picture_count == 0
    assert rendering.words == ["api/service.go: says it is generated, +3 −0, not drawn"]
