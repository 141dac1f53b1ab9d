"""What an agent may touch: its environment, its tools, its folders, its shell.

- **Environment.** A Claude CLI inherits the daemon's whole environment (``options.env``
  can add, not remove), so ``scrub_environment`` deletes the Telegram token variable and
  every variable matching ``[claude] env_deny`` from the daemon's own ``os.environ``
  before any CLI starts. Anthropic credentials, ``PATH``, ``HOME``… stay.
- **Built-in tools.** Every agent gets an explicit list (frontmatter ``tools``, else the
  coding set for centuriones and ``WebSearch, WebFetch`` for the Legatus). With the
  CLI's default set, CLI 2.1.330 defers SDK MCP tools behind ``ToolSearch``.
- **Folders.** Frontmatter ``cwd`` (relative to the agent's folder), else a
  ``workspace/`` of its own; frontmatter ``add_dirs`` grants more folders, outside
  the castra only. Writes go there and nowhere else.
- **Protected paths.** ``protected_entries`` lists, for one agent, what it may not read
  (the praetorium, the config, the lock, other agents' folders) or not write (prompts,
  edicta, acta, commentarii). From that one list come both the CLI's
  ``permissions.deny`` rules (``deny_rules``: they bind the file tools and, through the
  sandbox, shell commands) and the ``PreToolUse`` hook (``PathGuard``), which also
  confines writes and searches and tells the model why.
- **Bash.** Runs only inside the CLI's OS sandbox (bubblewrap and socat on Linux), with
  network limited to ``[sandbox] allowed_domains``; without a sandbox it is removed
  from every agent, unless ``[sandbox] mode = "off"`` says otherwise. ``agent_options``
  returns the ``ClaudeAgentOptions`` keywords for all this.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legio.castra import PROMPT_FILE, AgentPrompt, Castra
from legio.config import Config
from legio.errors import CastraError, LegioError

logger = logging.getLogger(__name__)

LEGATUS = "legatus"
DEFAULT_CENTURIO_TOOLS = ("Read", "Write", "Edit", "Glob", "Grep", "Bash", "WebSearch", "WebFetch")
DEFAULT_LEGATUS_TOOLS = ("WebSearch", "WebFetch")
KEEP_ENV = ("ANTHROPIC_", "CLAUDE_", "PATH", "HOME", "LANG", "LC_", "TERM", "TMPDIR", "USER")
WORKSPACE = "workspace"

READ_TOOLS = {"Read", "Glob", "Grep", "LS", "NotebookRead"}
WRITE_TOOLS = {"Write", "Edit", "MultiEdit", "NotebookEdit"}
SEARCH_TOOLS = {"Glob", "Grep", "LS"}
PATH_KEYS = ("file_path", "notebook_path", "path")
WRITING = re.compile(r">|\b(rm|mv|cp|tee|truncate|dd|install|ln|chmod|touch)\b|sed\s+-i")


# ------------------------------------------------------------------ environment


def denied_env_names(config: Config, environ: dict[str, str] | None = None) -> list[str]:
    """Variables of ``environ`` that agents must not see."""
    environ = dict(os.environ if environ is None else environ)
    patterns = [config.telegram.token_env, *config.claude.env_deny]
    return sorted(
        name
        for name in environ
        if any(fnmatch.fnmatchcase(name, p) for p in patterns)
        and not any(name.startswith(k) for k in KEEP_ENV)
    )


def scrub_environment(config: Config) -> list[str]:
    """Remove secrets from this process's environment before any CLI inherits it."""
    removed = denied_env_names(config)
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


@dataclass(frozen=True)
class Protected:
    """One path an agent may not read, or may read but not write, and why.

    ``folder`` means the path and everything under it. The path guard (the hook) and
    the CLI's ``permissions.deny`` rules (which also shape the Bash sandbox) are both
    built from a list of these, made by ``protected_entries``, so they cannot drift.
    """

    path: Path
    read: bool
    write: bool
    reason: str
    folder: bool = False

    def covers(self, path: Path) -> bool:
        return _within(path, self.path) if self.folder else path == self.path


