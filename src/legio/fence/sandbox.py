"""Bash inside the Claude CLI's OS sandbox, or no Bash at all.

``detect_sandbox`` checks the prerequisites (Linux, bubblewrap, socat, a working
``bwrap``); ``sandbox_decision`` says, from ``[sandbox] mode`` and what was found,
whether agents' shell commands run sandboxed, unsandboxed (only with ``mode = "off"``)
or not at all (Bash removed from every agent, said once in the log and in ``/status``).
``agent_options`` returns the ``ClaudeAgentOptions`` keywords for one agent: the
sandbox settings with its network allow-list, the ``permissions.deny`` rules built by
``legio.fence.policy``, and its granted folders. ``policy_report`` is ``legio check``'s view.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legio.castra import AgentPrompt, Castra
from legio.config import Config
from legio.errors import CastraError, LegioError
from legio.fence.cliconfig import daemon_home
from legio.fence.folders import granted_dirs
from legio.fence.keyscan import exposed_keys
from legio.fence.policy import (
    Protected,
    builtin_tools,
    deny_rules,
    key_entries,
    protected_entries,
    working_dir,
)
from legio.fence.tokenfiles import remember as remember_token_files

logger = logging.getLogger(__name__)


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


def bash_agents(castra: Castra) -> list[str]:
    """The agents whose prompts give them Bash (the Legatus first)."""
    prompts: list[AgentPrompt] = []
    with contextlib.suppress(LegioError):
        prompts.append(castra.read_legatus())
    prompts += list(castra.roster().centuriones.values())
    return [p.name for p in prompts if "Bash" in builtin_tools(p)]


def sandbox_warning(
    config: Config, castra: Castra | None = None, support: SandboxSupport | None = None
) -> str | None:
    """What Caesar must know about agents' shell commands, or None. With the sandbox
    off, the agents that have Bash are named (none: nothing to warn about)."""
    decision = sandbox_decision(config, support)
    if castra is None or not (decision.bash and not decision.sandboxed):
        return decision.warning
    agents = bash_agents(castra)
    if not agents:
        return None
    return (
        f'Bash runs UNSANDBOXED ([sandbox] mode = "off") for {", ".join(agents)}: a shell '
        'command can read and change anything this user can; set mode = "auto" to sandbox it'
    )


def sandbox_status_lines(
    config: Config, support: SandboxSupport | None = None, *, castra: Castra | None = None
) -> list[str]:
    """For Caesar's ``/status``: nothing when Bash is sandboxed, else a warning."""
    warning = sandbox_warning(config, castra, support)
    return [f"⚠️ {warning}"] if warning else []


def announce_sandbox(
    config: Config, castra: Castra | None = None, support: SandboxSupport | None = None
) -> None:
    """Log, once at start-up, how agents' shell commands will run."""
    decision = sandbox_decision(config, support)
    warning = sandbox_warning(config, castra, support)
    if warning:
        logger.warning("%s", warning)
    elif decision.sandboxed:
        logger.info("shell commands of agents run in the sandbox (%s)", decision.why)
    else:
        logger.info("no agent has Bash (%s)", decision.why)


def agent_options(
    castra: Castra,
    config: Config,
    agent: str,
    tools: Sequence[str],
    granted: Sequence[Path] = (),
    support: SandboxSupport | None = None,
    fence: Sequence[Protected] = (),
) -> dict[str, Any]:
    """The ``ClaudeAgentOptions`` keywords that confine one agent: ``settings`` with the
    ``permissions.deny`` rules, ``add_dirs`` for its granted folders, and, when it has
    Bash, ``sandbox``. Raises ``LegioError`` rather than run Bash unsandboxed unasked."""
    hide = [Path(p) for p in config.sandbox.hide]
    rules = deny_rules([*fence, *protected_entries(castra, agent, config.path, hide)])
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
            # a sandbox that cannot start refuses commands instead of running them bare
            "failIfUnavailable": True,
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
    warning = sandbox_warning(config, castra, support)
    if warning:
        lines.append(("warn", warning))
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
            granted = granted_dirs(castra, prompt, config)
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


MAX_KEY_WARNINGS = 20


def keys_report(config: Config, castra: Castra) -> list[tuple[str, str]]:
    """``legio check``'s lines about the user's keys: the stores found here (hidden from
    every agent), the files holding Legio's own tokens (``legio.fence.tokenfiles``), and
    each readable file under ``$HOME`` that looks like a key or token."""
    tokens = remember_token_files(config)  # as at start: files holding Legio's own tokens
    hidden = key_entries([Path(p) for p in config.sandbox.hide])
    found = sorted({str(e.path) + ("/" if e.folder else "") for e in hidden if e.path.exists()})
    found = [f for f in found if Path(f) not in tokens]
    lines = [("ok", "hidden from agents (keys): " + (", ".join(found) or "no key store found"))]
    if tokens:
        names = ", ".join(str(p) for p in tokens)
        lines.append(("ok", f"hidden from agents and checks (they hold Legio's tokens): {names}"))
    skip = [castra.root.resolve(), *(e.path for e in hidden)]
    exposed = exposed_keys(daemon_home().resolve(), skip)
    for path in exposed[:MAX_KEY_WARNINGS]:
        lines.append(
            (
                "warn",
                f"{path} looks like a key or token and agents can read it: "
                f'hide it with [sandbox] hide = ["{path}"] (or move it into ~/.ssh/)',
            )
        )
    if len(exposed) > MAX_KEY_WARNINGS:
        more = len(exposed) - MAX_KEY_WARNINGS
        lines.append(("warn", f"… and {more} more such files under {daemon_home()}"))
    return lines
