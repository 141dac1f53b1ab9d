"""Text someone else wrote, as Caesar reads it: every character that could hide or reorder
what he sees made visible.

Approvals show commands with it; ``/diff``, ``/projects`` and ``legio check`` show branch
names, commit subjects, authors and file names with it (an agent chooses all of them).
"""

from __future__ import annotations


def visible(text: str, keep: str = "\n\t") -> str:
    """``text`` with every non-printable character (to Python: controls, a carriage return,
    bidirectional overrides such as U+202E, zero-width characters) shown as ``⟨U+XXXX⟩``.

    ``keep``: characters left as they are (newlines and tabs by default, so a script reads
    as lines); ``keep=""`` for a name that must stay on one line (a branch, a file name).
    """
    return "".join(c if c.isprintable() or c in keep else f"⟨U+{ord(c):04X}⟩" for c in text)


def visible_name(text: str) -> str:
    """One name on one line: a newline or a tab in it is shown as ``⟨U+000A⟩``/``⟨U+0009⟩``."""
    return visible(text, keep="")
