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
line (``-c alias.*``, ``--config-env``), a git command the installed git does not have
(an alias from a config file), a git option whose value is a command git runs
(``legio.shell.gitwords``), or a variable git reads (``HOME``, ``GIT_DIR``…) set on a line that
runs git; and anything that does not parse. git's other ways to push (``send-pack``…) are
also read as ``git push`` followed by any words; the dynamic loader and ``make --eval``
are opaque. After a program not known to take its arguments as data (``setarch``,
``prlimit``, ``strace``…), ``later_programs`` reads each run of words from a later word
that may start a program, for the matcher to compare with a rule's words.
A backslash-newline is read both as the shell joins it and as written.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from legio.shell.gitwords import NAME, git_variable, read_git
from legio.shell.tree import (
    descendants,
    literal,
    misread_redirect,
    node_text,
    numeric_index,
    variants,
)
from legio.shell.words import (
    AWKS,
    COMPOUND,
    DATA_PROGRAMS,
    FLOCK_VALUES,
    INLINE,
    INTERPRETER_STOP,
    INTERPRETER_VALUES,
    LOADER,
    MAKES,
    OPAQUE_PROGRAMS,
    RUNNERS,
    SHELL_VALUES,
    SHELLS,
    WRAPPERS,
    XARGS_VALUES,
    Word,
    command_variable,
    find_exec,
    interpreter,
    option_value,
    skip_options,
    watched,
)

BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
MAX_DEPTH = 8
ARITHMETIC_TEST = re.compile(r"\s-(eq|ne|lt|le|gt|ge)\s")
SETTERS = {"read", "mapfile", "readarray", "getopts", "printf", "let"}  # builtins that set

if TYPE_CHECKING:
    from tree_sitter import Node, Parser


@functools.cache
def _parser() -> Parser:
    """The bash grammar, loaded with the first command read (not at start)."""
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


@dataclass(frozen=True)
class Reading:
    """The simple commands a line runs (normalised words) and, if any, why it is opaque."""

    commands: tuple[tuple[Word, ...], ...]
    opaque: str = ""