PRAETORIUM_FILES = ("praetorium.db", "praetorium.db-wal", "praetorium.db-shm")
PRAETORIUM_REASON = (
    "the praetorium (Legio's message store) is not for agents: your history is given to "
    "you with each message"
)


def protected_entries(castra: Castra, agent: str, config_path: Path | None) -> list[Protected]:
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
            root / "legatus",
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
        target = "/" + entry.path.as_posix() + ("/**" if entry.folder else "")
        if not entry.read:
            rules.append(f"Read({target})")
        if not entry.write:
            rules.append(f"Edit({target})")
    return rules


# ------------------------------------------------------------------ granted folders


def granted_dirs(castra: Castra, prompt: AgentPrompt) -> list[Path]:
    """The folders frontmatter ``add_dirs`` grants, resolved; ``CastraError`` if one is
    not absolute, does not exist, or contains (or is inside) the castra, or if the
    agent's workspace itself is unusable (``workspace_problem``)."""
    problem = workspace_problem(castra, prompt, None)
    if problem:
        raise CastraError(problem)
    root = castra.root.resolve()
    granted = []
    for raw in prompt.settings.add_dirs:
        path = Path(os.path.expanduser(raw))
        where = f"{prompt.path}: add_dirs {raw!r}"
        if not path.is_absolute():
            raise CastraError(f"{where} is not an absolute path; write e.g. ~/code/myapp")
        path = path.resolve()
        if _within(root, path) or _within(path, root):
            raise CastraError(
                f"{where} {'contains' if _within(root, path) else 'is inside'} Legio's castra "
                f"({root}); grant a folder outside it (its own workspace is writable already)"
            )
        if not path.is_dir():
            raise CastraError(f"{where}: {path} is not an existing folder; create it or remove it")
        granted.append(path)
    return granted


def workspace_problem(castra: Castra, prompt: AgentPrompt, config_path: Path | None) -> str | None:
    """Why this agent's workspace (frontmatter ``cwd``) cannot be used, or None."""
    workspace = working_dir(castra, prompt, create=False)
    root = castra.root.resolve()
    where = f"{prompt.path}: cwd {str(prompt.settings.cwd)!r}"
    if _within(root, workspace):
        return (
            f"{where} contains Legio's castra ({root}); use a folder inside the agent's "
            "own folder or outside the castra"
        )
    for entry in protected_entries(castra, prompt.name, config_path):
        if entry.covers(workspace) and not entry.write:
            return f"{where} points into a protected place ({entry.reason})"
    return None


def policy_problems(config: Config, castra: Castra) -> list[str]:
    """What in the prompts' frontmatter makes an agent's policy unusable (start-up, check)."""
    problems = []
    prompts: list[AgentPrompt] = []
    with contextlib.suppress(LegioError):
        prompts.append(castra.read_legatus())
    prompts += list(castra.roster().centuriones.values())
    for prompt in prompts:
        try:
            granted_dirs(castra, prompt)
        except CastraError as e:
            problems.append(str(e))
    return problems


# ------------------------------------------------------------------ path guard


