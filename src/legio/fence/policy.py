"""What an agent may touch: its environment, its tools, its folders, its shell.

- **Environment.** A Claude CLI inherits the daemon's whole environment (``options.env``
  can add, not remove), so ``scrub_environment`` deletes the Telegram token variable, the
  forge token variable (kept in ``legio.fence.vault`` first) and every variable matching
  ``[claude] env_deny`` from the daemon's own ``os.environ`` before any CLI starts; a denied
  name is denied even if agents' CLIs would use it
  (``ANTHROPIC_API_KEY``…).
- **Built-in tools.** Every agent gets an explicit list (frontmatter ``tools``, else the
  coding set for centuriones and ``WebSearch, WebFetch`` for the Legatus). With the
  CLI's default set, CLI 2.1.330 defers SDK MCP tools behind ``ToolSearch``.
- **Folders.** Frontmatter ``cwd`` (relative to the agent's folder), else a
  ``workspace/`` of its own; frontmatter ``add_dirs`` grants more folders, outside
  the castra only (both checked by ``legio.fence.folders``). Writes go there and nowhere else.
- **Protected paths.** ``protected_entries`` lists, for one agent, what it may not read
  (the praetorium, the config, the lock, other agents' folders; the file store
  ``attachments/``, which only the Legatus may read) or not write (prompts, edicta,
  acta, commentarii), and, for every agent, every CLI config dir (``castra/state/``),
  the daemon's ``~/.claude*`` and ``$CLAUDE_CONFIG_DIR``, ``/proc/*/environ`` (no
  access). From that one list come both the CLI's ``permissions.deny`` rules
  (``deny_rules``: they bind the file tools and, through the sandbox, shell commands)
  and the ``PreToolUse`` hook (``PathGuard``), which also confines writes and searches
  and tells the model why.
- **Bash.** Runs only inside the CLI's OS sandbox (bubblewrap and socat on Linux), with
  network limited to ``[sandbox] allowed_domains``; without a sandbox it is removed
  from every agent, unless ``[sandbox] mode = "off"`` says otherwise. ``agent_options``
  returns the ``ClaudeAgentOptions`` keywords for all this.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import logging
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from legio.castra import PROMPT_FILE, AgentPrompt, Castra
from legio.config import Config
from legio.errors import LegioError
from legio.fence.cliconfig import daemon_config_dir, daemon_home, state_dir
from legio.fence.keys import (
    KEY_REASON,
    SOCKET_VARS,
    Store,
    agent_sockets,
    git_config_stores,
    key_stores,
    remember_sockets,
)
from legio.fence.tokenfiles import TOKEN_REASON, token_files
from legio.fence.tokenfiles import remember as remember_token_files
from legio.fence.vault import keep_forge_token
from legio.names import LEGATUS

logger = logging.getLogger(__name__)

DEFAULT_CENTURIO_TOOLS = ("Read", "Write", "Edit", "Glob", "Grep", "Bash", "WebSearch", "WebFetch")
DEFAULT_LEGATUS_TOOLS = ("WebSearch", "WebFetch")
WORKSPACE = "workspace"

FORGE_TOKENS = ("GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITLAB_TOKEN")
READ_TOOLS = {"Read", "Glob", "Grep", "LS", "NotebookRead"}
WRITE_TOOLS = {"Write", "Edit", "MultiEdit", "NotebookEdit"}
SEARCH_TOOLS = {"Glob", "Grep", "LS"}
PATH_KEYS = ("file_path", "notebook_path", "path")
WRITING = re.compile(r">|\b(rm|mv|cp|tee|truncate|dd|install|ln|chmod|touch)\b|sed\s+-i")


# ------------------------------------------------------------------ environment


def denied_env_names(config: Config, environ: dict[str, str] | None = None) -> list[str]:
    """Variables of ``environ`` that agents must not see (agents' sockets always)."""
    environ = dict(os.environ if environ is None else environ)
    patterns = [
        config.telegram.token_env,
        config.forge_token_env(),
        *FORGE_TOKENS,  # the forges' usual token variables: Caesar's, whatever [forge] says
        *config.claude.env_deny,
        *SOCKET_VARS,
    ]
    return sorted(name for name in environ if any(fnmatch.fnmatchcase(name, p) for p in patterns))


def scrub_environment(config: Config) -> list[str]:
    """Remove secrets from this process's environment before any CLI inherits it."""
    removed = denied_env_names(config)
    keep_forge_token(config)  # read once, here, before it leaves the environment
    remember_token_files(config)  # files holding the tokens: hidden (legio.fence.tokenfiles)
    remember_sockets(os.environ)  # their paths stay hidden (legio.fence.keys)
    for name in removed:
        os.environ.pop(name, None)
    if removed:
        logger.info("kept from agents' environment: %s", ", ".join(removed))
    return removed


# ------------------------------------------------------------------ tools and workspace


def builtin_tools(prompt: AgentPrompt) -> list[str]:
    """The built-in Claude tools this agent may use."""
    if prompt.settings.tools is not None:
        return list(prompt.settings.tools)
    return list(DEFAULT_LEGATUS_TOOLS if prompt.name == LEGATUS else DEFAULT_CENTURIO_TOOLS)


def agent_home(castra: Castra, name: str) -> Path:
    return castra.root / LEGATUS if name == LEGATUS else castra.centurio_dir(name)


def working_dir(castra: Castra, prompt: AgentPrompt, *, create: bool = True) -> Path:
    """The agent's workspace: frontmatter ``cwd`` (relative to its folder), else its own
    ``workspace/``. Created if missing (unless ``create`` is false)."""
    home = agent_home(castra, prompt.name)
    path = home / prompt.settings.cwd if prompt.settings.cwd else home / WORKSPACE
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


# ------------------------------------------------------------------ protected paths


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@functools.cache
def case_insensitive(folder: Path) -> bool:
    """Whether the volume holding ``folder`` compares names without case (macOS and
    Windows by default): its name in the other case names the same folder."""
    other = folder.parent / folder.name.swapcase()
    if other == folder:
        return False
    try:
        return os.path.samefile(folder, other)
    except OSError:
        return False


def identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


@dataclass(frozen=True)
class Protected:
    """One path an agent may not read, or may read but not write, and why.

    ``folder`` means the path and everything under it; ``pattern`` that the path is a
    shell-style pattern (``/proc/*/environ``). The path guard (the hook) and the CLI's
    ``permissions.deny`` rules (which also shape the Bash sandbox) are both built from a
    list of these, made by ``protected_entries``, so they cannot drift. ``rule=False``:
    the hook only (see ``secret_entries``).
    """

    path: Path
    read: bool
    write: bool
    reason: str
    folder: bool = False
    pattern: bool = False
    rule: bool = True

    def covers(
        self,
        path: Path,
        *,
        fold: bool = False,
        identities: Sequence[tuple[int, int] | None] | None = None,
    ) -> bool:
        """Whether ``path`` (resolved) is this entry, compared the way the file system
        does: casefolded when ``fold`` (a case-insensitive volume), and by inode when
        both exist (another spelling or a hard link of the same file). ``identities``:
        ``path``'s and its parents' (device, inode), if the caller has them already."""
        mine, theirs = self.path.as_posix(), path.as_posix()
        if fold:
            mine, theirs = mine.casefold(), theirs.casefold()
        if self.pattern:
            return fnmatch.fnmatchcase(theirs, mine) or (
                self.folder and fnmatch.fnmatchcase(theirs, mine + "/*")
            )
        if theirs == mine or (self.folder and theirs.startswith(mine.rstrip("/") + "/")):
            return True
        target = identity(self.path)
        if target is None:
            return False
        if identities is None:
            identities = [identity(p) for p in (path, *path.parents)]
        return target in (identities if self.folder else identities[:1])


PRAETORIUM_FILES = ("praetorium.db", "praetorium.db-wal", "praetorium.db-shm")
PRAETORIUM_REASON = (
    "the praetorium (Legio's message store) is not for agents: your history is given to "
    "you with each message"
)

ATTACHMENTS_REASON = (
    "Legio's file store is not for agents: the files you are given are copied into your "
    "workspace's inbox/"
)


CLI_CONFIG_REASON = (
    "the Claude CLI's config (session transcripts, logins) is not for agents, your own "
    "included: what you were told is in your history, your notes in memoria"
)


TMP_REASON = (
    "another agent's temporary files (its background commands' output) are not yours; "
    "yours are in $TMPDIR"
)


_TMP_BASES: dict[Path, Path] = {}  # castra root -> its agents' temporary folder, this process


def tmp_dir(castra_root: Path, agent: str) -> Path:
    """``<tmp>/legio-<uid>-<castra digest>/<agent>/``: the agent's own ``TMPDIR`` (its CLI
    keeps background commands' output there), hidden from every other agent. Short on
    purpose: the sandbox puts its sockets in it, and a socket's path has at most 107 bytes.
    If another user took that name first (any local user can, in the sticky temporary
    folder), a fresh private folder (``mkdtemp``) instead, the same for the rest of this
    process: the agents' ``TMPDIR`` and their deny rules name the same folder."""
    root = castra_root.resolve()
    base = _TMP_BASES.get(root)
    if base is None or not _private_dir(base):
        digest = hashlib.sha256(str(root).encode()).hexdigest()[:10]
        base = Path(tempfile.gettempdir()).resolve() / f"legio-{os.getuid()}-{digest}"
        with contextlib.suppress(OSError):
            os.mkdir(base, 0o700)
        if not _private_dir(base):
            base = Path(tempfile.mkdtemp(prefix=f"legio-{os.getuid()}-{digest}-")).resolve()
        _TMP_BASES[root] = base
    return base / agent


def _private_dir(path: Path) -> bool:
    """A folder (not a link) of this user."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def home_claude_entries(home: Path | None = None) -> list[Path]:
    """Every ``~/.claude*`` entry there is now (``.claude.json.backup``, ``.claude.json.
    backup.<n>``…): each is hidden from the sandbox by its own concrete rule, since a
    glob rule breaks bubblewrap. A home that cannot be listed is an error (fail closed)."""
    home = daemon_home() if home is None else home
    try:
        with os.scandir(home) as listing:
            names = sorted(e.name for e in listing if e.name.startswith(".claude"))
    except FileNotFoundError:
        return []
    except OSError as e:
        raise LegioError(
            f"cannot list {home} to hide its ~/.claude* files from agents ({e.strerror}); "
            "make it readable by Legio's user"
        ) from e
    return [home / name for name in names]


def hidden_now() -> tuple[str, ...]:
    """The ``~/.claude*`` entries, agents' sockets and the files the user's git config
    names (a credential helper's ``--file``) there are now: a session whose sandbox was
    built with others is restarted (and resumed) before its next turn. (The other key
    stores' rules name every place, there or not: the CLI masks what exists when a
    command starts.)"""
    fixed = (".claude", ".claude.json")  # hidden by rules of their own, there or not
    names = [p.name for p in home_claude_entries() if p.name not in fixed]
    named = [*agent_sockets(), *git_config_stores()]
    return (*names, *(str(s.path) for s in named))


def key_entries(hide: Sequence[Path] = ()) -> list[Protected]:
    """The user's credential stores (there or not) and agents' sockets (``legio.fence.keys``),
    and ``[sandbox] hide``: no agent may read them, each by its own rule (and the guard),
    also where a link leads."""
    stores = [*key_stores(), *agent_sockets(), *(Store(p, True, "hide") for p in hide)]
    stores += [Store(p, False, TOKEN_REASON) for p in token_files()]
    entries: list[Protected] = []
    for store in stores:
        reason = TOKEN_REASON if store.what == TOKEN_REASON else KEY_REASON
        for path in {store.path, store.path.resolve()}:
            folder = path.is_dir() if os.path.lexists(path) else store.folder
            entries.append(Protected(path, read=False, write=False, reason=reason, folder=folder))
    return entries


def scratch_entries(castra: Castra, agent: str) -> list[Protected]:
    """The other agents' temporary folders, and the CLI's shared scratch folder of runs
    without a ``TMPDIR`` of their own (``/tmp/claude-<uid>``)."""
    root = castra.root.resolve()
    folder = castra.centuriones_dir
    names = [LEGATUS, *sorted(p.name for p in folder.iterdir() if p.is_dir())]
    shared = Path(tempfile.gettempdir()).resolve() / f"claude-{os.getuid()}"
    return [
        *(
            Protected(tmp_dir(root, name), read=False, write=False, reason=TMP_REASON, folder=True)
            for name in names
            if name != agent
        ),
        Protected(shared, read=False, write=False, reason=TMP_REASON, folder=True),
    ]


def secret_entries(root: Path, hide: Sequence[Path] = ()) -> list[Protected]:
    """What no agent may read or write wherever it is: Legio's state (every agent's CLI config
    dir), the daemon's own Claude config (``$CLAUDE_CONFIG_DIR``, ``~/.claude*``), and
    processes' environments.

    Patterns are for the hook only: the CLI expands a deny rule's glob into the files
    that exist when a shell command starts and masks each one inside bubblewrap, whose
    own ``/proc`` has none of the daemon's pids (``bwrap: Can't mkdir parents for
    /proc/625/environ``: every command fails), and a file that comes or goes meanwhile
    does the same. So the rules name concrete paths (``~/.claude/``, ``~/.claude.json``
    and every ``~/.claude*`` entry there is now, each by its own rule); shell commands
    run in the sandbox's own process namespace, where no other process of the user
    exists."""
    home = daemon_home().resolve()
    entries = [
        Protected(state_dir(root), read=False, write=False, reason=CLI_CONFIG_REASON, folder=True),
        Protected(home / ".claude", read=False, write=False, reason=CLI_CONFIG_REASON, folder=True),
        Protected(home / ".claude.json", read=False, write=False, reason=CLI_CONFIG_REASON),
    ]
    configured = daemon_config_dir().resolve()
    found = [configured]
    for entry in home_claude_entries(home):  # ~/.claude.json.backup and the like, one by one
        found += [entry, entry.resolve()]
    for path in found:
        if not any(entry.covers(path) for entry in entries):
            entries.append(
                Protected(
                    path, read=False, write=False, reason=CLI_CONFIG_REASON, folder=path.is_dir()
                )
            )
    entries += [
        Protected(
            home / ".claude*",
            read=False,
            write=False,
            reason=CLI_CONFIG_REASON,
            folder=True,
            pattern=True,
            rule=False,
        ),
        Protected(
            Path("/proc/*/environ"),
            read=False,
            write=False,
            reason="processes' environments are not for agents",
            pattern=True,
            rule=False,
        ),
    ]
    return entries + key_entries(hide)


def protected_entries(
    castra: Castra, agent: str, config_path: Path | None, hide: Sequence[Path] = ()
) -> list[Protected]:
    """Everything ``agent`` may not read or write, most specific first."""
    root = castra.root.resolve()
    home = agent_home(castra, agent).resolve()
    praetorium = PRAETORIUM_REASON + (
        "; the Legatus has get_history and search_history" if agent == LEGATUS else ""
    )
    entries = [
        Protected(root / name, read=False, write=False, reason=praetorium)
        for name in (*PRAETORIUM_FILES, "praetorium.db-journal")
    ]
    entries.append(
        Protected(
            root / "legio.lock",
            read=False,
            write=False,
            reason="Legio's lock file is not for agents",
        )
    )
    if config_path is not None:
        entries.append(
            Protected(
                config_path.resolve(),
                read=False,
                write=False,
                reason="Legio's configuration is not for agents",
            )
        )
    entries += secret_entries(root, hide)
    entries += scratch_entries(castra, agent)
    entries.append(
        Protected(
            castra.attachments_dir.resolve(),
            read=agent == LEGATUS,
            write=False,
            reason=ATTACHMENTS_REASON,
            folder=True,
        )
    )
    entries += [
        Protected(
            home / PROMPT_FILE,
            read=True,
            write=False,
            reason="prompts are Caesar's to edit, not an agent's",
        ),
        Protected(
            home / "commentarii",
            read=True,
            write=False,
            reason="commentarii are append-only: add a note with write_commentarium",
            folder=True,
        ),
        Protected(
            root / "edicta",
            read=True,
            write=False,
            reason="edicta change only through the memoria tools (publish_edictum, the Legatus's)",
            folder=True,
        ),
        Protected(
            root / "acta",
            read=True,
            write=False,
            reason="acta change only through the memoria tools (publish_actum)",
            folder=True,
        ),
    ]
    centuriones = castra.centuriones_dir.resolve()
    if agent == LEGATUS:
        entries.append(
            Protected(
                centuriones,
                read=True,
                write=False,
                reason="the centuriones' folders are theirs: the Legatus may read them, not write",
                folder=True,
            )
        )
        return entries
    entries.append(
        Protected(
            root / LEGATUS,
            read=False,
            write=False,
            reason="the Legatus's folder is not yours",
            folder=True,
        )
    )
    others = sorted(p for p in centuriones.iterdir() if p.is_dir()) if centuriones.is_dir() else []
    entries += [
        Protected(
            other.resolve(),
            read=False,
            write=False,
            reason=f"{other.name}'s folder is not yours; its notes are its own",
            folder=True,
        )
        for other in others
        if other.name != agent
    ]
    return entries


def deny_rules(entries: Sequence[Protected]) -> list[str]:
    """The CLI's ``permissions.deny`` rules for ``entries``.

    ``Read(...)`` hides a path from the file tools and from shell commands; ``Edit(...)``
    makes it read-only for both. Absolute paths take a leading ``/`` (``Read(//srv/x)``).
    """
    rules = []
    for entry in entries:
        if not entry.rule:
            continue
        target = "/" + entry.path.as_posix() + ("/**" if entry.folder else "")
        if not entry.read:
            rules.append(f"Read({target})")
        if not entry.write:
            rules.append(f"Edit({target})")
    return rules