@dataclass
class _Reader:
    commands: list[tuple[Word, ...]] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    setting: list[str] = field(default_factory=list)  # variables git could read, set here
    depth: int = 0

    def sets(self, name: Word, value: Word = None) -> None:
        """A variable the line sets: opaque if the line also runs git and git could read it."""
        if git_variable(name, value) and (name or "?") not in self.setting:
            self.setting.append(name or "a variable only known when it runs")

    def opaque(self, why: str) -> None:
        if why not in self.why:
            self.why.append(why)

    # ------------------------------------------------------------- the tree

    def program(self, source: str) -> None:
        if self.depth > MAX_DEPTH:
            self.opaque("nested too deeply")
            return
        tree = _parser().parse(source.encode("utf-8", errors="surrogateescape"))
        if tree.root_node.has_error:
            self.opaque("it does not parse as the shell would read it")
        self.node(tree.root_node, fed=False)

    def node(self, node: Node, *, fed: bool) -> None:
        kind = node.type
        if misread_redirect(node):
            self.opaque("it does not parse as the shell would read it (a redirection)")
        if kind in COMPOUND:
            self.opaque(f"a compound command ({COMPOUND[kind]})")
        if kind == "variable_assignment":
            name = node.child_by_field_name("name")
            value = node.child_by_field_name("value")
            text = literal(value) if value is not None else ""
            if name is not None and name.type == "subscript":  # HOME[0]=… sets HOME
                name = name.child_by_field_name("name") or name.children[0]
            variable = (name.text or b"").decode() if name is not None else ""
            if command_variable(variable, text):
                self.opaque(f"{variable} set (it makes programs run commands)")
            self.sets(variable, text)
        self.setters(node)
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

    def setters(self, node: Node) -> None:
        """Variables set otherwise than by ``NAME=value``: ``export``/``declare``/``local``
        arguments (a name reference or an integer sets others), ``${X:=v}``, and any
        arithmetic (``$((…))``, ``a[i]``, ``[[ a -eq b ]]``: a variable's value is evaluated,
        and ``X=1`` in it sets ``X``)."""
        kind = node.type
        if kind == "declaration_command":
            for child in node.children[1:]:
                text = literal(child)
                if child.type == "variable_name":
                    self.sets((child.text or b"").decode())
                elif child.type == "variable_assignment":
                    continue  # read as an assignment
                elif text is None or (text.startswith(("-", "+")) and ("n" in text or "i" in text)):
                    self.sets(None)
                elif not text.startswith(("-", "+")):
                    name, eq, value = text.partition("=")
                    self.sets(name, value if eq else None)
        elif kind == "expansion" and any(c.type in ("=", ":=") for c in node.children):
            self.sets(
                next((node_text(c) for c in node.children if c.type == "variable_name"), None)
            )
        elif (
            kind == "arithmetic_expansion"
            or (kind == "subscript" and not numeric_index(node))
            or (kind == "test_command" and ARITHMETIC_TEST.search(node_text(node)))
        ):
            self.sets(None)

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
        for inner in (node, *descendants(node)):
            self.setters(inner)
            if inner.type in ("command_substitution", "process_substitution"):
                for part in inner.children:
                    self.node(part, fed=False)
            expanded = expanded or inner.type in ("ansi_c_string", "brace_expression")
        if is_name and node.type == "command_name":
            node = node.children[0] if node.child_count == 1 else node
        text = literal(node)
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
            if LOADER.fullmatch(program):
                self.opaque("the dynamic loader (it runs the program it is given)")
                return
            if program in MAKES and any(_make_eval(w) for w in rest):
                self.opaque(f"{program} --eval (a makefile given on the line)")
                return
            if program == "env":
                words = self.env(rest)
            elif program in WRAPPERS:
                words = skip_options(rest, WRAPPERS[program])
                if program in ("sudo", "doas"):  # sudo NAME=value… command
                    words = self.assignments(words)
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

    def assignments(self, words: list[Word]) -> list[Word]:
        """Leading ``NAME=value`` words (after ``sudo``'s options) read as ``env`` reads them."""
        count = 0
        for word in words:
            if word is None or "=" not in word or not NAME.fullmatch(word.partition("=")[0]):
                break
            count += 1
        self.env(words[:count])
        return words[count:]

    def env(self, rest: list[Word]) -> list[Word]:
        while rest and rest[0] is not None and (rest[0].startswith("-") or "=" in rest[0]):
            option = rest[0]
            name, _, value = option.partition("=")
            if not option.startswith("-") and command_variable(name, value):
                self.opaque(f"{name} set (it makes programs run commands)")
            if not option.startswith("-"):
                self.sets(name, value)
            cluster = option.startswith("-") and not option.startswith("--")
            if option.startswith("--split-string") or (cluster and "S" in option.split("=")[0]):
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
        for variant in variants(source):
            inner.program(variant)
        self.commands.extend(inner.commands)
        for why in inner.why:
            self.opaque(why)
        self.setting.extend(n for n in inner.setting if n not in self.setting)

    def plain(self, words: list[Word]) -> None:
        program = (words[0] or "").rsplit("/", 1)[-1]
        words = [program, *words[1:]]
        if program.startswith("git-"):  # /usr/lib/git-core/git-push
            words = ["git", program[4:], *words[1:]]
            program = "git"
        if program in SETTERS and (program != "printf" or any(_v(w) for w in words)):
            for word in words[1:]:
                if word is None or NAME.fullmatch(word) or program == "let":
                    self.sets(word if program != "let" else None)
        if program == "find":
            for sub in find_exec(words):
                self.simple(sub, fed=False)
        for option in RUNNERS.get(program, ()):
            value = option_value(words[1:], (option,), cluster=option[1:])
            if value != "\0":
                self.script_or_opaque(value, f"{program} {option}")
        if program == "git":
            git = read_git(words[1:])
            words = git.words
            for why in git.why:
                self.opaque(why)
            for script, what in git.scripts:
                self.script_or_opaque(script, what)
            for command in git.commands:
                self.simple(command, fed=False)
            self.commands.extend(git.also)
        self.commands.append(tuple(words))

    def script_or_opaque(self, script: Word, what: str) -> None:
        if script is None:
            self.opaque(f"{what} with a command only known when it runs")
        elif script:
            self.script(script)