class PathGuard:
    """Decides which paths one agent's built-in tools may read or write.

    With a ``workspace``, writes must land in it or in a ``granted`` folder."""

    def __init__(
        self,
        castra: Castra,
        agent: str,
        config_path: Path | None,
        *,
        workspace: Path | None = None,
        granted: Sequence[Path] = (),
    ) -> None:
        self.castra = castra
        self.root = castra.root.resolve()
        self.agent = agent
        self.config_path = config_path.resolve() if config_path else None
        self.home = agent_home(castra, agent).resolve()
        self.centuriones = (self.root / "centuriones").resolve()
        self.workspace = workspace.resolve() if workspace else None
        self.granted = [g.resolve() for g in granted]

    def entries(self) -> list[Protected]:
        return protected_entries(self.castra, self.agent, self.config_path)

    def protected(self) -> list[str]:
        """A description of what is out of reach, for ``legio check`` and the docs."""
        items = [f"{self.root}/praetorium.db* (no access)", f"{self.root}/legio.lock (no access)"]
        if self.config_path:
            items.append(f"{self.config_path} (no access)")
        if self.agent == LEGATUS:
            items.append(f"{self.centuriones}/ (read only)")
        else:
            items.append(
                f"{self.centuriones}/<other centuriones>/ and {self.root}/legatus/ (no access)"
            )
        items.append(
            "every prompt.md, edicta/, acta/, commentarii/ (read only: memoria tools write)"
        )
        items.append(f"searches over {self.root} or a folder containing it (refused)")
        return items

    def writable(self) -> list[Path]:
        return [p for p in (self.workspace, *self.granted) if p is not None]

    def check_path(
        self,
        raw: str | Path,
        *,
        write: bool,
        search: bool = False,
        cwd: Path | None = None,
        confine: bool = True,
    ) -> str | None:
        """Why this access is refused, or None if allowed. ``confine``: apply the
        workspace rule to writes (the best-effort Bash check does not)."""
        path = Path(os.path.expanduser(str(raw)))
        if not path.is_absolute():
            path = (cwd or self.home) / path
        path = Path(os.path.realpath(path))
        root = self.root
        if search and (path == root or path in root.parents):
            return (
                f"{path} contains Legio's castra; search a narrower folder, and use the "
                "memoria tools for Legio's memory"
            )
        for entry in self.entries():
            if entry.covers(path) and (not entry.read or (write and not entry.write)):
                return entry.reason
        if self.agent != LEGATUS and search and path == self.centuriones:
            return "that folder holds other centuriones' notes; search your own workspace"
        writable = self.writable()
        if write and confine and writable and not any(_within(path, f) for f in writable):
            folders = ", ".join(str(f) for f in writable)
            return f"writes go to your workspace or a folder granted with add_dirs ({folders})"
        return None

    def check(self, tool: str, tool_input: dict[str, Any], cwd: str | None = None) -> str | None:
        """Why this tool call is refused, or None."""
        base = Path(cwd) if cwd else self.home
        if tool in READ_TOOLS or tool in WRITE_TOOLS:
            for key in PATH_KEYS:
                value = tool_input.get(key)
                if isinstance(value, str) and value:
                    reason = self.check_path(
                        value, write=tool in WRITE_TOOLS, search=tool in SEARCH_TOOLS, cwd=base
                    )
                    if reason:
                        return reason
            if tool in SEARCH_TOOLS and not tool_input.get("path"):
                return self.check_path(base, write=False, search=True, cwd=base)
            return None
        if tool == "Bash":
            return self.check_command(str(tool_input.get("command", "")), base)
        return None

    def check_command(self, command: str, cwd: Path) -> str | None:
        """Best effort: refuse commands whose words name protected paths (after ``cd``)."""
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            words = command.split()
        writes = bool(WRITING.search(command))
        for i, word in enumerate(words):
            if word == "cd" and i + 1 < len(words):
                target = Path(os.path.expanduser(words[i + 1]))
                cwd = target if target.is_absolute() else cwd / target
                continue
            if "praetorium.db" in word:
                return self.check_path(self.root / "praetorium.db", write=False)
            for candidate in word.replace("=", " ").split():
                if "/" not in candidate and "." not in candidate:
                    continue
                reason = self.check_path(candidate, write=writes, cwd=cwd, confine=False)
                if reason:
                    return f"{reason} (this Bash command names it)"
        return None


HookCallback = Callable[[Any, str | None, Any], Awaitable[dict[str, Any]]]


