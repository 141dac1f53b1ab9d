"""Which tool calls wait for Caesar: ask rules, a matcher that sees through shells, grants.

Rules use the Claude CLI's own syntax: ``Bash(git push:*)`` (a command starting with
those words), ``Bash(make deploy)`` (exactly that command), ``WebFetch`` (every call
of a tool), ``WebFetch(https://example.com/*)`` or ``Write(/srv/*)`` (a glob on the
call's URL or path), ``mcp__memoria_vorenus__*`` (a glob on the tool's name). They come
from ``[approvals] ask`` in ``legio.toml`` and ``ask:`` in an agent's frontmatter.

The CLI's own rules are fooled by ``bash -c '…'`` and ``git -C dir push``; this matcher
is not: a command line is split into simple commands at ``&&``, ``||``, ``;``, ``|``,
``&`` and newlines, command substitutions and ``-c`` strings (``bash``, ``sh``, ``zsh``,
``eval``) are matched recursively, and each simple command loses what stands before
the real program (``VAR=1``, ``env -i X=1``, ``sudo``, ``nohup``, ``time``, ``command``,
``exec``, ``xargs``), its path (``/usr/bin/git`` is ``git``) and git's global options
(``-C dir``, ``-c k=v``, ``--git-dir=…``) before the rule's words are compared. A
command that does not parse is matched word by word over its whole text, so it asks
when in doubt.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

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
SHELLS = {"bash", "sh", "zsh", "dash", "ksh", "fish", "busybox"}
WRAPPERS = {"sudo", "nohup", "time", "command", "exec", "nice", "ionice", "stdbuf", "xargs"}
WRAPPER_ARGS = {"-u", "-g", "-n", "-c", "-p", "-o", "-e", "-i", "-l", "-s"}  # options with a value
GIT_VALUE_OPTIONS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}
SEPARATORS = {"&&", "||", ";", "|", "&", "|&", ";;", "(", ")", "\n"}
SUBSTITUTION = re.compile(r"\$\(([^()]*(?:\([^()]*\)[^()]*)*)\)|`([^`]*)`")
MAX_DEPTH = 8
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


def _tokens(command: str) -> list[str] | None:
    """Shell words and operators (``&&``, ``|``…) of ``command``; None if it does not parse."""
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


def _simple_commands(tokens: list[str]) -> Iterator[list[str]]:
    current: list[str] = []
    for token in tokens:
        if token in SEPARATORS or (token and set(token) <= set(";&|()")):
            if current:
                yield current
            current = []
        elif token in ("<", ">", ">>") or token.startswith((">", "<")):
            current.append(token)
        else:
            current.append(token)
    if current:
        yield current


def _strip_redirections(words: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if re.fullmatch(r"\d*(>>?|<<?|&>)&?\d*", word):
            skip = not re.search(r"&\d+$", word)
            continue
        if re.match(r"\d*(>>?|<)\S", word):
            continue
        out.append(word)
    return out


def _assignment(word: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word, re.DOTALL) is not None


def normalize(words: list[str]) -> tuple[list[str], list[str]]:
    """A simple command's real program and arguments, and the ``-c`` strings it runs.

    Returns ``(words, scripts)``: the words with assignments, wrappers, the program's
    path and git's global options removed; ``scripts`` are the strings a shell or
    ``eval`` would run, to be matched in turn.
    """
    words = _strip_redirections(words)
    scripts: list[str] = []
    changed = True
    while words and changed:
        changed = False
        while words and _assignment(words[0]):
            words, changed = words[1:], True
        if not words:
            break
        program = words[0].rsplit("/", 1)[-1]
        if program == "env":
            words, changed = words[1:], True
            while words and (words[0].startswith("-") or _assignment(words[0])):
                option = words[0]
                words = words[1:]
                if option in ("-u", "-C", "-S", "--unset", "--chdir") and words:
                    if option == "-S":
                        scripts.append(words[0])
                    words = words[1:]
        elif program in WRAPPERS:
            words, changed = words[1:], True
            while words and words[0].startswith("-"):
                option = words[0]
                words = words[1:]
                if option in WRAPPER_ARGS and words:
                    words = words[1:]
        elif program in SHELLS or program == "eval":
            rest = words[1:]
            if program == "eval":
                scripts.append(" ".join(rest))
                return [], scripts
            for i, word in enumerate(rest):
                if word.startswith("-") and "c" in word.lstrip("-") and not word.startswith("--"):
                    if i + 1 < len(rest):
                        scripts.append(rest[i + 1])
                    return [], scripts
                if not word.startswith("-"):
                    break
            return [program, *rest], scripts
    if not words:
        return [], scripts
    words = [words[0].rsplit("/", 1)[-1], *words[1:]]
    if words[0] == "git":
        rest = words[1:]
        kept: list[str] = []
        i = 0
        while i < len(rest) and rest[i].startswith("-"):
            option = rest[i]
            i += 2 if option in GIT_VALUE_OPTIONS else 1
        kept = rest[i:]
        words = ["git", *kept]
    return words, scripts


def _substitutions(command: str) -> list[str]:
    return [a or b for a, b in SUBSTITUTION.findall(command)]


def command_matches(command: str, words: list[str], *, prefix: bool, depth: int = 0) -> bool:
    """Whether any simple command inside ``command`` starts with (or is) ``words``."""
    if depth > MAX_DEPTH:
        return True  # nested beyond reason: ask
    if not words:
        return True
    for inner in _substitutions(command):
        if command_matches(inner, words, prefix=prefix, depth=depth + 1):
            return True
    tokens = _tokens(command)
    if tokens is None:  # unbalanced quotes and the like: compare the plain words
        plain = [w.rsplit("/", 1)[-1] for w in re.split(r"[\s;&|()'\"`]+", command) if w]
        n = len(words)
        return any(plain[i : i + n] == words for i in range(len(plain) - n + 1))
    for simple in _simple_commands(tokens):
        program, scripts = normalize(simple)
        for script in scripts:
            if command_matches(script, words, prefix=prefix, depth=depth + 1):
                return True
        if not program:
            continue
        head = program[: len(words)]
        if head == words and (prefix or len(program) == len(words)):
            return True
    return False


# ------------------------------------------------------------------ asking Caesar

Choice = Literal["once", "session", "always", "deny", "stop"]
Outcome = Literal["once", "session", "always", "deny", "stop", "timeout", "cancelled"]
TARGET_MAX = 300
SHOWN_MAX = 1500  # what an approval message shows of a command; longer ones come whole as a file


def visible(text: str) -> str:
    """``text`` with every character that could hide what runs made visible.

    Newlines and tabs stay (a script reads as lines); a carriage return, other control
    characters, bidirectional overrides and zero-width characters (all non-printable
    to Python) become ``⟨U+XXXX⟩``, so ``echo ok\u202e`` cannot reorder what Caesar reads.
    """
    return "".join(c if c.isprintable() or c in "\n\t" else f"⟨U+{ord(c):04X}⟩" for c in text)


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


@dataclass
class ApprovalRequest:
    """One tool call waiting for Caesar. ``outcome`` is set when it ends (a front-end that
    is cancelled reads it: ``timeout`` or ``cancelled``)."""

    id: int
    agent: str
    tool: str  # the CLI's display name
    target: str  # the command, path or URL (shortened), or the input for other tools
    rules: tuple[str, ...]
    reason: str = ""
    full_target: str = ""  # the whole command, path or URL, as it will run
    description: str = ""  # the agent's own words about the call: never checked, never alone
    timeout_s: float = 600.0
    outcome: Outcome | None = None


@dataclass(frozen=True)
class Decision:
    """Caesar's answer to an approval request; ``reason`` goes to the model on a deny."""

    choice: Choice
    reason: str = ""


@dataclass
class QuestionRequest:
    """An agent's questions (the CLI's ``AskUserQuestion`` input), waiting for Caesar."""

    id: int
    agent: str
    questions: list[dict[str, Any]]
    timeout_s: float = 600.0
    outcome: str | None = None


class Asker(Protocol):
    """How a front-end asks Caesar; both calls may be cancelled (read ``outcome``)."""

    async def approve(self, request: ApprovalRequest) -> Decision:
        """Caesar's decision on one tool call."""
        ...

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        """Caesar's answers (question text → chosen labels joined by ", "), or None."""
        ...
