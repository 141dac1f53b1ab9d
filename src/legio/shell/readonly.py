"""Whether a Bash line only reads: what a plan turn's shell may run (``legio.sessions.planfence``).

A line is read-only when ``legio.shell.reader`` reads it word by word (not opaque), it
redirects no output into a file (only ``2>&1``-style copies and ``/dev/null``), and
every simple command it runs (substitutions, ``xargs`` and ``find -exec`` commands
included) is a program of ``READERS`` given none of the options that make it write or
run another program (``WRITING``), or a git command of ``GIT_READERS``; and it sets no
variable (``PATH=. ls`` runs another ``ls``). Anything else is
not known to be read-only, so it is not: the judge fails closed (an unknown program, a
program name only known when the line runs, a ``>`` anywhere else, even quoted).
"""

from __future__ import annotations

import re

from legio.shell.reader import read

# programs that read files or print facts, and write nothing but their output
_READERS = """
    cat head tail ls grep egrep fgrep rg wc find pwd echo printf stat du df diff cmp cut tr
    basename dirname realpath readlink which whoami id uname true false test [ nl cd sort
    md5sum sha1sum sha256sum sha512sum jq
"""
READERS = frozenset(_READERS.split())
# options (or their prefixes) that make one of them write a file or run a program
WRITING: dict[str, tuple[str, ...]] = {
    "find": ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fls"),
    "sort": ("-o", "--output", "--compress-program"),
    "rg": ("--pre",),
    "printf": ("-v",),
}
# git commands that only read (its options that write or run a program are refused below)
GIT_READERS = frozenset(
    [
        "status",
        "log",
        "show",
        "diff",
        "blame",
        "ls-files",
        "ls-tree",
        "rev-parse",
        "grep",
        "shortlog",
        "describe",
        "cat-file",
        "rev-list",
        "whatchanged",
    ]
)
GIT_WRITING = ("--output", "--ext-diff", "--textconv", "-o", "--open-files-in-pager", "-O")
# output copied to another descriptor or thrown away: no file written
HARMLESS_REDIRECT = re.compile(r"\d*>&\d+-?|&?\d*>>?\s*/dev/null\b|\d*>&-")
# a variable set on the line (``PATH=. ls`` runs another ls; git and pagers read many)
ASSIGNMENT = re.compile(r"(?:^|[\s;&|(`])[A-Za-z_]\w*\+?=")


def not_read_only(command: str) -> str:
    """Why ``command`` is not known to be read-only ("" when it is); see the module."""
    if ">" in HARMLESS_REDIRECT.sub("", command):
        return "it writes output into a file (a '>' in the line)"
    if ASSIGNMENT.search(command):
        return "it sets a variable (one can change which program runs)"
    reading = read(command)
    if reading.opaque:
        return f"it cannot be read word by word ({reading.opaque})"
    for words in reading.commands:
        why = _command(words)
        if why:
            return why
    return ""


def _command(words: tuple[str | None, ...]) -> str:
    if not words:
        return ""
    program = words[0]
    if program is None:
        return "a program only known when the line runs"
    if (program == "git" or program in WRITING) and None in words[1:]:
        return f"{program} is given a word only known when the line runs (it may be an option)"
    args = [w for w in words[1:] if w is not None]
    if program == "git":
        sub = args[0] if args else ""
        if sub and sub not in GIT_READERS:  # none: git --version, git --help
            return f"git {sub} is not known to only read"
        bad = [a for a in args[1:] if a.startswith(GIT_WRITING)]
        return f"git {sub} {bad[0]} may write or run a program" if bad else ""
    if program not in READERS:
        return f"{program} is not known to only read"
    bad = [a for a in args if a.startswith(WRITING.get(program, ()))] if program in WRITING else []
    return f"{program} {bad[0]} may write or run a program" if bad else ""
