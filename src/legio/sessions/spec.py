"""What an agent is: its ``AgentSpec``, read from its prompt file, and its SDK options.

A spec is read anew for every request (an edited prompt takes effect on the next
message): the system prompt, the key whose change rebuilds the session, history
settings (frontmatter, else ``legio.toml``), the model, the built-in tools and the
workspace (``legio.fence.policy``), and the in-process MCP servers. ``build_options`` turns
a spec into ``ClaudeAgentOptions``: explicit tools, the path-guard hook, the sandbox and
``permissions.deny`` rules (``legio.fence.policy.agent_options``), granted folders, no user
or project settings, the agents' environment.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legio.castra import AgentPrompt, Castra
from legio.config import Config
from legio.fence.folders import granted_dirs
from legio.fence.guard import PathGuard, path_guard_hook
from legio.fence.policy import Protected, working_dir
from legio.fence.sandbox import agent_options, effective_tools
from legio.memoria import MemoriaStore
from legio.memoria.tools import build_memoria_centurio_server
from legio.names import LEGATUS
from legio.projects.copies import PLANS, Place, Projects, checkout_fence
from legio.request import Added, Asker, Reply, Status, Watch, WorkCard
from legio.sessions.gatekeeper import PLAN_TOOL, QUESTION_TOOL, Gatekeeper
from legio.sessions.outbox import Outbox, send_file_for
from legio.sessions.planfence import scrub

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import ClaudeAgentOptions, McpSdkServerConfig, SdkMcpTool

logger = logging.getLogger(__name__)

Servers = Callable[..., dict[str, tuple["McpSdkServerConfig", list[str]]]]  # (copy=None)
# more tools for an agent working on a project: (agent, project) -> tools (the forge's)
ProjectTools = Callable[[str, str], list["SdkMcpTool[Any]"]]


@dataclass(frozen=True)
class AgentSpec:
    """Everything needed to (re)build one agent's SDK session, read just now."""

    name: str
    system_prompt: str
    rebuild_key: str
    history_window: int
    history_token_budget: int
    model: str | None
    tools: list[str]
    cwd: Path
    servers: Servers
    add_dirs: list[Path] = field(default_factory=list)  # granted folders, read-write
    ask: tuple[str, ...] = ()  # its own approval rules (frontmatter ``ask``)
    daily_usd: float | None = None  # its own daily spending limit (frontmatter)
    project: str | None = None  # the project its requests are on by default (frontmatter)
    place: Place | None = None  # this request's project copy: then ``cwd`` is the copy
    fence: tuple[Protected, ...] = ()  # what it may read, not write (projects' checkouts)
    effort: str | None = None  # the CLI's --effort (legio.sessions.choices); None: its own

    @property
    def workspace(self) -> Path:
        """Its own workspace (``inbox/``), also when it works in a project copy."""
        return self.add_dirs[0] if self.place is not None else self.cwd

    def on(self, place: Place) -> AgentSpec:
        """This spec working in ``place``'s copy: the copy is its working directory, its
        workspace a granted folder, the project's checkout and the copy's git internals
        read-only."""
        return dataclasses.replace(
            self,
            cwd=place.copy,
            add_dirs=[self.cwd, *self.add_dirs],
            place=place,
            fence=(*place.fence(), *self.fence),
        )


SpecFactory = Callable[[str], Awaitable[AgentSpec]]


def spec_from_prompt(
    config: Config,
    castra: Castra,
    prompt: AgentPrompt,
    system_prompt: str,
    rebuild_key: str,
    servers: Servers,
) -> AgentSpec:
    """An agent's spec: its prompt's frontmatter settings, else the config's."""
    settings = prompt.settings
    return AgentSpec(
        name=prompt.name,
        system_prompt=system_prompt,
        rebuild_key=rebuild_key,
        history_window=settings.history_window or config.history_window,
        history_token_budget=settings.history_token_budget or config.history_token_budget,
        model=settings.model or config.model or None,
        tools=effective_tools(prompt, config),
        cwd=working_dir(castra, prompt),
        servers=servers,
        add_dirs=granted_dirs(castra, prompt, config),
        ask=tuple(settings.ask or ()),
        daily_usd=settings.daily_usd,
        project=settings.project,
        fence=tuple(checkout_fence(config)),
    )


def centurio_spec(
    config: Config,
    castra: Castra,
    memoria: MemoriaStore,
    name: str,
    outbox: Outbox,
    project_tools: ProjectTools | None = None,
) -> AgentSpec:
    """The spec of centurio ``name`` from its prompt file (``CastraError`` if gone); its
    server holds its memoria tools and ``send_file`` (queued in ``outbox``), and, in a
    project's copy, ``project_tools`` for that project (the forge's read-only tools)."""
    prompt = castra.read_centurio(name)

    def servers(copy: Path | None = None) -> dict[str, tuple[McpSdkServerConfig, list[str]]]:
        extra = [send_file_for(config, castra, prompt, outbox, copy)]
        if copy is not None and project_tools is not None:
            extra += project_tools(name, copy.name)  # a copy's folder is named for its project
        server = build_memoria_centurio_server(memoria, name, extra)
        return {server.name: (server.config, [t.name for t in server.tools])}

    # The deny rules name every other centurio's folder: a new folder rebuilds the session.
    folders = sorted(p.name for p in castra.centuriones_dir.iterdir() if p.is_dir())
    key = hashlib.sha256(f"{prompt.sha256}:{','.join(folders)}".encode()).hexdigest()
    return spec_from_prompt(config, castra, prompt, prompt.body, key, servers)


