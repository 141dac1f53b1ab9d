"""What ``legio.shell.reader`` knows of git: the commands the installed git has (asked once,
with no configuration of the daemon's, else a built-in list), its global options, the
options whose value is a command git runs, the commands that push under another name,
and which variables a line that runs git may set. ``read_git`` reads one git command's
words (after ``git``) into what it runs and, if it cannot tell, why it is opaque."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field

from legio.shell.words import HARMLESS_VALUES, Word, command_variable, skip_options

# used only when git cannot be asked (not installed, or it failed)
_STATIC_NAMES = """
    add am archive bisect branch bundle checkout cherry-pick citool clean clone commit
    describe diff fetch format-patch gc gitk grep gui init log maintenance merge mv
    notes pull push range-diff rebase reset restore revert rm scalar shortlog show
    sparse-checkout stash status submodule switch tag worktree config fast-export
    fast-import filter-branch mergetool pack-refs prune reflog remote repack replace
    annotate blame bugreport count-objects diagnose difftool gitweb help instaweb
    merge-tree rerere show-branch verify-commit verify-tag version whatchanged
    archimport cvsexportcommit cvsimport cvsserver imap-send p4 quiltimport request-pull
    send-email svn apply checkout-index commit-graph commit-tree hash-object index-pack
    merge-file merge-index mktag mktree multi-pack-index pack-objects prune-packed
    read-tree symbolic-ref unpack-objects update-index update-ref write-tree cat-file
    cherry diff-files diff-index diff-tree for-each-ref for-each-repo get-tar-commit-id
    ls-files ls-remote ls-tree merge-base name-rev pack-redundant rev-list rev-parse
    show-index show-ref unpack-file var verify-pack daemon fetch-pack http-backend
    send-pack update-server-info check-attr check-ignore check-mailmap check-ref-format
    column credential credential-cache credential-store fmt-merge-msg hook
    interpret-trailers mailinfo mailsplit merge-one-file patch-id stripspace lfs flow
    annex receive-pack http-push upload-pack
"""
STATIC_GIT_COMMANDS = frozenset(_STATIC_NAMES.split())

# global options that take the next word (unless given with =)
GIT_VALUES = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix"}
GIT_VALUES |= {"--config-env"}

# commands that push under another name: each also reads as ``git push`` and any words
PUSH_LIKE = {"send-pack", "http-push", "receive-pack", "subtree push", "svn dcommit"}
PUSH_LIKE |= {"p4 submit", "cvsexportcommit"}

# git command -> its options whose value is a command or program git runs (or a
# directory it takes hooks or modules from): a short letter anywhere in a cluster, a
# long name or any prefix of it (git takes unambiguous prefixes)
GIT_RUNS: dict[str, tuple[str, ...]] = {
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "clone": ("-u", "--upload-pack", "--template", "-c", "--config"),
    "init": ("--template",),
    "ls-remote": ("-u", "--upload-pack", "--exec"),
    "push": ("--receive-pack", "--exec"),
    "send-pack": ("--receive-pack", "--exec"),
    "fetch-pack": ("--upload-pack", "--exec"),
    "archive": ("--exec",),
    "difftool": ("-x", "--extcmd", "-t", "--tool"),
    "mergetool": ("-t", "--tool"),
    "grep": ("-O", "--open-files-in-pager"),
    "instaweb": ("-d", "--httpd", "-b", "--browser", "-m", "--module-path"),
    "daemon": ("--access-hook",),
    "send-email": ("--smtp-server", "--sendmail-cmd", "--to-cmd", "--cc-cmd", "--header-cmd"),
    "filter-branch": (
        "--setup",
        "--env-filter",
        "--tree-filter",
        "--index-filter",
        "--parent-filter",
        "--msg-filter",
        "--commit-filter",
        "--tag-name-filter",
    ),
    "rebase": ("-x", "--exec"),  # spelled out, its command is read as a script
}
# commands that run a command given in their arguments, or a program of the user's choosing
GIT_OPAQUE = {"remote-ext": "git remote-ext (its address is a command)", "shell": "git shell"}
GIT_OPAQUE |= {"web--browse": "git web--browse (a browser command)"}

# git settings that cannot make git run another command (any other ``git -c`` is opaque:
# core.pager, core.sshCommand, diff.external, filter.*, alias.*, include.* all can)
_SAFE_GIT_CONFIG_WORDS = """
    user. color. advice. init.defaultbranch core.quotepath core.autocrlf safe.directory
    log. format.pretty commit.gpgsign tag.gpgsign pull.rebase push.default
    merge.conflictstyle diff.renames status. column.ui
