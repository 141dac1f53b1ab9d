"""The ``PreToolUse`` path guard: every built-in tool call checked against the agent's policy.

``PathGuard`` decides from ``legio.fence.policy.protected_entries`` (the same list the CLI's
``permissions.deny`` rules come from) which paths one agent's file tools may read or
write: protected places are refused, writes must land in the workspace or a granted
folder, searches may not sweep the castra. Every path-bearing field is checked (glob
patterns by the folder they start from); a file tool's field the guard does not know
that names a path is refused (fail closed). Paths compare as the file system does: by
inode where both exist, casefolded on a case-insensitive volume. Bash commands are
checked word by word, on a best-effort basis (the OS sandbox is what binds them). A
denial tells the model what to use instead and is logged.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from legio.castra import Castra
from legio.fence.cliconfig import cli_config_dir
from legio.fence.policy import (
    PATH_KEYS,
    READ_TOOLS,
    SEARCH_TOOLS,
    WRITE_TOOLS,
    WRITING,
    Protected,
    _within,
    agent_home,
    case_insensitive,
    identity,
    protected_entries,
)
from legio.names import LEGATUS

logger = logging.getLogger(__name__)

# Every field of a file tool's input: the path-bearing ones are checked, the rest
# are known not to name a path. A string field outside this list that looks like a
# path makes the call refused (the guard cannot tell what the tool would do with it).
PATH_FIELDS = {"file_path", "notebook_path", "path"}
PATTERN_FIELDS = {"Glob": ("pattern",), "Grep": ("glob",)}
OTHER_FIELDS = {
    "content", "old_string", "new_string", "replace_all", "edits", "offset", "limit",
    "pages", "cell_id", "cell_type", "edit_mode", "new_source", "type", "output_mode",
    "-i", "-n", "-A", "-B", "-C", "context", "head_limit", "multiline",
    "pattern",  # Grep's regular expression (Glob's pattern is checked above)
    "ignore",  # LS's patterns to leave out
}  # fmt: skip
GLOB_CHARS = "*?[{"


def pattern_root(pattern: str, base: Path) -> Path:
    """The folder a glob pattern starts from: its components before the first one
    with a wildcard, against ``base`` when relative (``/c/pullo/**`` → ``/c/pullo``)."""
    fixed: list[str] = []
    for part in os.path.expanduser(pattern).split("/"):
        if any(c in part for c in GLOB_CHARS):
            break
        fixed.append(part)
    text = "/".join(fixed) or ("/" if pattern.startswith("/") else ".")
    path = Path(text)
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def _looks_like_path(value: object) -> bool:
    return isinstance(value, str) and (value.startswith(("/", "~")) or "../" in value)


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
        fence: Sequence[Protected] = (),
        hide: Sequence[Path | str] = (),
    ) -> None:
        self.castra = castra
        self.root = castra.root.resolve()
        self.agent = agent
        self.config_path = config_path.resolve() if config_path else None
        self.home = agent_home(castra, agent).resolve()
        self.centuriones = (self.root / "centuriones").resolve()
        self.workspace = workspace.resolve() if workspace else None
        self.granted = [g.resolve() for g in granted]
        self.fence = list(fence)  # more it may read but not write (a project's checkout)
        self.hide = [Path(p) for p in hide]  # [sandbox] hide
        self.fold = case_insensitive(self.root)  # compare names as the volume does
        # Plan mode: the CLI has the model write its plan here (PROTOCOLS.md, "Plan mode")
        self.plans = cli_config_dir(self.root, agent) / "plans"

    def entries(self) -> list[Protected]:
        return self.fence + protected_entries(self.castra, self.agent, self.config_path, self.hide)

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
        who = "read only" if self.agent == LEGATUS else "no access"
        items.append(f"{self.root}/attachments/ ({who}: given files are copied to inbox/)")
        items.append(
            f"{self.root}/state/ (every agent's Claude CLI config dir), ~/.claude*, "
            "$CLAUDE_CONFIG_DIR, /proc/*/environ (no access)"
        )
        items.append(
            "the user's credential stores (~/.ssh/, ~/.git-credentials, ~/.config/gh/, "
            "~/.netrc, ~/.aws/…), agents' sockets and [sandbox] hide (no access)"
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
        entries: Sequence[Protected] | None = None,
    ) -> str | None:
        """Why this access is refused, or None if allowed. ``confine``: apply the
        workspace rule to writes (the best-effort Bash check does not); ``entries``:
        the protected set, if the caller read it already."""
        path = Path(os.path.expanduser(str(raw)))
        if not path.is_absolute():
            path = (cwd or self.home) / path
        path = Path(os.path.realpath(path))
        if search and self._contains_castra(path):
            return (
                f"{path} contains Legio's castra; search a narrower folder, and use the "
                "memoria tools for Legio's memory"
            )
        entries = self.entries() if entries is None else entries
        if search:  # a search would read inside: nothing it may not read may be in there
            for entry in entries:
                inside = entry.path != path and _within(entry.path, path)
                if inside and not entry.read and not entry.pattern and entry.path.exists():
                    return f"{path} holds {entry.path}: {entry.reason}; search a narrower folder"
        identities = [identity(p) for p in (path, *path.parents)]
        for entry in entries:
            refused = not entry.read or (write and not entry.write)
            if refused and entry.covers(path, fold=self.fold, identities=identities):
                return entry.reason
        if self.agent != LEGATUS and search and self._same(path, self.centuriones):
            return "that folder holds other centuriones' notes; search your own workspace"
        writable = self.writable()
        if write and confine and writable and not any(_within(path, f) for f in writable):
            folders = ", ".join(str(f) for f in writable)
            return f"writes go to your workspace or a folder granted with add_dirs ({folders})"
        return None

    def _same(self, a: Path, b: Path) -> bool:
        if self.fold:
            return a.as_posix().casefold() == b.as_posix().casefold()
        return a == b

    def _contains_castra(self, path: Path) -> bool:
        return any(self._same(path, p) for p in (self.root, *self.root.parents))

    def check(self, tool: str, tool_input: dict[str, Any], cwd: str | None = None) -> str | None:
        """Why this tool call is refused, or None. Every path-bearing field of a file
        tool is checked (absolute and relative glob patterns by the folder they start
        from); a field the guard does not know that names a path is refused."""
        base = Path(cwd) if cwd else self.home
        if self.plan_file(tool, tool_input):
            return None
        if tool == "Bash":
            return self.check_command(str(tool_input.get("command", "")), base)
        if tool not in READ_TOOLS and tool not in WRITE_TOOLS:
            return None
        write, search = tool in WRITE_TOOLS, tool in SEARCH_TOOLS
        patterns = PATTERN_FIELDS.get(tool, ())
        for key, value in tool_input.items():
            if key in PATH_FIELDS:
                if not isinstance(value, str):
                    return f"{tool}'s {key} must be a path"
                if value:
                    reason = self.check_path(value, write=write, search=search, cwd=base)
                    if reason:
                        return reason
            elif key in patterns:
                start = Path(str(tool_input.get("path") or base))
                for item in value if isinstance(value, list) else [value]:
                    root = pattern_root(str(item), start if start.is_absolute() else base / start)
                    reason = self.check_path(root, write=False, search=True, cwd=base)
                    if reason:
                        return reason
            elif key not in OTHER_FIELDS and _looks_like_path(value):
                return (
                    f"{tool}'s field {key!r} names a path Legio's guard does not check; "
                    "give the path in file_path or path"
                )
        if search and not tool_input.get("path"):
            return self.check_path(base, write=False, search=True, cwd=base)
        return None

    def plan_file(self, tool: str, tool_input: dict[str, Any]) -> bool:
        """A plan-mode plan: a Write or Edit of one ``.md`` file directly in the agent's
        own CLI config dir's ``plans/`` (no other field naming a path, no link out)."""
        raw = tool_input.get("file_path")
        if tool not in ("Write", "Edit") or not isinstance(raw, str) or not raw.endswith(".md"):
            return False
        if any(key not in PATH_FIELDS | OTHER_FIELDS for key in tool_input):
            return False
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute() or path.is_symlink():
            return False
        real = Path(os.path.realpath(path))
        return real.parent == Path(os.path.realpath(self.plans)) and real.name == path.name

    def check_command(self, command: str, cwd: Path) -> str | None:
        """Best effort: refuse commands whose words name protected paths (after ``cd``)."""
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            words = command.split()
        writes = bool(WRITING.search(command))
        entries = self.entries()  # once per command, not once per word
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
                reason = self.check_path(
                    candidate, write=writes, cwd=cwd, confine=False, entries=entries
                )
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
        try:
            reason = guard.check(tool, tool_input, hook_input.get("cwd"))
        except Exception:  # fail closed: a call the guard cannot check does not run
            logger.exception("%s: the path guard could not check %s", guard.agent, tool)
            reason = "Legio could not check this call, so it is refused"
        if reason is None:
            logger.debug("%s: path guard: %s allowed", guard.agent, tool)
            return {}
        target = next(
            (tool_input.get(k) for k in (*PATH_KEYS, "pattern", "command") if tool_input.get(k)), ""
        )
        logger.warning("denied %s for %s on %s: %s", tool, guard.agent, str(target)[:200], reason)
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": f"Legio's policy: {reason}.",
            }
        }

    return pre_tool_use
