"""Starting one agent's Claude CLI: its own config dir, its options, its accounts.

``open_session`` prepares the agent's CLI config dir (``legio.fence.cliconfig``: its own
transcripts, a copy of the login), builds its ``ClaudeAgentOptions`` (the sandbox, the
path guard and, with a gatekeeper, the approval hook; the per-turn budget backstop),
connects a new session or resumes ``resume``, and hooks the session's messages to the
plan-limit and budget watchers. A CLI that cannot start is an ``AgentError`` that says
where to look.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import stat
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legio.castra import Castra
from legio.config import Config
from legio.errors import AgentError
from legio.fence.cliconfig import daemon_config_dir, prepare_config_dir
from legio.fence.policy import hidden_now, tmp_dir
from legio.limits.budget import Budget
from legio.limits.plan import PlanHealth, watch_turns
from legio.sessions.client import AgentSession, connect
from legio.sessions.gatekeeper import Gatekeeper
from legio.sessions.spec import AgentSpec, build_options
from legio.store.praetorium import Praetorium

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeSDKClient

SDK = "claude_agent_sdk"
_sdk_loaded = False


async def load_sdk() -> None:
    """Import the Claude Agent SDK (and the ``mcp`` package it loads: ~33 MiB, the
    slowest import Legio has) if no CLI has started yet, in a worker thread so that the
    loop goes on meanwhile. The daemon starts without it: an idle Legio that never
    opened a session does not hold it; the first session opened pays it, once. Agents
    started together each wait in a thread of their own (on the import's lock: a
    half-imported module is already in ``sys.modules``), never on the loop."""
    global _sdk_loaded
    if not _sdk_loaded:
        await asyncio.to_thread(importlib.import_module, SDK)
        _sdk_loaded = True


def prepare_tmp_dir(castra_root: Path, agent: str) -> Path:
    """The agent's own ``TMPDIR`` (0700, ours, no link: the temp folder is everyone's):
    its CLI's background output stays its own."""
    folder = tmp_dir(castra_root, agent)
    for path in (folder.parent, folder):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise AgentError(agent, f"{path} is not a folder of Legio's user: remove it")
        os.chmod(path, 0o700, follow_symlinks=False)
    return folder


async def open_session(
    config: Config,
    castra: Castra,
    praetorium: Praetorium,
    spec: AgentSpec,
    resume: str | None,
    *,
    env: dict[str, str],
    approvals: Gatekeeper | None,
    budget: Budget | None,
    health: PlanHealth | None,
) -> AgentSession:
    """Start the agent's CLI (in its own config dir): resume ``resume``, or a new session."""
    await load_sdk()
    shared = daemon_config_dir({**os.environ, **env})
    config_dir = await asyncio.to_thread(prepare_config_dir, castra.root, spec.name, shared, resume)
    scratch = await asyncio.to_thread(prepare_tmp_dir, castra.root.resolve(), spec.name)
    agent_env = {**env, "CLAUDE_CONFIG_DIR": str(config_dir), "TMPDIR": str(scratch)}
    hidden = await asyncio.to_thread(hidden_now)  # what its sandbox's deny rules will name
    from claude_agent_sdk import ClaudeSDKClient, CLIConnectionError

    def make_client(stderr: deque[str], extra: dict[str, Any]) -> ClaudeSDKClient:
        options = build_options(
            config,
            castra,
            spec,
            env=agent_env,
            stderr=stderr,
            approvals=approvals,
            **extra,
            **(budget.backstop() if budget else {}),
        )
        return ClaudeSDKClient(options)

    try:
        session = await connect(
            spec, resume=resume, make_client=make_client, max_input_tokens=config.max_input_tokens
        )
    except CLIConnectionError as e:
        raise AgentError(
            spec.name, f"cannot start the Claude CLI ({e}); `legio check` shows which CLI is used"
        ) from e
    session.hidden, session.cwd = hidden, spec.cwd
    session.config_dir, session.max_transcript_bytes = config_dir, config.max_transcript_kib * 1024
    if resume:  # a resumed CLI reports the session's whole cost: count on from there
        session.cost_base = await praetorium.records.session_cost(resume)
    session.observe = watch_turns(spec.name, health, budget)
    return session