async def placed(spec: AgentSpec, project: str | None, projects: Projects) -> AgentSpec:
    """``spec`` for one request: in its copy of the request's project (``project``, else
    its own default), or as it is (no project, or the Legatus, which works in none)."""
    name = project or spec.project
    if name is None or spec.name == LEGATUS:
        return spec
    return spec.on(await projects.place(spec.name, name))


def tagged(watch: Watch, spec: AgentSpec) -> Watch:
    """``watch`` with its statuses naming the project the agent works on."""
    if spec.place is None:
        return watch
    return _Tagged(watch, spec.place.project)


class _Tagged:
    """A request's watch, its statuses marked with one agent's project."""

    def __init__(self, watch: Watch, project: str) -> None:
        self.watch, self.project = watch, project

    async def status(self, status: Status) -> None:
        await self.watch.status(dataclasses.replace(status, project=self.project))

    async def stream(self, agent: str, text: str) -> None:
        await self.watch.stream(agent, text)

    async def reply(self, reply: Reply) -> None:
        await self.watch.reply(reply)

    async def card(self, card: WorkCard) -> None:
        await self.watch.card(card)

    async def joined(self, added: Added) -> None:
        await self.watch.joined(added)

    def asker(self) -> Asker | None:
        return self.watch.asker()


def build_options(
    config: Config,
    castra: Castra,
    spec: AgentSpec,
    *,
    env: dict[str, str],
    stderr: deque[str],
    approvals: Gatekeeper | None = None,
    **extra: Any,
) -> ClaudeAgentOptions:
    """The SDK options of one agent's session; ``extra`` adds ``resume``/``session_id``."""
    from claude_agent_sdk import ClaudeAgentOptions, HookMatcher  # loaded by opening.load_sdk

    servers = spec.servers(spec.place.copy) if spec.place else spec.servers()
    allowed = [f"mcp__{key}__{tool}" for key, (_, tools) in servers.items() for tool in tools]

    def on_stderr(line: str) -> None:
        logger.debug("%s CLI: %s", spec.name, line)
        stderr.append(line)

    guard = PathGuard(
        castra,
        spec.name,
        config.path,
        workspace=spec.cwd,
        granted=spec.add_dirs,
        fence=spec.fence,
        hide=config.sandbox.hide,
    )
    confined = agent_options(castra, config, spec.name, spec.tools, spec.add_dirs, fence=spec.fence)
    if approvals is not None:  # /plan: its plan file in its working directory (or copy)
        confined["settings"] = with_plans(confined["settings"], spec.cwd)
        if "sandbox" in confined:  # its shell never writes there (legio.sessions.planfence)
            confined["sandbox"] = {
                **confined["sandbox"],
                "filesystem": {"denyWrite": [str(spec.cwd / PLANS)]},
            }
    hooks: dict[Any, list[HookMatcher]] = {
        "PreToolUse": [HookMatcher(matcher=None, hooks=[path_guard_hook(guard)])]  # type: ignore[list-item]
    }
    tools = list(spec.tools)
    if approvals is not None:  # legio.sessions.gatekeeper: ask Caesar (after the path guard)
        rules = approvals.agent_rules(spec.ask)
        ask_hook = approvals.hook(spec.name, rules, guard, spec.cwd / PLANS)
        hooks["PreToolUse"].append(HookMatcher(matcher=None, hooks=[ask_hook]))  # type: ignore[list-item]
        extra["can_use_tool"] = approvals.can_use_tool(spec.name, rules, spec.cwd / PLANS)
        tools += [t for t in (QUESTION_TOOL, PLAN_TOOL) if t not in tools]
    return ClaudeAgentOptions(
        hooks=hooks,
        system_prompt=spec.system_prompt,
        model=spec.model,
        effort=spec.effort,  # type: ignore[arg-type]  # one of choices.EFFORTS
        permission_mode=config.claude.permission_mode,
        cli_path=config.claude.cli_path or None,
        mcp_servers={key: server for key, (server, _) in servers.items()},
        allowed_tools=allowed + tools,
        tools=tools,
        cwd=str(spec.cwd),
        setting_sources=[],
        env=env,
        stderr=on_stderr,
        include_partial_messages=True,  # StreamEvents: the text as it is written
        **confined,
        **extra,
    )


def with_plans(settings: str, cwd: Path) -> str:
    """The CLI's settings with ``plansDirectory`` in ``cwd`` (created): the CLI's default,
    its config dir, is refused by Legio's own deny rules (PROTOCOLS.md, "Plan mode"). In a
    project copy ``cwd`` is the copy, whose ``.git/info/exclude`` ignores it
    (``legio.projects.copies.exclude_plans``). The path guard still judges each write there.
    A link in its place, or in it, is removed, never followed (``legio.sessions.planfence``)."""
    try:
        scrub(cwd)
    except OSError as e:  # e.g. a file of that name: the plan then comes without its text
        logger.warning("%s: no %s folder for plans: %s", cwd, PLANS, e)
    return json.dumps({**json.loads(settings), "plansDirectory": PLANS})
