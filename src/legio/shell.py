"""What a Bash command line will run, read with a real shell grammar (tree-sitter-bash).

``read(command)`` gives every simple command the line runs (its substitutions, here-doc
bodies, ``find -exec`` and ``xargs`` commands, ``bash -c`` scripts included) as its
words, after the wrappers that only start another program (``env``, ``sudo``,
``timeout``, ``nice``, ``nohup``, ``stdbuf``, ``xargs``, ``command``, ``exec``, ``time``,
``builtin``, ``setsid``, ``watch``) and git's global options are taken off. A word only
known when the command runs (``$x``, ``$(…)``, a glob) is ``None``: it stands for any word.

Some lines cannot be read word by word; the reading then says why (``opaque``) and the
approval matcher treats the line as matching every Bash ask rule: a program name that is
not a literal word (brace expansion and ANSI-C quoting included: among the arguments
they only make a word that may be any words); a function definition or a compound
command (``if``, ``while``, ``for``, ``case``, ``{ …; }``, ``( … )``); text piped, here-
doc'ed or here-string'ed into a shell or interpreter; ``eval``, ``source``, ``alias``,
``trap``, ``coproc``; an interpreter given inline code (``python -c``, ``node -e``,
``perl -e``…) or a shell a script that is not literal; git aliases given on the command
line (``-c alias.*``, ``--config-env``) or a git command git does not have (an alias
from a config file); and anything that does not parse.
A backslash-newline is read both as the shell joins it and as written.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from legio.shellwords import (
    AWKS,
    COMPOUND,
    FLOCK_VALUES,
    GIT_COMMANDS,
    GIT_VALUES,
    INLINE,
    INTERPRETER_STOP,
    INTERPRETER_VALUES,
    OPAQUE_PROGRAMS,
    RUNNERS,
    SHELL_VALUES,
    SHELLS,
    WRAPPERS,
    XARGS_VALUES,
    Word,
    command_variable,
    find_exec,
    git_config_opaque,
    interpreter,
    option_value,
    skip_options,
    watched,
)

GLOB = re.compile(r"(?<!\\)(\*|\?|\[[^\]]+\])")
BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
MAX_DEPTH = 8

_PARSER = Parser(Language(tree_sitter_bash.language()))


@dataclass(frozen=True)
class Reading:
    """The simple commands a line runs (normalised words) and, if any, why it is opaque."""

    commands: tuple[tuple[Word, ...], ...]
    opaque: str = ""


@dataclass
class _Reader:
    commands: list[tuple[Word, ...]] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    depth: int = 0

    def opaque(self, why: str) -> None:
        if why not in self.why:
            self.why.append(why)

    # ------------------------------------------------------------- the tree

    def program(self, source: str) -> None:
        if self.depth > MAX_DEPTH:
            self.opaque("nested too deeply")
            return
        tree = _PARSER.parse(source.encode("utf-8", errors="surrogateescape"))
        if tree.root_node.has_error:
            self.opaque("it does not parse as the shell would read it")
        self.node(tree.root_node, fed=False)

    def node(self, node: Node, *, fed: bool) -> None:
        kind = node.type
        if _misread_redirect(node):
            self.opaque("it does not parse as the shell would read it (a redirection)")
        if kind in COMPOUND:
            self.opaque(f"a compound command ({COMPOUND[kind]})")
        if kind == "variable_assignment":
            name = node.child_by_field_name("name")
            value = node.child_by_field_name("value")
            text = _literal(value) if value is not None else ""
            if name is not None and command_variable((name.text or b"").decode(), text):
                self.opaque(f"{(name.text or b'').decode()} set (it makes programs run commands)")
        if kind == "command":
            self.command(node, fed=fed)
            return
        children = node.children
        for i, child in enumerate(children):
            child_fed = False
            if kind == "pipeline":
                child_fed = i > 0 and children[i - 1].type in ("|", "|&")
            elif kind == "redirected_statement" and node.child_by_field_name("body") == child:
                child_fed = fed or any(
                    r.type in ("heredoc_redirect", "herestring_redirect") for r in children
                )
            elif kind == "negated_command":
                child_fed = fed
            self.node(child, fed=child_fed)

    def command(self, node: Node, *, fed: bool) -> None:
        words: list[Word] = []
        for i, child in enumerate(node.children):
            name = node.field_name_for_child(i)
            if name in ("name", "argument"):
                words.append(self.word(child, is_name=name == "name"))
            else:
                self.node(child, fed=False)  # assignments, redirects: their substitutions
                fed = fed or child.type in ("heredoc_redirect", "herestring_redirect")
        if words:
            self.simple(words, fed=fed)

    def word(self, node: Node, *, is_name: bool) -> Word:
        """A word's literal text, or None; substitutions inside it are read too."""
        expanded = False  # brace expansion or ANSI-C quoting: any words, or opaque as a name
        for inner in (node, *_descendants(node)):
            if inner.type in ("command_substitution", "process_substitution"):
                for part in inner.children:
                    self.node(part, fed=False)
            expanded = expanded or inner.type in ("ansi_c_string", "brace_expression")
        if is_name and node.type == "command_name":
            node = node.children[0] if node.child_count == 1 else node
        text = _literal(node)
        if text is not None and node.type in ("word", "concatenation") and BRACE.search(text):
            expanded = True
        if expanded and is_name:
            self.opaque("brace expansion or ANSI-C quoting in the program's name")
        elif text is None and is_name:
            self.opaque("the program's name is only known when it runs")
        return None if expanded else text

    # ------------------------------------------------------------- the words

    def simple(self, words: list[Word], *, fed: bool) -> None:
        """One simple command: wrappers off, then what runs is recorded or read further."""
        while words:
            if words[0] is None:
                self.opaque("the program's name is only known when it runs")
                return
            program = words[0].rsplit("/", 1)[-1]
            rest = words[1:]
            if program in OPAQUE_PROGRAMS:
                self.opaque(OPAQUE_PROGRAMS[program])
                return
            if program == "env":
                words = self.env(rest)
            elif program in WRAPPERS:
                words = skip_options(rest, WRAPPERS[program])
                if program in ("timeout", "chrt", "taskset") and words:
                    words = words[1:]  # the duration, priority or CPU mask
                if program == "sudo" and any(w in ("-s", "-i", "--shell", "--login") for w in rest):
                    self.opaque("sudo starting a shell")
                    return
            elif program == "xargs":
                replace = option_value(rest, ("-I", "--replace"))
                words = [None if w == replace else w for w in skip_options(rest, XARGS_VALUES)]
                words = [*(words or ["echo"]), None]  # more words come from its input
            elif program == "flock":  # flock [options] FILE COMMAND… (or -c COMMAND)
                words = skip_options(rest, FLOCK_VALUES)[1:]
                if any(w in ("-c", "--command") for w in rest):
                    self.plain([program, *rest])
                    return
            elif program in AWKS:  # awk's system() and "| cmd" run commands
                script = next((w for w in skip_options(rest, {"-F", "-v", "-f"}) or [""]), "")
                if script is None or "system" in script or "|" in script:
                    self.opaque(f"{program} running commands")
                self.plain([program, *rest])
                return
            elif program == "watch":
                self.script(" ".join(w if w is not None else "$x" for w in watched(rest)))
                return
            elif program in SHELLS:
                self.shell(program, rest, fed=fed)
                return
            elif interpreter(program):
                self.interpreter(program, rest, fed=fed)
                return
            else:
                self.plain([program, *rest])
                return

    def env(self, rest: list[Word]) -> list[Word]:
        while rest and rest[0] is not None and (rest[0].startswith("-") or "=" in rest[0]):
            option = rest[0]
            name, _, value = option.partition("=")
            if not option.startswith("-") and command_variable(name, value):
                self.opaque(f"{name} set (it makes programs run commands)")
            if option.startswith(("-S", "--split-string")):
                self.opaque("env -S (a command line in one word)")
                return []
            rest = rest[1:]
            if option in ("-u", "-C", "--unset", "--chdir") and rest:
                rest = rest[1:]
        return rest

    def shell(self, program: str, rest: list[Word], *, fed: bool) -> None:
        inline = reads_stdin = False
        i = 0
        while i < len(rest):
            word = rest[i]
            if word is None:
                self.opaque(f"{program} given options or a script only known when it runs")
                return
            if word == "--":
                i += 1
                break
            if word in SHELL_VALUES:
                i += 2
                continue
            if word == "-" or not word.startswith(("-", "+")):
                break
            if word.startswith("--command"):
                inline = True
            elif not word.startswith("--"):
                inline = inline or "c" in word[1:]
                reads_stdin = reads_stdin or "s" in word[1:] or "i" in word[1:]
            i += 1
        first: Word | bool = rest[i] if i < len(rest) else False
        if isinstance(first, str) and first.startswith(("/dev/", "/proc/")):
            first = "-"  # /dev/stdin, /dev/fd/0, /proc/self/fd/0: its input
        if first is None:
            self.opaque(f"{program} given a script only known when it runs")
        elif inline:
            if isinstance(first, str):
                self.script(first)
        elif first is False or first == "-" or reads_stdin:
            self.opaque(f"{program} reading its commands from its input")
        else:
            self.plain([program, *rest])  # a script file: not looked into

    def interpreter(self, program: str, rest: list[Word], *, fed: bool) -> None:
        flags = INLINE[interpreter(program) or program]
        script: Word = "-"
        i = 0
        while i < len(rest):
            word = rest[i]
            if word is None or not word.startswith("-") or word == "-":
                script = word
                break
            name = word.partition("=")[0]
            short = not word.startswith("--")
            if name in flags or (short and any(f[1:] in word[1:] for f in flags if len(f) == 2)):
                self.opaque(f"{program} given inline code ({word})")
                return
            if name in INTERPRETER_STOP:
                script = "module"
                break
            i += 2 if name in INTERPRETER_VALUES and "=" not in word else 1
        if script in flags:  # deno eval
            self.opaque(f"{program} given inline code ({script})")
        elif script == "-":
            self.opaque(f"{program} reading its code from its input")
        else:
            self.plain([program, *rest])

    def script(self, source: str) -> None:
        inner = _Reader(depth=self.depth + 1)
        for variant in _variants(source):
            inner.program(variant)
        self.commands.extend(inner.commands)
        for why in inner.why:
            self.opaque(why)

    def plain(self, words: list[Word]) -> None:
        program = (words[0] or "").rsplit("/", 1)[-1]
        words = [program, *words[1:]]
        if program.startswith("git-"):  # /usr/lib/git-core/git-push
            words = ["git", program[4:], *words[1:]]
            program = "git"
        if program == "find":
            for sub in find_exec(words):
                self.simple(sub, fed=False)
        for option in RUNNERS.get(program, ()):
            value = option_value(words[1:], (option,), cluster=option[1:])
            if value != "\0":
                self.script_or_opaque(value, f"{program} {option}")
        if program == "git":
            words = self.git(words[1:])
            self.git_runs(words)
        self.commands.append(tuple(words))

    def git_runs(self, words: list[Word]) -> None:
        """Commands git itself runs for ``rebase --exec``, ``bisect run``, ``submodule
        foreach``."""
        sub, rest = (words[1], words[2:]) if len(words) > 1 else ("", [])
        if sub == "rebase":
            for i, word in enumerate(rest):
                script = rest[i + 1] if i + 1 < len(rest) else ""
                if word in ("-x", "--exec"):
                    self.script_or_opaque(script, "git rebase --exec")
                elif word is not None and word.startswith(("--exec=", "-x")) and len(word) > 2:
                    self.script_or_opaque(word.split("=", 1)[-1].removeprefix("-x"), "git rebase")
        elif sub in ("bisect", "submodule") and rest and rest[0] in ("run", "foreach"):
            command = skip_options(rest[1:], set())
            if sub == "bisect":
                self.simple(command, fed=False)
            else:
                self.script_or_opaque(" ".join(str(w) for w in command), "git submodule foreach")
                if None in command:
                    self.opaque("git submodule foreach with a command only known when it runs")

    def script_or_opaque(self, script: Word, what: str) -> None:
        if script is None:
            self.opaque(f"{what} with a command only known when it runs")
        elif script:
            self.script(script)

    def git(self, rest: list[Word]) -> list[Word]:
        i = 0
        while i < len(rest) and rest[i] is not None and str(rest[i]).startswith("-"):
            option = str(rest[i])
            name, _, value = option.partition("=")
            if name == "--config-env":
                self.opaque("git --config-env (configuration from the environment)")
            taken = rest[i + 1] if name in GIT_VALUES and not value and i + 1 < len(rest) else ""
            if name == "-c" and (taken is None or git_config_opaque(taken or value)):
                self.opaque("git -c alias/include (a command defined on the command line)")
            i += 2 if name in GIT_VALUES and not value else 1
        sub = rest[i] if i < len(rest) else ""
        if sub is None:
            self.opaque("git's options or command only known when it runs")
        elif sub and sub not in GIT_COMMANDS:
            self.opaque(f"git {sub} (not a git command: an alias or an add-on)")
        return ["git", *rest[i:]]