# ------------------------------------------------------------------ helpers


def _v(word: Word) -> bool:
    return word is None or word.startswith("-v")


def _make_eval(word: Word) -> bool:
    """``make --eval=…``/``-E …`` (``--ev`` and ``-sE`` spell it too); unknown words may."""
    return word is None or word.startswith("--ev") or bool(re.fullmatch(r"-[A-Za-z]*E.*", word))


def _launches(word: Word, program: str) -> bool:
    """Whether ``word``, an argument of a program that may run its arguments, may start
    ``program`` or another program that runs commands (a wrapper, shell, interpreter…)."""
    if word is None:
        return True  # any word at all, ``program`` included
    base = word.rsplit("/", 1)[-1]
    if base == program or (program == "git" and base.startswith("git-")):
        return True
    return base in LAUNCHERS or interpreter(base) is not None or LOADER.fullmatch(base) is not None


def _holds(word: Word, program: str) -> bool:
    """Whether ``word`` holds ``program`` as a word inside it (``1e git push``,
    ``--to-command=git push``, ``!git push``): a program that runs strings may run it."""
    if word is None or word.rsplit("/", 1)[-1] == program:
        return False  # unknown, or the program itself: read as a later program
    return re.search(rf"(?<![\w.-]){re.escape(program)}(?![\w.])", word) is not None


# programs that run commands, as another program may start them (shell builtins cannot be)
LAUNCHERS = frozenset(
    {*SHELLS, *INLINE, *WRAPPERS, *RUNNERS, *AWKS, *MAKES}
    | {"env", "xargs", "find", "watch", "flock", "parallel"}
)


def later_programs(command: tuple[Word, ...], program: str) -> list[Reading]:
    """A program not known to take its arguments as data (``setarch x86_64 git push``,
    ``prlimit …``, ``strace -f …``, ``unshare -r …``: no list of such programs is ever
    complete) may start a later word as a program: the reading of each run of words from
    a later word that may be ``program`` (a rule's first word) or a program that runs
    commands. Fails closed: a word only known when it runs may be ``program``."""
    if not command or command[0] in DATA_PROGRAMS:
        return []
    readings = []
    if any(_holds(w, program) for w in command[1:]):  # sed '1e git push', ssh -o ProxyCommand=…
        why = f"{command[0]} is given a string that names {program} (it may run it)"
        readings.append(Reading((), why))
    for i in range(1, len(command)):
        if _launches(command[i], program):
            reader = _Reader(depth=1)
            reader.simple(list(command[i:]), fed=False)
            readings.append(_finish(reader))
    return readings


def runs_git(command: tuple[Word, ...]) -> bool:
    """Whether a simple command runs git, or may (a later word of a program not known to
    take its arguments as data is git, or only known when it runs)."""
    if command and command[0] == "git":
        return True
    return (
        bool(command)
        and command[0] not in DATA_PROGRAMS
        and any(
            w is None or w.rsplit("/", 1)[-1] == "git" or w.rsplit("/", 1)[-1].startswith("git-")
            for w in command[1:]
        )
    )


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
    return _finish(reader)


def _finish(reader: _Reader) -> Reading:
    if reader.setting and any(runs_git(c) for c in reader.commands):
        set_here = ", ".join(reader.setting)
        reader.opaque(f"{set_here} set on a line that runs git (its config, hooks, programs)")
    return Reading(tuple(reader.commands), "; ".join(reader.why))