"""
SAFE_GIT_CONFIG = tuple(_SAFE_GIT_CONFIG_WORDS.split())

# variables a line that runs git may set (an upper-case name not here, or a variable
# that makes programs run commands set to anything but a harmless value, is opaque there:
# HOME, XDG_CONFIG_HOME, GIT_DIR, PATH… choose the config, hooks and programs git runs)
_SAFE_GIT_VARIABLES_WORDS = """
    GIT_TERMINAL_PROMPT GIT_OPTIONAL_LOCKS GIT_FLUSH GIT_MERGE_AUTOEDIT GIT_MERGE_VERBOSITY
    GIT_LITERAL_PATHSPECS GIT_GLOB_PATHSPECS GIT_NOGLOB_PATHSPECS GIT_ICASE_PATHSPECS
    GIT_CONFIG_NOSYSTEM GIT_PROGRESS_DELAY GIT_REFLOG_ACTION LANG LANGUAGE TZ TERM NO_COLOR
    COLUMNS LINES
"""
SAFE_GIT_VARIABLES = frozenset(_SAFE_GIT_VARIABLES_WORDS.split())
SAFE_GIT_PREFIXES = ("LC_", "GIT_AUTHOR_", "GIT_COMMITTER_", "GIT_TRACE")
# lower-case names a shell ties to a variable programs read (zsh's path is PATH)
TIED = frozenset(
    ["path", "fpath", "cdpath", "manpath", "mailpath", "module_path", "fignore", "psvar"]
)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def git_config_opaque(setting: str) -> bool:
    """Whether a ``git -c`` setting could make git run something (anything not known safe)."""
    key = setting.partition("=")[0].lower()
    return not key.startswith(SAFE_GIT_CONFIG)


def git_variable(name: Word, value: Word = None) -> bool:
    """Whether setting ``name`` (to ``value``; None: unknown) on a line that runs git can
    change what git runs. Lower-case names are the shell's own (no program git starts
    takes a command from one); a name only known when the line runs can be any."""
    if name is None or not NAME.fullmatch(name):
        return True
    if command_variable(name, value):
        return True
    if value is not None and value.strip() in HARMLESS_VALUES and command_variable(name, None):
        return False  # GIT_PAGER=cat
    if name in SAFE_GIT_VARIABLES or name.startswith(SAFE_GIT_PREFIXES):
        return False
    return name != name.lower() or name in TIED


# ------------------------------------------------------------------ installed commands

_lock = threading.Lock()
_installed: frozenset[str] | None = None


def git_commands() -> frozenset[str]:
    """The commands the installed git has (``git --list-cmds=builtins,main,others``), asked
    once (later calls are free) with no configuration of the daemon's user, so none of its
    aliases counts; the built-in list if git cannot be asked."""
    global _installed
    with _lock:
        if _installed is None:
            _installed = _ask_git() or STATIC_GIT_COMMANDS
        return _installed


def _ask_git() -> frozenset[str]:
    with tempfile.TemporaryDirectory(prefix="legio-git-") as home:
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": home, "LC_ALL": "C"}
        env |= {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
        try:
            done = subprocess.run(
                ["git", "--list-cmds=builtins,main,others"],
                env=env,
                cwd=home,
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return frozenset()
    names = frozenset(done.stdout.split()) if done.returncode == 0 else frozenset()
    return names if "push" in names else frozenset()


# ------------------------------------------------------------------ one git command


@dataclass
class GitReading:
    """One git command read: its words (global options off), why it is opaque, the
    shell scripts and commands git itself runs, and what else it amounts to."""

    words: list[Word]
    why: list[str] = field(default_factory=list)
    scripts: list[tuple[Word, str]] = field(default_factory=list)  # (script, what runs it)
    commands: list[list[Word]] = field(default_factory=list)
    also: list[tuple[Word, ...]] = field(default_factory=list)


def read_git(rest: list[Word]) -> GitReading:
    """What ``git`` followed by ``rest`` runs (see the module)."""
    why: list[str] = []
    i = 0
    while i < len(rest) and rest[i] is not None and str(rest[i]).startswith("-"):
        option = str(rest[i])
        name, _, value = option.partition("=")
        taken = rest[i + 1] if name in GIT_VALUES and not value and i + 1 < len(rest) else ""
        if name == "--config-env":
            why.append("git --config-env (configuration from the environment)")
        elif name == "-c" and (taken is None or git_config_opaque(taken or value)):
            why.append("git -c with a setting that can run a command (alias, pager, hook…)")
        elif name == "--git-dir" or (name == "--exec-path" and "=" in option):
            why.append(f"git {name} (a repository or programs of the line's choosing)")
        i += 2 if name in GIT_VALUES and not value else 1
    words = ["git", *rest[i:]]
    reading = GitReading(words, why)
    sub = rest[i] if i < len(rest) else ""
    args = rest[i + 1 :]
    if sub is None:
        why.append("git's options or command only known when it runs")
    elif sub and (sub not in git_commands() or "--" in sub):
        why.append(f"git {sub} (not a command git has: an alias, an add-on or its internals)")
    elif sub in GIT_OPAQUE:
        why.append(GIT_OPAQUE[sub])
    elif sub:
        _subcommand(reading, sub, args)
    return reading


def _subcommand(reading: GitReading, sub: str, args: list[Word]) -> None:
    why = reading.why
    first = next((w for w in args if w is None or not w.startswith("-")), "")
    if sub in PUSH_LIKE or f"{sub} {first}" in PUSH_LIKE or sub.startswith("remote-"):
        reading.also.append(("git", "push", None))
    if any(w is not None and "ext::" in w for w in args):
        why.append("a git address ext::… (a command)")
    if sub == "config":  # git config core.fsmonitor '…': what a later git will run
        keys = [w for w in args if w is None or not w.startswith("-")]
        if keys and (keys[0] is None or (len(keys) > 1 and git_config_opaque(keys[0]))):
            why.append("git config writes a setting that could make git run a command")
    if sub == "for-each-repo":  # git -C <each repository> <its arguments>
        inner = read_git(skip_options(args, {"--config"}))
        why.extend(inner.why)
        reading.scripts.extend(inner.scripts)
        reading.commands.extend(inner.commands)
        reading.also.extend([tuple(inner.words), *inner.also])
    if sub in GIT_RUNS:
        _command_options(reading, sub, args)
    if sub in ("bisect", "submodule") and args and args[0] in ("run", "foreach"):
        command = skip_options(args[1:], set())
        if sub == "bisect":
            reading.commands.append(command)
        elif None in command:
            why.append("git submodule foreach with a command only known when it runs")
        else:
            reading.scripts.append((" ".join(str(w) for w in command), "git submodule foreach"))


def _command_options(reading: GitReading, sub: str, args: list[Word]) -> None:
    """Options whose value git runs: ``rebase -x``/``--exec`` spelled out are read as
    scripts; every other spelling, and any such option of another command, is opaque."""
    runs = GIT_RUNS[sub]
    letters = "".join(o[1] for o in runs if len(o) == 2)
    longs = [o for o in runs if o.startswith("--")]
    for i, word in enumerate(args):
        if word is None:
            reading.why.append(f"git {sub} given a word only known when it runs")
            return
        name, eq, value = word.partition("=")
        after = args[i + 1] if i + 1 < len(args) else ""
        if sub == "rebase" and (word in ("-x", "--exec") or (name == "--exec" and eq)):
            reading.scripts.append((value if eq else after, "git rebase --exec"))
            continue
        if sub == "rebase" and word.startswith("-x") and not word.startswith("--"):
            reading.scripts.append((word[2:], "git rebase -x"))
            continue
        if word.startswith("--") and len(name) > 2:
            if any(o.startswith(name) for o in longs):
                reading.why.append(f"git {sub} {name} (its value is a command git runs)")
                return
        elif word.startswith("-") and any(c in letters for c in word[1:]):
            reading.why.append(f"git {sub} {word} (its value is a command git runs)")
            return