# ------------------------------------------------------------------ helpers


def _misread_redirect(node: Node) -> bool:
    """Where tree-sitter-bash reads a redirection otherwise than bash: ``0</dev/null git
    push`` (the ``0`` taken for the program, ``git push`` for more targets) or ``sh
    0<<<'…'`` (the ``0`` taken for an argument)."""
    if node.type == "file_redirect":
        targets = [c for i, c in enumerate(node.children) if node.field_name_for_child(i)]
        if len([t for t in targets if t.type != "file_descriptor"]) > 1:
            return True
    children = node.children
    for before, after in itertools.pairwise(children):
        redirect = after.type.endswith("_redirect") or after.type == "redirect"
        if redirect and before.end_byte == after.start_byte:
            inner = before.children[-1] if before.child_count else before
            if inner.type in ("number", "word") and (inner.text or b"").isdigit():
                return True
    return False


def _descendants(node: Node) -> Iterator[Node]:
    """Every node below ``node``, but not inside a substitution (that is read as a program)."""
    for child in node.children:
        yield child
        if child.type not in ("command_substitution", "process_substitution"):
            yield from _descendants(child)


def _literal(node: Node) -> str | None:
    """The text a word stands for when it holds no expansion; else None."""
    kind = node.type
    text = node.text.decode("utf-8", errors="surrogateescape") if node.text else ""
    if kind == "word":
        return None if GLOB.search(text) else re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)
    if kind == "raw_string":
        return text[1:-1]
    if kind == "string":
        if any(c.type not in ('"', "string_content") for c in node.children):
            return None
        return re.sub(r'\\([$`"\\])', r"\1", text[1:-1]).replace("\\\n", "")
    if kind in ("number", "string_content"):
        return text
    if kind == "concatenation":
        parts = [_literal(c) for c in node.children]
        return None if any(p is None for p in parts) else "".join(str(p) for p in parts)
    return None


