"""Which tool calls wait for Caesar: ask rules, a matcher that sees through shells, grants.

Rules use the Claude CLI's own syntax: ``Bash(git push:*)`` (a command starting with
those words), ``Bash(make deploy)`` (exactly that command), ``WebFetch`` (every call
of a tool), ``WebFetch(https://example.com/*)`` or ``Write(/srv/*)`` (a glob on the
call's URL or path), ``mcp__memoria_vorenus__*`` (a glob on the tool's name). They come
from ``[approvals] ask`` in ``legio.toml`` and ``ask:`` in an agent's frontmatter.

The CLI's own rules are fooled by ``bash -c '…'``, ``git -C dir push`` or ``if true; then
git push; fi``; this matcher reads the command with a real shell grammar (``legio.shell.reader``,
tree-sitter-bash): every simple command the line runs, wrappers (``env``, ``sudo``,
``timeout``, ``xargs``, ``find -exec``…) and git's global options taken off, is compared
word by word, and a line that cannot be read so (a compound command, a program name only
known when it runs, text fed into a shell or interpreter, inline code, ``eval``…) matches
every Bash rule: it asks, and a grant of it covers exactly that command.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from legio.shell import reader as shell
from legio.visible import visible

DEFAULT_ASK = (
    "Bash(git push:*)",
    "Bash(npm publish:*)",
    "Bash(pnpm publish:*)",
    "Bash(yarn publish:*)",
    "Bash(yarn npm publish:*)",
    "Bash(cargo publish:*)",
    "Bash(twine upload:*)",
    "Bash(gh release create:*)",
    "Bash(poetry publish:*)",
    "Bash(uv publish:*)",
    "Bash(docker push:*)",
)

RULE = re.compile(r"^([A-Za-z0-9_*\-]+)(?:\((.*)\))?$", re.DOTALL)
PATH_KEYS = ("file_path", "notebook_path", "path", "url", "pattern")


@dataclass(frozen=True)
class Rule:
    """One ask rule: a tool (or tool-name glob) and, optionally, what the call names."""

    text: str
    tool: str
    spec: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        """A rule from its CLI syntax; ``ValueError`` with the reason if malformed."""
        text = text.strip()
        match = RULE.match(text)
        if not match:
            raise ValueError(
                f"{text!r} is not a rule: write Tool or Tool(spec), e.g. Bash(git push:*)"
            )
        tool, spec = match.group(1), match.group(2)
        if spec is not None and not spec.strip():
            raise ValueError(f"{text!r}: the part in brackets is empty")
        return cls(text, tool, spec.strip() if spec is not None else None)

    def _words(self) -> tuple[list[str], bool]:
        spec = self.spec or ""
        prefix = spec.endswith(":*")
        if prefix:
            spec = spec[:-2]
        elif spec.endswith(" *") or spec.endswith("*"):
            prefix, spec = True, spec.rstrip("*").rstrip()
        try:
            words = shlex.split(spec)
        except ValueError:
            words = spec.split()
        return words, prefix

    def matches(self, tool: str, tool_input: dict[str, Any]) -> bool:
        """Whether a call of ``tool`` with ``tool_input`` falls under this rule."""
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if self.spec is None:
            return True
        if tool == "Bash":
            words, prefix = self._words()
            return command_matches(str(tool_input.get("command", "")), words, prefix=prefix)
        targets = [str(tool_input[k]) for k in PATH_KEYS if isinstance(tool_input.get(k), str)]
        return any(fnmatch.fnmatchcase(t, self.spec) for t in targets)


def parse_rules(texts: Iterable[str]) -> list[Rule]:
    """Rules from their texts (``ValueError`` on the first malformed one)."""
    return [Rule.parse(t) for t in texts]


def rule_problems(texts: Iterable[str]) -> list[str]:
    """Why each malformed rule is malformed (for config validation)."""
    problems = []
    for text in texts:
        try:
            Rule.parse(text)
        except ValueError as e:
            problems.append(str(e))
    return problems


def matching(rules: Iterable[Rule], tool: str, tool_input: dict[str, Any]) -> list[Rule]:
    """The rules this call falls under."""
    return [r for r in rules if r.matches(tool, tool_input)]


# ------------------------------------------------------------------ shell commands

EXACT = "Bash(exactly: {})"  # the grant of one opaque command, exactly as written


def _runs(command: tuple[str | None, ...], words: list[str], *, prefix: bool) -> bool:
    """Whether a simple command's words are (or start with) ``words``. A word only known
    when it runs (None) may be any words at all, or none: from there on it matches."""
    for i, got in enumerate(command):
        if got is None:
            return True
        if i >= len(words):
            return prefix
        if got != words[i]:
            return False
    return len(command) == len(words)


def command_matches(command: str, words: list[str], *, prefix: bool) -> bool:
    """Whether ``command`` runs a simple command that starts with (or is) ``words``;
    always true for a command that cannot be read word by word (``legio.shell.reader``)."""
    if not words:
        return True
    reading = shell.read(command)
    if reading.opaque:
        return True
    words = [words[0].rsplit("/", 1)[-1], *words[1:]]
    for simple in reading.commands:
        if _runs(simple, words, prefix=prefix):
            return True
        for later in shell.later_programs(simple, words[0]):  # setarch x86_64 git push
            if later.opaque or any(_runs(c, words, prefix=prefix) for c in later.commands):
                return True
    return False


def opaque_reason(tool: str, tool_input: dict[str, Any]) -> str:
    """Why a Bash call cannot be read word by word ("" if it can, or is no Bash call)."""
    command = tool_input.get("command")
    if tool != "Bash" or not isinstance(command, str):
        return ""
    return shell.read(command).opaque


# Issue 44: with a hook's "ask", the Claude CLI (2.1.330) was seen to run a line without
# calling ``can_use_tool`` when the line wrote a file of its own "sensitive" list
# (``.gitconfig``, ``.bashrc``…) and set HOME for git. Which lines it treats so cannot be
# told from outside, so a line that would be asked and writes or names a configuration
# file, or writes anything while setting a variable git reads, is refused instead.
WRITES = re.compile(
    r">|\b(rm|mv|cp|tee|truncate|dd|install|ln|chmod|touch|mkdir|rsync|patch|tar|unzip)\b"
    r"|\bsed\s+-i|write|open\(|\s-o\s|--output"
)
# a dotfile anywhere in a path, or a file (the last part of a path) named like a config
CONFIG_NAME = re.compile(
    r"(?:^|[/\s'\"=(,:])(\.[A-Za-z0-9_][^/\s'\";&|]*)"
    r"|(?:^|[/\s'\"=])([\w.-]*config[\w.-]*)(?=$|[\s'\";&|)])"
)
VARIABLE_OPAQUE = ("set on a line that runs git", "makes programs run commands")


def unaskable(tool: str, tool_input: dict[str, Any]) -> str:
    """Why a Bash line that needs Caesar's approval cannot be put to him through the CLI
    (see above): the configuration file it writes or names, or "" when it can be asked."""
    command = tool_input.get("command")
    if tool != "Bash" or not isinstance(command, str):
        return ""
    named = CONFIG_NAME.search(command)
    name = (named.group(1) or named.group(2)) if named else ""
    writes = WRITES.search(command) is not None
    if name and writes:
        return f"it writes and names {name}"
    if writes and any(v in opaque_reason(tool, tool_input) for v in VARIABLE_OPAQUE):
        return "it writes files and sets a variable git reads"
    return ""


def exact_grant(tool_input: dict[str, Any]) -> str:
    """The grant text that covers exactly this (opaque) command."""
    return EXACT.format(tool_input.get("command", ""))


# ------------------------------------------------------------------ asking Caesar

TARGET_MAX = 300
SHOWN_MAX = 1500  # what an approval message shows of a command; longer ones come whole as a file


def shorten(text: str, limit: int = TARGET_MAX) -> str:
    """One line of at most ``limit`` characters, control characters made visible."""
    flat = "".join(c if c.isprintable() else " " for c in text.replace("\n", " ⏎ "))
    flat = " ".join(flat.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def shorten_middle(text: str, limit: int = SHOWN_MAX) -> str:
    """``text`` (made visible) cut in its middle to about ``limit`` characters.

    The start and the end stay, since both say what a command does (``cd x && … && rm -rf
    y``); the cut says how many characters it left out.
    """
    text = visible(text)
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n… [{left_out} characters left out] …\n{text[-tail:]}"
