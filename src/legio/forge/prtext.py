"""A pull request's text as the agent wrote it, made inert and visible before Caesar sees
it: what he reads in the preview is exactly what is posted, and nothing in it acts on the
forge unseen.

``inert(text)`` for a body, ``inert_title(text)`` for a title (one line). Every rule is
applied to the whole text, in code blocks too: no Markdown parser of Legio's has to agree
with the forge's about where code starts, and a rule applied inside code costs a visible
space or word, never a hidden effect.

- **HTML comments removed**: ``<!-- … -->``, and an unterminated ``<!--`` with everything
  after it (the forge hides both when it renders the body).
- **HTML shown as text**: a ``<`` that would open a tag, a closing tag, a declaration or
  an instruction (a letter, ``/``, ``!`` or ``?`` after it) gets a space after it:
  ``<details>`` is posted as ``< details>``, which every Markdown renderer shows as
  written. Escaping rather than stripping: the agent's words stay readable (``Vec<T>``
  reads ``Vec< T>``), and a stripped tag would hide its own text (a ``<details>`` with
  ``open`` or a ``<sub>`` are not the only tags that change what is shown).
- **Character references shown as text**: an ``&`` that would start one (``&#35;``,
  ``&#x40;``, ``&commat;``, ``&#8203;``) gets a space after it, as a ``<`` does: the forge
  would otherwise draw ``&#35;1`` as ``#1`` (a reference), ``&#64;name`` as a mention, and
  ``&#8203;`` as nothing.
- **Links, images and math shown as written**: every ``[`` and ``$`` not already escaped
  gets a backslash (one visible character). A link reference definition
  (``[x]: # (hidden)``, Markdown's other comment) renders as nothing wherever its label
  starts — in a list item (``- [x]: …``), a quote, or with a label over lines — and an
  image's alt text or a link's target shows other text than the source; math
  (``$\\phantom{…}$``, ``\\color{white}``) hides text too, so a ```` ```math ```` fence is
  posted as ```` ```text ````. A task list's ``- [ ]`` is posted as ``- \\[ ]``.
- **Issue references written out**: ``#12``, ``GH-12``, ``owner/repo#12`` and an issue or
  pull request URL become ``issue 12`` / ``owner/repo issue 12``: no closing keyword
  (``Closes``, ``fixes``, ``resolved``…) can attach to them, and no issue is referenced.
- **Mentions broken**: ``@name`` (not an e-mail's ``@``) becomes ``@ name``: nobody is
  notified, and the reader sees that a name was there.
- **Hidden characters shown**: ``legio.visible`` (``⟨U+200B⟩``…), a carriage return
  dropped; the forms chosen above are visible on purpose (an invisible character between
  ``#`` and ``1`` would be a trick of its own).

``inert`` is idempotent: a preview's text run through it again is unchanged.

``closing_words(text)``: the closing keywords with their references in a commit message.
Legio pushes the agent's commits as they are (their ids are what was checked and shown),
and the forge closes the issues they name when they reach the default branch: the
preview says so, it cannot make them inert.
"""

from __future__ import annotations

import re

from legio.visible import visible, visible_name

COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
UNTERMINATED = re.compile(r"<!--.*\Z", re.DOTALL)
TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
CHARACTER_REFERENCE = re.compile(r"&(?=#[0-9]+;|#[xX][0-9A-Fa-f]+;|[A-Za-z][A-Za-z0-9]*;)")
# a ``[`` or ``$`` not already escaped (after an even number of backslashes)
UNESCAPED = re.compile(r"(?<!\\)((?:\\\\)*)([\[$])")
MATH_FENCE = re.compile(r"^([ \t]{0,3}(?:`{3,}|~{3,})[ \t]*)math(?![\w-])", re.MULTILINE)
ISSUE_URL = re.compile(
    r"(?:https?://)?(?:[\w-]+\.)+[A-Za-z]{2,}(?::\d+)?/([\w.-]+/[\w.-]+)/"
    r"(?:issues|pulls?|discussions)/(\d+)[^\s<>()\[\]]*",
    re.IGNORECASE,
)
QUALIFIED = re.compile(r"([\w.-]+/[\w.-]+)#(\d+)")
NUMBERED = re.compile(r"#(\d+)")
GH = re.compile(r"\bGH-(\d+)", re.IGNORECASE)
MENTION = re.compile(r"(?<![A-Za-z0-9])@(?=[A-Za-z0-9])")
CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?\s+"
    r"(?:[\w.-]+/[\w.-]+#\d+|#\d+|GH-\d+|\S+/(?:issues|pulls?)/\d+)",
    re.IGNORECASE,
)
MAX_CLOSING = 10


def _without_comments(text: str) -> str:
    while True:  # removing one can join the halves of another: until nothing changes
        shorter = COMMENT.sub("", text)
        if shorter == text:
            return UNTERMINATED.sub("", text)
        text = shorter


def _inert(text: str) -> str:
    text = _without_comments(text.replace("\r\n", "\n").replace("\r", ""))
    text = TAG_OPEN.sub("< ", text)
    text = CHARACTER_REFERENCE.sub("& ", text)
    text = UNESCAPED.sub(r"\1\\\2", text)
    text = MATH_FENCE.sub(r"\1text", text)
    text = ISSUE_URL.sub(r"\1 issue \2", text)
    text = QUALIFIED.sub(r"\1 issue \2", text)
    text = GH.sub(r"issue \1", text)
    text = NUMBERED.sub(r"issue \1", text)
    return MENTION.sub("@ ", text)


def inert(text: str) -> str:
    """A body the agent wrote, as it will be posted (the module's docstring)."""
    return visible(_inert(text))


def inert_title(text: str) -> str:
    """A title the agent wrote: ``inert``, on one line."""
    return visible_name(_inert(text))


def closing_words(text: str) -> list[str]:
    """Each closing keyword with its reference in ``text`` (a commit message), once, in
    order, at most ``MAX_CLOSING``; shown with ``visible_name``."""
    found: list[str] = []
    for match in CLOSING.finditer(text):
        words = visible_name(" ".join(match.group(0).split()))
        if words not in found:
            found.append(words)
    return found[:MAX_CLOSING]
