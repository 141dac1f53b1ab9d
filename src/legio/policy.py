"""What an agent may touch: its built-in Claude tools and its working directory.

Every agent is given an explicit list of built-in tools. With the CLI's default set,
CLI 2.1.330 defers SDK MCP tools behind ``ToolSearch`` (their schemas are not sent
to the model), which would hide the memoria tools; with an explicit list they are
sent as they are. The default is read-only (files and the web); a prompt's
frontmatter ``tools`` replaces it, ``tools: []`` gives none.
"""

from __future__ import annotations

from pathlib import Path

from legio.castra import AgentPrompt, Castra

DEFAULT_CENTURIO_TOOLS = ("Read", "Glob", "Grep", "WebSearch", "WebFetch")
DEFAULT_LEGATUS_TOOLS = ("WebSearch", "WebFetch")


def builtin_tools(prompt: AgentPrompt) -> list[str]:
    """The built-in Claude tools this agent may use."""
    if prompt.settings.tools is not None:
        return list(prompt.settings.tools)
    return list(DEFAULT_LEGATUS_TOOLS if prompt.name == "legatus" else DEFAULT_CENTURIO_TOOLS)


def working_dir(castra: Castra, prompt: AgentPrompt) -> Path:
    """The agent's working directory: frontmatter ``cwd`` (relative to its own folder),
    else its own folder in the castra. Created if missing."""
    home = castra.root / "legatus" if prompt.name == "legatus" else castra.centurio_dir(prompt.name)
    path = home / prompt.settings.cwd if prompt.settings.cwd else home
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()