def path_guard_hook(guard: PathGuard) -> HookCallback:
    """A ``PreToolUse`` hook that denies what ``guard`` refuses, and logs it."""

    async def pre_tool_use(
        hook_input: Any, tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        tool = str(hook_input.get("tool_name", ""))
        tool_input = hook_input.get("tool_input") or {}
        reason = guard.check(tool, tool_input, hook_input.get("cwd"))
        if reason is None:
            return {}
        target = next((tool_input.get(k) for k in (*PATH_KEYS, "command") if tool_input.get(k)), "")
        logger.warning("denied %s for %s on %s: %s", tool, guard.agent, str(target)[:200], reason)
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": f"Legio's policy: {reason}.",
            }
        }

    return pre_tool_use


# ------------------------------------------------------------------ the Bash sandbox

INSTALL_SANDBOX = "apt install bubblewrap socat"


@dataclass(frozen=True)
class SandboxSupport:
    """Whether this machine can sandbox shell commands, and what was found or missing."""

    available: bool
    detail: str


def detect_sandbox() -> SandboxSupport:
    """Check the Claude CLI's sandbox prerequisites (cached per ``PATH``)."""
    return _detect(sys.platform, os.environ.get("PATH", ""))


@functools.cache
def _detect(platform: str, search_path: str) -> SandboxSupport:
    if platform == "darwin":
        if shutil.which("sandbox-exec", path=search_path):
            return SandboxSupport(True, "macOS sandbox-exec")
        return SandboxSupport(False, "sandbox-exec not found on this Mac")
    if not platform.startswith("linux"):
        return SandboxSupport(False, f"the Claude CLI has no shell sandbox on {platform}")
    missing = [
        package
        for command, package in (("bwrap", "bubblewrap"), ("socat", "socat"))
        if not shutil.which(command, path=search_path)
    ]
    if missing:
        return SandboxSupport(False, f"{' and '.join(missing)} not installed")
    bwrap = shutil.which("bwrap", path=search_path) or "bwrap"
    try:
        probe = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "--", "true"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return SandboxSupport(False, f"bubblewrap does not run here ({e})")
    if probe.returncode != 0:
        first = (probe.stderr.strip().splitlines() or ["no message"])[0]
        return SandboxSupport(
            False, f"bubblewrap cannot create a sandbox here ({first}; user namespaces off?)"
        )
    return SandboxSupport(True, "bubblewrap")


@dataclass(frozen=True)
class SandboxDecision:
    """What the config and this machine make of Bash: allowed, sandboxed, and why."""

    bash: bool
    sandboxed: bool
    why: str
    warning: str | None = None


def sandbox_decision(config: Config, support: SandboxSupport | None = None) -> SandboxDecision:
    """Bash runs sandboxed, or (``[sandbox] mode = "off"``) unsandboxed, or not at all."""
    if config.sandbox.mode == "off":
        return SandboxDecision(
            bash=True,
            sandboxed=False,
            why='[sandbox] mode = "off"',
            warning=(
                'Bash runs UNSANDBOXED ([sandbox] mode = "off"): a shell command can read and '
                'change anything this user can; set mode = "auto" to sandbox it'
            ),
        )
    support = support or detect_sandbox()
    if support.available:
        return SandboxDecision(bash=True, sandboxed=True, why=support.detail)
    return SandboxDecision(
        bash=False,
        sandboxed=False,
        why=support.detail,
        warning=(
            f"Bash is off for every agent: no shell sandbox ({support.detail}); "
            f"install it with `{INSTALL_SANDBOX}` and restart Legio"
        ),
    )


def effective_tools(
    prompt: AgentPrompt, config: Config, support: SandboxSupport | None = None
) -> list[str]:
    """``builtin_tools`` without Bash when Bash could only run unsandboxed."""
    tools = builtin_tools(prompt)
    if "Bash" in tools and not sandbox_decision(config, support).bash:
        tools.remove("Bash")
    return tools


