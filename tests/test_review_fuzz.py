"""The renderer never fails on a diff made of pieces of diffs in any order, with any
bytes in between: it draws what it can read (within Telegram's limits) and says the rest."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from legio.review.page import html_page
from legio.review.rendering import render

PIECES = [
    b"diff --git a/x.py b/x.py\n",
    b'diff --git "a/\\303\\251\\n" "b/\\342\\200\\256q"\n',
    b"diff --git a/a b c b/a b c\n",
    b"diff --cc m.py\n",
    b"diff --git\n",
    b"--- a/x.py\n",
    b"+++ b/x.py\n",
    b"--- /dev/null\n",
    b"+++ /dev/null\n",
    b'--- "a/q\\"\\\n',
    b"new file mode 100644\n",
    b"deleted file mode 100755\n",
    b"old mode 100644\n",
    b"new mode 100755\n",
    b"rename from a.py\n",
    b"rename to b.py\n",
    b"copy from \n",
    b"similarity index 9x%\n",
    b"index 111..222 160000\n",
    b"Binary files a/x and b/x differ\n",
    b"GIT binary patch\n",
    b"@@ -1,3 +1,4 @@ def f():\n",
    b"@@ -99999999999999999999,2 +0 @@\n",
    b"@@@ -1 -1 +1 @@@\n",
    b"@@ broken\n",
    b" context\n",
    b"+added \xff\xfe\t\x1b[31m\n",
    b"-removed \xe2\x80\xae\n",
    b"+" + b"y" * 3000 + b"\n",
    b"\\ No newline at end of file\n",
    b"+Subproject commit 2222222222222222222222222222222222222222\n",
    b"\n",
    b"\r\n",
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(
    st.lists(
        st.one_of(st.sampled_from(PIECES), st.binary(max_size=12)),
        max_size=40,
    )
)
def test_any_mix_of_diff_pieces_renders_or_is_said(pieces: list[bytes]) -> None:
    diff = b"".join(pieces)
    rendering = render(diff, max_pictures=3)
    for picture in rendering.pictures():
        width, height = Image.open(io.BytesIO(picture.png)).size
        assert width == 1080 and height <= 1280
        assert "\n" not in picture.caption and "\u202e" not in picture.caption
    for said in rendering.words:
        assert "\n" not in said and "\u202e" not in said
    page = html_page(diff, "fuzz").decode()
    assert "<script" not in page.lower()
