"""``visible``: what an agent wrote, as Caesar reads it: nothing invisible gets through."""

from __future__ import annotations

import pytest

from legio.visible import visible, visible_name


@pytest.mark.parametrize(
    "hidden",
    [
        "\u202e",  # right-to-left override (Python: not printable)
        "\r",
        "\u200b",  # zero-width space
        "\u200d",  # zero-width joiner
        "\u200e",  # left-to-right mark
        "\u2060",  # word joiner
        "\u2064",  # invisible plus
        "\u206f",
        "\ufeff",  # byte order mark
        "\u180e",  # Mongolian vowel separator
        "\u00ad",  # soft hyphen
        "\u3164",  # Hangul filler
        "\u115f",  # Hangul choseong filler
        "\u1160",  # Hangul jungseong filler
        "\uffa0",  # halfwidth Hangul filler
        "\u2800",  # braille pattern blank
        "\u034f",  # combining grapheme joiner
        "\u17b4",  # Khmer vowel inherent aq
        "\u17b5",
        "\ufe00",  # variation selectors
        "\ufe0f",
        "\U000e0100",
        "\U000e01ef",
        "\U000e0001",  # language tag
        "\U000e0041",  # tag latin capital A
        "\U000e007f",  # cancel tag
    ],
)
def test_each_invisible_character_is_shown_by_its_code(hidden: str) -> None:
    shown = f"⟨U+{ord(hidden):04X}⟩"
    assert visible_name(f"app{hidden}.py") == f"app{shown}.py"
    assert visible_name(f"app.py{hidden}") == f"app.py{shown}"


def test_combining_marks_with_no_base_or_stacked_are_shown() -> None:
    assert visible_name("\u0301app.py") == "⟨U+0301⟩app.py"  # nothing under it
    assert visible_name("app \u0301.py") == "app ⟨U+0301⟩.py"  # a space under it
    assert visible_name("app\u200b\u0301.py") == "app⟨U+200B⟩⟨U+0301⟩.py"  # nothing drawn
    assert visible("a\n\u0301") == "a\n⟨U+0301⟩"
    assert visible_name("x\u20dd") == "x\u20dd"  # an enclosing mark on a letter is drawn
    zalgo = "a\u0336\u0337\u0338"  # three marks NFC keeps, drawn over the neighbours
    assert visible_name(f"{zalgo}pp.py") == "a⟨U+0336⟩⟨U+0337⟩⟨U+0338⟩pp.py"


def test_accented_names_in_any_script_read_as_written() -> None:
    for name in (
        "cafe\u0301.txt",  # é written decomposed (macOS): NFC composes it
        "vie\u0323\u0302t.md",  # ệ decomposed: two marks, NFC composes both
        "café.txt",
        "\u0e17\u0e35\u0e48.txt",  # Thai: a vowel and a tone mark on one consonant
        "\u0645\u064e\u0651.txt",  # Arabic: a vowel and shadda
        "\u05e9\u05bc\u05b8.txt",  # Hebrew: dagesh and qamats
        "naïve résumé — 東京 🙂",
    ):
        assert visible_name(name) == name, name
    assert visible("line one\n\tline two") == "line one\n\tline two"
    assert visible_name("a\nb\tc") == "a⟨U+000A⟩b⟨U+0009⟩c"