def sandbox_status_lines(config: Config, support: SandboxSupport | None = None) -> list[str]:
    """For Caesar's ``/status``: nothing when Bash is sandboxed, else a warning."""
    warning = sandbox_decision(config, support).warning
    return [f"⚠️ {warning}"] if warning else []


def announce_sandbox(config: Config, support: SandboxSupport | None = None) -> None:
    """Log, once at start-up, how agents' shell commands will run."""
    decision = sandbox_decision(config, support)
    if decision.warning:
        logger.warning("%s", decision.warning)
    else:
        logger.info("shell commands of agents run in the sandbox (%s)", decision.why)


def agent_options(
    castra: Castra,
    config: Config,
    agent: str,
    tools: Sequence[str],
    granted: Sequence[Path] = (),
    support: SandboxSupport | None = None,
) -> dict[str, Any]:
    """The ``ClaudeAgentOptions`` keywords that confine one agent: ``settings`` with the
    ``permissions.deny`` rules, ``add_dirs`` for its granted folders, and, when it has
    Bash, ``sandbox``. Raises ``LegioError`` rather than run Bash unsandboxed unasked."""
    rules = deny_rules(protected_entries(castra, agent, config.path))
    options: dict[str, Any] = {
        "settings": json.dumps({"permissions": {"deny": rules}}),
        "add_dirs": [str(folder) for folder in granted],
    }
    if "Bash" not in tools:
        return options
    decision = sandbox_decision(config, support)
    if not decision.bash:
        raise LegioError(f"{agent} was given Bash, but {decision.warning}")
    if decision.sandboxed:
        options["sandbox"] = {
            "enabled": True,
            "autoAllowBashIfSandboxed": True,
            "allowUnsandboxedCommands": False,
            "network": {
                "allowedDomains": list(config.sandbox.allowed_domains),
                # without it, bypassPermissions lets a command reach any host
                "strictAllowlist": True,
            },
        }
    return options


def policy_report(
    config: Config, castra: Castra, support: SandboxSupport | None = None
) -> list[tuple[str, str]]:
    """``legio check``'s lines about agents, as (mark, text); mark is "ok", "warn" or "bad"."""
    decision = sandbox_decision(config, support)
    lines: list[tuple[str, str]] = []
    if decision.warning:
        lines.append(("warn", decision.warning))
    elif decision.sandboxed:
        lines.append(("ok", f"shell sandbox: {decision.why}"))
    domains = ", ".join(config.sandbox.allowed_domains) or "none (no network)"
    prompts: list[AgentPrompt] = []
    with contextlib.suppress(LegioError):
        prompts.append(castra.read_legatus())
    prompts += list(castra.roster().centuriones.values())
    for prompt in prompts:
        declared = builtin_tools(prompt)
        tools = effective_tools(prompt, config, support)
        workspace = working_dir(castra, prompt, create=False)
        try:
            granted = granted_dirs(castra, prompt)
        except CastraError:
            granted = []  # reported by policy_problems
        lines.append(("", f"{prompt.name}: tools {', '.join(tools) or 'none'}"))
        if "Bash" in declared and "Bash" not in tools:
            sandbox = f"Bash removed: no sandbox ({decision.why})"
        elif "Bash" not in tools:
            sandbox = "not needed (no Bash)"
        elif decision.sandboxed:
            sandbox = f"on ({decision.why})"
        else:
            sandbox = f"OFF ({decision.why}): Bash runs unsandboxed"
        lines.append(("", f"    sandbox: {sandbox}"))
        folders = ", ".join(str(p) for p in (workspace, *granted))
        lines.append(("", f"    writable: {folders}"))
        if "Bash" in tools:
            network = domains if decision.sandboxed else "anything (unsandboxed)"
            lines.append(("", f"    network for shell commands: {network}"))
    return lines
