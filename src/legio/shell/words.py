"""What ``legio.shell.reader`` knows of programs: the ones that only start another program
(wrappers and their options), shells and interpreters (and the options that give them
inline code), programs that run a command given as an option, the shell builtins that
make a line unreadable word by word, the variables that make programs run commands; and
the helpers that read such programs' options (``skip_options``, ``option_value``…). What
it knows of git is in ``legio.shell.gitwords``."""

from __future__ import annotations

import re
from collections.abc import Iterator

Word = str | None  # None: a word only known when the command runs

# fmt: off
COMPOUND = {
    "if_statement": "if", "while_statement": "while/until", "for_statement": "for/select",
    "c_style_for_statement": "for", "case_statement": "case", "compound_statement": "{ …; }",
    "subshell": "( … )", "function_definition": "a function definition",
}
SHELLS = {"bash", "sh", "zsh", "dash", "ksh", "mksh", "fish", "ash", "rbash", "tcsh", "csh"}
# programs that run a shell command given as an option's value
RUNNERS = {"script": ("-c", "--command"), "su": ("-c", "--command"),
           "runuser": ("-c", "--command"), "flock": ("-c", "--command")}
# interpreter -> the options that give it inline code
INLINE: dict[str, tuple[str, ...]] = {
    "python": ("-c",), "node": ("-e", "--eval", "-p", "--print"),
    "nodejs": ("-e", "--eval", "-p", "--print"), "bun": ("-e", "--eval", "-p", "--print"),
    "deno": ("eval",), "perl": ("-e", "-E"), "ruby": ("-e",), "php": ("-r",), "lua": ("-e",),
    "luajit": ("-e",), "Rscript": ("-e",), "tclsh": (), "osascript": ("-e",),
    "pwsh": ("-c", "-Command", "-command"),
}
OPAQUE_PROGRAMS = {
    "eval": "eval", "source": "source", ".": "source (.)", "alias": "an alias",
    "parallel": "GNU parallel (it builds its commands)",
    "trap": "a trap", "coproc": "coproc", "enable": "enable",
}
# wrapper -> options that take a value (the value is the next word unless given with =)
WRAPPERS: dict[str, set[str]] = {
    "sudo": {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group"},
    "doas": {"-u", "-C"}, "time": {"-o", "-f", "--output", "--format"}, "exec": {"-a"},
    "nice": {"-n", "--adjustment"}, "ionice": {"-c", "-n", "--class", "--classdata"},
    "stdbuf": {"-i", "-o", "-e", "--input", "--output", "--error"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "nohup": set(), "command": set(), "builtin": set(), "setsid": set(), "chrt": set(),
    "taskset": set(), "unbuffer": set(), "busybox": set(),
}
# fmt: on
# programs known to take their arguments as data (text, names, paths), never as a program
# to run; after any other program (setarch, prlimit, strace, unshare…) a later word may
# be the program it starts (``legio.shell.reader.later_programs``). git is read by gitwords.
_DATA_PROGRAMS_WORDS = """
    echo printf cat ls grep egrep fgrep head tail wc cut tr uniq test [ [[ mkdir touch rm
    cp mv ln chmod cd pwd basename dirname realpath readlink stat diff true false git
"""
DATA_PROGRAMS = frozenset(_DATA_PROGRAMS_WORDS.split())
# the dynamic loader runs the program given as its argument (ld-linux-x86-64.so.2, ld.so)
LOADER = re.compile(r"ld-linux.*|ld\.so.*|ld-.*\.so.*")
MAKES = {"make", "gmake"}  # make --eval/-E: a makefile (its recipes) given on the line
FLOCK_VALUES = {"-w", "-E", "--timeout", "--wait", "--conflict-exit-code"}
XARGS_VALUES = {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter"}
XARGS_VALUES |= {"--max-args", "--max-lines", "--max-procs", "--max-chars", "--replace"}
FIND_EXEC = {"-exec", "-execdir", "-ok", "-okdir"}
SHELL_VALUES = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}
# interpreter options that take the next word, and those after which the rest is not its own
INTERPRETER_VALUES = {"-W", "-X", "-Q", "-r", "--require", "--import", "--loader", "-C", "-I"}
INTERPRETER_STOP = {"-m"}


# ------------------------------------------------------------------ options


def skip_options(words: list[Word], with_value: set[str]) -> list[Word]:
    i = 0
    while i < len(words) and words[i] is not None and str(words[i]).startswith("-"):
        word = str(words[i])
        if word == "--":
            return words[i + 1 :]
        name = word.partition("=")[0]
        takes = name in with_value and "=" not in word
        takes = takes or (len(word) == 2 and word in with_value)
        i += 2 if takes else 1
    return words[i:]


def option_value(words: list[Word], names: tuple[str, ...], cluster: str = "") -> Word:
    """The value of the first of ``names`` (``"\0"`` if none is given). With ``cluster``
    (a letter), short options run together end with it too (``-qc CMD``); ``-I`` of xargs
    may hold its value (``-I{}``)."""
    for i, word in enumerate(words):
        if word is None:
            continue
        together = len(cluster) == 1 and re.fullmatch(rf"-[A-Za-z]*{cluster}", word)
        if (word in names or together) and i + 1 < len(words):
            return words[i + 1]
        if "-I" in names and word.startswith("-I") and len(word) > 2:
            return word[2:]
    return "\0"


def watched(rest: list[Word]) -> list[Word]:
    return skip_options(rest, {"-n", "--interval", "-q", "--equexit"})


def find_exec(words: list[Word]) -> Iterator[list[Word]]:
    i = 0
    while i < len(words):
        if words[i] in FIND_EXEC:
            end = i + 1
            while end < len(words) and words[end] not in (";", "+"):
                end += 1
            sub = [None if w is not None and "{}" in w else w for w in words[i + 1 : end]]
            if sub:
                yield sub
            i = end
        i += 1


def interpreter(program: str) -> str | None:
    if program in INLINE:
        return program
    base = re.sub(r"[\d.]+$", "", program)  # python3.11, perl5.36, ruby3.1
    return base if base in INLINE else None


# variables that make a program run a command of their choosing (a pager, an editor, an
# ssh or diff program, a config file, a shell's start-up file, a preloaded library)
_COMMAND_VARIABLES_WORDS = """
    PAGER GIT_PAGER EDITOR VISUAL GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_SSH GIT_SSH_COMMAND
    GIT_EXTERNAL_DIFF GIT_ASKPASS SSH_ASKPASS GIT_EXEC_PATH GIT_CONFIG GIT_CONFIG_GLOBAL
    GIT_CONFIG_SYSTEM GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_TEMPLATE_DIR GIT_DIR
    GIT_COMMON_DIR GIT_PROXY_COMMAND GIT_ALLOW_PROTOCOL BASH_ENV ENV PROMPT_COMMAND PS4
    LD_PRELOAD LESSOPEN LESSCLOSE MANPAGER SYSTEMD_PAGER SYSTEMD_EDITOR SUDO_EDITOR
"""
COMMAND_VARIABLES = frozenset(_COMMAND_VARIABLES_WORDS.split())
HARMLESS_VALUES = {"", "cat", "less", "more", "true", ":"}
AWKS = {"awk", "gawk", "mawk", "nawk"}


def command_variable(name: str, value: str | None) -> bool:
    """Whether assigning ``value`` to ``name`` can make a program run another command."""
    risky = name in COMMAND_VARIABLES or name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    return risky and (value is None or value.strip() not in HARMLESS_VALUES)
