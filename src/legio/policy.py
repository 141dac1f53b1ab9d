"""What an agent may touch: its environment, its built-in tools, its workspace, its paths.

- **Environment.** A Claude CLI inherits the daemon's whole environment (``options.env``
  can add, not remove), so ``scrub_environment`` deletes the Telegram token variable and
  every variable matching ``[claude] env_deny`` from the daemon's own ``os.environ``
  before any CLI starts. Anthropic credentials, ``PATH``, ``HOME``… stay.
- **Built-in tools.** Every agent gets an explicit list (frontmatter ``tools``, else a
  read-only default). With the CLI's default set, CLI 2.1.330 defers SDK MCP tools
  behind ``ToolSearch``, which would hide the memoria tools from the model.
- **Workspace.** Frontmatter ``cwd`` (relative to the agent's folder), else a
  ``workspace/`` folder of its own, created on first use.
- **Paths.** A ``PreToolUse`` hook (it runs in every permission mode) checks the paths
  of file tools, and, best effort, the words of Bash commands. The praetorium, the
  config, the lock and other agents' folders are out of reach; prompts, edicta, acta
  and commentarii can be read but change only through the memoria tools; searches may
  not sweep a folder that contains the castra. A denial tells the model what to use
  instead and is logged. A determined shell command can evade the Bash check:
  ``docs/security.md`` says how to isolate Legio for real.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from legio.castra import AgentPrompt, Castra
from legio.config import Config

logger = logging.getLogger(__name__)

DEFAULT_CENTURIO_TOOLS = ("Read", "Glob", "Grep", "WebSearch", "WebFetch")
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
    return list(DEFAULT_LEGATUS_TOOLS if prompt.name == "legatus" else DEFAULT_CENTURIO_TOOLS)


def agent_home(castra: Castra, name: str) -> Path:
    return castra.root / "legatus" if name == "legatus" else castra.centurio_dir(name)


def working_dir(castra: Castra, prompt: AgentPrompt, *, create: bool = True) -> Path:
    """The agent's workspace: frontmatter ``cwd`` (relative to its folder), else its own
    ``workspace/``. Created if missing (unless ``create`` is false)."""
    home = agent_home(castra, prompt.name)
    path = home / prompt.settings.cwd if prompt.settings.cwd else home / WORKSPACE
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


# ------------------------------------------------------------------ paths


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class PathGuard:
    """Decides which paths one agent's built-in tools may read or write."""

    def __init__(self, castra: Castra, agent: str, config_path: Path | None) -> None:
        self.root = castra.root.resolve()
        self.agent = agent
        self.config_path = config_path.resolve() if config_path else None
        self.home = agent_home(castra, agent).resolve()
        self.centuriones = (self.root / "centuriones").resolve()

    def protected(self) -> list[str]:
        """A description of what is out of reach, for ``legio check`` and the docs."""
        items = [f"{self.root}/praetorium.db* (no access)", f"{self.root}/legio.lock (no access)"]
        if self.config_path:
            items.append(f"{self.config_path} (no access)")
        if self.agent == "legatus":
            items.append(f"{self.centuriones}/ (read only)")
        else:
            items.append(
                f"{self.centuriones}/<other centuriones>/ and {self.root}/legatus/ (no access)"
            )
        items.append(
            "every prompt.md, edicta/, acta/, commentarii/ (read only: memoria tools write)"
        )
        who = "read only" if self.agent == "legatus" else "no access"
        items.append(f"{self.root}/attachments/ ({who}: given files are copied to inbox/)")
        items.append(f"searches over {self.root} or a folder containing it (refused)")
        return items

    def check_path(
        self, raw: str | Path, *, write: bool, search: bool = False, cwd: Path | None = None
    ) -> str | None:
        """Why this access is refused, or None if allowed."""
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
        if not _within(path, root):
            if self.config_path and path == self.config_path:
                return "Legio's configuration is not for agents"
            return None
        relative = path.relative_to(root)
        parts = relative.parts
        if parts and parts[0].startswith("praetorium.db"):
            return (
                "the praetorium (Legio's message store) is not for agents: your history is "
                "given to you with each message"
                + (
                    "; the Legatus has get_history and search_history"
                    if self.agent == "legatus"
                    else ""
                )
            )
        if parts and parts[0] == "legio.lock":
            return "Legio's lock file is not for agents"
        if self.config_path and path == self.config_path:
            return "Legio's configuration is not for agents"
        if parts and parts[0] == "attachments" and (write or self.agent != "legatus"):
            return (
                "Legio's file store is not for agents: the files you are given are copied "
                "into your workspace's inbox/"
            )
        if self.agent != "legatus":
            if parts and parts[0] == "legatus":
                return "the Legatus's folder is not yours"
            if len(parts) >= 2 and parts[0] == "centuriones" and parts[1] != self.agent:
                return f"{parts[1]}'s folder is not yours; its notes are its own"
            if search and parts == ("centuriones",):
                return "that folder holds other centuriones' notes; search your own workspace"
        if write:
            if path.name == "prompt.md":
                return "prompts are Caesar's to edit, not an agent's"
            if parts and parts[0] in ("edicta", "acta"):
                tool = "publish_actum" if parts[0] == "acta" else "publish_edictum (the Legatus's)"
                return f"{parts[0]} change only through the memoria tools ({tool})"
            if "commentarii" in parts:
                return "commentarii are append-only: add a note with write_commentarium"
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
                reason = self.check_path(candidate, write=writes, cwd=cwd)
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
