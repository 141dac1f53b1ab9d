"""The diff's HTML page: self-contained and inert (no script, no request to anywhere),
everything from the diff escaped, hidden characters marked, both layouts in one page."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from legio.review.page import MAX_ROWS, html_page


def one_file(body: str, path: str = "app.py") -> bytes:
    return (
        f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n"
        f"+++ b/{path}\n{body}"
    ).encode("utf-8", "surrogateescape")


HOSTILE = one_file(
    "@@ -1,2 +1,2 @@ def <b>f</b>():\n"
    " keep = '<script>alert(1)</script>'\n"
    '-src = "https://evil.example/x.js"\n'
    "+bidi = 'abc\u202edef' + '\udcff'\n",
    path="<img src=x onerror=alert(1)>.py",
)


class Tags(HTMLParser):
    """Every tag and attribute of a page, as a browser's parser reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)
        self._in_style = tag == "style"

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False


def test_the_page_runs_nothing_and_asks_for_nothing() -> None:
    page = html_page(HOSTILE, "vorenus · #app <script>").decode()
    parsed = Tags()
    parsed.feed(page)
    assert parsed.tags <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "h2",
        "p",
        "ul",
        "li",
        "table",
        "tr",
        "td",
        "span",
    }
    assert parsed.attributes <= {
        "lang",
        "charset",
        "http-equiv",
        "content",
        "name",
        "class",
        "colspan",
    }
    assert parsed.attributes.isdisjoint({"src", "href", "style", "onerror", "onload"})
    assert "url(" not in parsed.style and "@import" not in parsed.style
    assert "http" not in parsed.style
    assert "content=\"default-src 'none'; style-src 'unsafe-inline'\"" in page
    assert "<script" not in page.lower()


def test_everything_from_the_diff_is_escaped_and_hidden_characters_marked() -> None:
    page = html_page(HOSTILE, "t").decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;.py" in page
    assert "def &lt;b&gt;f&lt;/b&gt;()" in page
    assert "\u202e" not in page
    assert '<span class="mark">⟨U+202E⟩</span>' in page
    assert '<span class="mark">⟨0xFF⟩</span>' in page


def test_unified_on_a_narrow_screen_side_by_side_on_a_wide_one() -> None:
    page = html_page(one_file("@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n"), "t").decode()
    assert '<table class="u code">' in page and '<table class="s code">' in page
    assert "@media (min-width: 900px)" in page
    # side by side: the removed and the added line on one row
    assert re.search(r'<td class="n nd">2</td><td class="d">.*</td><td class="n na">2</td>', page)
    assert '<span class="k">' not in page or ".code .k" in page  # Pygments' classes styled


def test_an_empty_diff_says_nothing_to_show() -> None:
    assert "nothing to show" in html_page(b"", "t").decode()


def test_the_page_is_bounded() -> None:
    body = "@@ -0,0 +1,4000 @@\n" + "".join(f"+v{i} = {i}\n" for i in range(4000))
    diff = b"".join(one_file(body, f"m{i}.py") for i in range(10))
    page = html_page(diff, "t").decode()
    assert page.count("<tr") <= 2 * (MAX_ROWS + 100)
    assert f"only its first {MAX_ROWS - 7 * 4000:,} lines shown" in page
    assert "2 more files not shown" in page