def _variants(source: str) -> list[str]:
    """The text as written, and as the shell reads it with backslash-newlines joined."""
    joined = _join_continuations(source)
    return [source] if joined == source else [source, joined]


def _join_continuations(source: str) -> str:
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(source):
        c = source[i]
        if c == "\\" and quote != "'" and source[i + 1 : i + 2] == "\n":
            i += 2
            continue
        if c == "\\" and quote != "'":
            out.append(source[i : i + 2])
            i += 2
            continue
        if c in "'\"" and (not quote or quote == c):
            quote = "" if quote else c
        out.append(c)
        i += 1
    return "".join(out)


CACHED_LENGTH = 4096  # longer commands are read anew each time (the cache stays small)


def read(command: str) -> Reading:
    """What ``command`` runs, word by word, or why it cannot be read so (see the module).
    Never raises: a command too deeply nested to read (or any failure) is opaque."""
    if len(command) <= CACHED_LENGTH:
        return _read_cached(command)
    return _read(command)


@functools.lru_cache(maxsize=1024)
def _read_cached(command: str) -> Reading:
    return _read(command)


def _read(command: str) -> Reading:
    reader = _Reader()
    try:
        reader.script(command)
    except RecursionError:
        return Reading((), "nested too deeply to read")
    except Exception as e:  # fail closed: what cannot be read asks
        return Reading((), f"it could not be read ({type(e).__name__})")
    return Reading(tuple(reader.commands), "; ".join(reader.why))
