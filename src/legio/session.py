"""Agent sessions: one long-lived ``ClaudeSDKClient`` per agent, each nuntius given once.

``SessionManager.dispatch(name, nuntius)`` runs one query for an agent, one at a time
per agent (a FIFO lock), different agents in parallel. What the agent is sent:

- a **fresh** SDK session: its ``<compaction_summary>`` if it has one, then the nuntii
  it may see (from the summary's first kept seq, else the last ``history_window``;
  within ``history_token_budget``; never the nuntius being answered: that is the
  message itself), then ``<context_notice>`` when there was any, then the text;
- a **continuing** session (live, or resumed after a restart or an idle reap): only
  the nuntii it may see with a seq between its checkpoint and this nuntius, minus its
  own answers (it wrote them in this session), then the text.

The checkpoint (SDK session id, last seq given, prompt hash) is saved in the
praetorium *before* the query is sent: a CLI finishes a turn into its transcript even
if the daemon dies meanwhile, so a resumed session must not be sent it again. Fresh
sessions get their id from us (``--session-id``), so it is known before the first turn.

A session is rebuilt as a new SDK session when its prompt changes, when its context
passes ``max_input_tokens`` (after the agent has written a summary: compaction, see
``legio.compaction``), when the model refuses a query as too long (compaction, then
the query once more), or on ``reset``. An idle session is closed by the reaper
and resumed (``--resume``) on its next dispatch; if resuming fails it falls back to a
fresh session with history. A CLI that crashed or spoke garbage is marked broken and
replaced (resumed) on the next dispatch.

Centuriones are built in; other agents (the Legatus) register a spec factory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    CLIConnectionError,
    CLIJSONDecodeError,
    HookMatcher,
    McpSdkServerConfig,
    ProcessError,
    ResultMessage,
    SdkMcpTool,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

# MessageParseError is raised by the SDK but not exported from its package root.
from claude_agent_sdk._errors import MessageParseError

from legio.attachments import (
    FileStore,
    Outbox,
    one_message,
    prepare_delivery,
    send_file_tool,
    user_message,
    window_elements,
)
from legio.castra import AgentPrompt, Castra
from legio.compaction import (
    ContextPlan,
    ContextReport,
    ContextUsage,
    format_compaction_request,
    format_compaction_summary,
    is_context_overflow,
)
from legio.config import Config
from legio.errors import CastraError, LegioError
from legio.history import estimate_tokens, fit_to_budget
from legio.memoria import MemoriaStore
from legio.memoria.tools import build_memoria_centurio_server
from legio.policy import PathGuard, builtin_tools, path_guard_hook, working_dir
from legio.praetorium import Compaction, Nuntius, Praetorium, Turn
from legio.store.attachments import AttachmentStore

logger = logging.getLogger(__name__)

ERROR_REPLY = "[{name}] An error occurred during processing."
INTERRUPTED_REPLY = "[{name}] Interrupted."
STATUS_PREVIEW = 80
REASON_MAX = 300
STDERR_LINES = 20
CONTEXT_USAGE_TIMEOUT = 5.0
TAIL_ROWS_MAX = 1000  # nuntii read after a compaction's first kept seq (then the token budget)

StatusCallback = Callable[[str, str], Awaitable[None]]  # (agent, "⏳ …" line)
ClientFactory = Callable[[ClaudeAgentOptions], ClaudeSDKClient]
Deliver = Callable[["Outcome"], Awaitable[None]]
Prefix = str | Callable[[], str]  # text, or made when the agent's turn comes


class AgentError(LegioError):
    """An agent could not answer; ``reason`` says why (for logs and Caesar)."""

    def __init__(self, agent: str, reason: str) -> None:
        self.agent = agent
        self.reason = reason
        super().__init__(f"{agent}: {reason}")


class AgentInterrupted(AgentError):
    """The agent's query was interrupted (``/stop``, ``/reset``, shutdown)."""


class ContextOverflow(AgentError):
    """The model refused the query: the session's context is too long."""


class NothingToCompact(AgentError):
    """``/compact`` for an agent that has no conversation yet."""


# ------------------------------------------------------------------ token tracking


class SessionTokenTracker:
    """How full an SDK session's context window is.

    With prompt caching most of the context is reported as ``cache_read_input_tokens``,
    so the fill is the latest API call's input + cache read + cache creation — not a
    sum over turns (which counts the same context again every turn) and not
    ``input_tokens`` alone (which misses the cached part).
    """

    def __init__(self, max_input_tokens: int) -> None:
        self.max_input_tokens = max_input_tokens
        self.context_tokens = 0
        self.turns = 0
        self._seen_call = False

    @staticmethod
    def _fill(usage: dict[str, Any]) -> int:
        keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        return sum(int(usage.get(k) or 0) for k in keys)

    def observe_call(self, usage: dict[str, Any] | None) -> None:
        """One API call's usage (an ``AssistantMessage``'s)."""
        if usage:
            self.context_tokens = self._fill(usage)
            self._seen_call = True

    def update(self, result: ResultMessage) -> None:
        """End of a turn; without per-call usage, fall back on the result's."""
        self.turns += 1
        if not self._seen_call and result.usage:
            self.context_tokens = self._fill(result.usage)
        self._seen_call = False

    def should_reset(self) -> bool:
        return self.context_tokens > self.max_input_tokens


# ------------------------------------------------------------------ responses

_TOOL_STATUS = {
    "list_edicta": "Reading edicta",
    "read_edictum": "Reading edicta",
    "publish_edictum": "Publishing an edictum",
    "revoke_edictum": "Revoking an edictum",
    "list_acta": "Reading acta",
    "read_actum": "Reading acta",
    "publish_actum": "Publishing an actum",
    "list_commentarii": "Reading commentarii",
    "read_commentarium": "Reading commentarii",
    "write_commentarium": "Writing commentarii",
    "search_memoria": "Searching memoria",
    "get_history": "Reading the praetorium",
    "search_history": "Searching the praetorium",
    "list_centuriones": "Checking the centuriones",
    "reset_centurio": "Resetting a centurio",
    "post_nuntius": "Posting a nuntius",
    "send_file": "Sending a file",
}


def status_line(block: object) -> str | None:
    """The ``⏳ …`` line a content block shows Caesar while an agent works."""
    if isinstance(block, ThinkingBlock):
        return "⏳ Thinking..."
    if isinstance(block, ToolUseBlock):
        tool = block.name.rsplit("__", 1)[-1]
        if tool == "dispatch":
            names = block.input.get("centuriones") or []
            if isinstance(names, str):
                names = [names]
            return f"⏳ Dispatching to {', '.join(str(n) for n in names)}..."
        return f"⏳ {_TOOL_STATUS.get(tool, f'Using {tool}')}..."
    if isinstance(block, TextBlock) and block.text.strip():
        preview = " ".join(block.text.split())
        if len(preview) > STATUS_PREVIEW:
            preview = preview[:STATUS_PREVIEW] + "…"
        return f"⏳ {preview}"
    return None


async def _notify(on_status: StatusCallback | None, agent: str, line: str) -> None:
    if on_status is None:
        return
    try:
        await on_status(agent, line)
    except Exception:
        logger.exception("status callback failed (ignored)")


async def collect_response(
    client: ClaudeSDKClient,
    tracker: SessionTokenTracker | None = None,
    on_status: StatusCallback | None = None,
    *,
    agent: str = "agent",
) -> tuple[str, ResultMessage]:
    """Read one turn's messages: the answer text and its ``ResultMessage``.

    Status lines go to ``on_status`` (never the same line twice in a row). A message
    the SDK cannot parse is logged and skipped. An error result raises ``AgentError``
    (``AgentInterrupted`` for an interrupt); a stream that ends without a result raises
    ``AgentError``; CLI crashes and broken JSON propagate as the SDK raised them.
    """
    texts: list[str] = []
    result: ResultMessage | None = None
    last_status: str | None = None
    while True:
        try:
            async for message in client.receive_response():
                if isinstance(message, AssistantMessage):
                    if tracker is not None and message.parent_tool_use_id is None:
                        tracker.observe_call(message.usage)
                    for block in message.content:
                        if isinstance(block, TextBlock):
                            texts.append(block.text)
                        line = status_line(block)
                        if line and line != last_status:
                            last_status = line
                            await _notify(on_status, agent, line)
                elif isinstance(message, ResultMessage):
                    result = message
            break
        except MessageParseError as e:
            logger.warning("%s: skipped a message the SDK could not parse: %s", agent, e)
    if result is None:
        raise AgentError(agent, "the Claude CLI stopped before answering")
    if tracker is not None:
        tracker.update(result)
    final = result.result if result.result is not None else "\n".join(texts)
    said = final if not result.is_error else (final or "; ".join(result.errors or []))
    if result.terminal_reason == "prompt_too_long" or is_context_overflow(
        said, is_error=result.is_error
    ):
        raise ContextOverflow(agent, f"the conversation is too long for the model ({said[:120]})")
    if result.is_error:
        if result.subtype == "error_during_execution" and result.terminal_reason in (
            "aborted_streaming",
            "aborted_tools",
            "interrupted",
        ):
            raise AgentInterrupted(agent, "interrupted")
        reason = result.result or "; ".join(result.errors or []) or result.subtype
        raise AgentError(agent, reason)
    return final.strip(), result


# ------------------------------------------------------------------ sessions


class TicketLock:
    """A lock served in the order places were *reserved* (synchronously), not awaited.

    ``ticket()`` takes a place in line at once; awaiting the ticket waits for the turn;
    ``release()`` passes the turn on. A cancelled ticket gives its place up.
    """

    def __init__(self) -> None:
        self._line: deque[asyncio.Future[None]] = deque()
        self._held = False

    def ticket(self) -> asyncio.Future[None]:
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(turn)
        self._grant()
        return turn

    def _grant(self) -> None:
        while not self._held and self._line:
            turn = self._line.popleft()
            if not turn.done():
                turn.set_result(None)
                self._held = True

    def release(self) -> None:
        self._held = False
        self._grant()

    def locked(self) -> bool:
        return self._held


def _cli_failure(error: Exception, stderr: deque[str]) -> str:
    """A readable reason for a CLI that crashed or spoke garbage (its stderr, if any)."""
    if stderr:
        return "the Claude CLI failed: " + " / ".join(list(stderr)[-3:])
    if isinstance(error, CLIJSONDecodeError):
        return "the Claude CLI sent output that is not JSON"
    if isinstance(error, ProcessError) and error.exit_code is not None:
        return f"the Claude CLI exited with code {error.exit_code}"
    return f"the Claude CLI failed: {error}"


def _unseen(nuntii: list[Nuntius], viewer: str) -> list[Nuntius]:
    """Drop what a continuing session already has: its own nuntii, and answers to its own
    requests addressed to it alone (the Legatus got those as ``dispatch`` tool results)."""
    own = {n.id for n in nuntii if n.sender == viewer}
    return [
        n
        for n in nuntii
        if n.sender != viewer and not (n.reply_to in own and n.audience == (viewer,))
    ]


@dataclass(frozen=True)
class Outcome:
    """What one agent made of a dispatch: its answer, or why there is none."""

    text: str
    kind: Literal["answer", "error", "interrupted"] = "answer"


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
    servers: Callable[[], dict[str, tuple[McpSdkServerConfig, list[str]]]]


SpecFactory = Callable[[str], Awaitable[AgentSpec]]


@dataclass
class AgentSession:
    """A live SDK client and what it has been given."""

    name: str
    client: ClaudeSDKClient
    session_id: str
    rebuild_key: str
    tracker: SessionTokenTracker
    bootstrap: bool
    last_seq: int = 0
    created: float = field(default_factory=time.monotonic)
    last_active: float = field(default_factory=time.monotonic)
    cost_base: float = 0.0
    cost: float = 0.0
    broken: bool = False
    closed_because: str | None = None
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))


@dataclass(frozen=True)
class AgentStatus:
    """One agent, for ``/status``."""

    name: str
    state: str
    live: bool
    session_age_s: float | None
    context_tokens: int
    turns: int
    cost_usd: float
    compaction_failure: str | None = None


class SessionManager:
    """Owns every agent's SDK session; see the module docstring."""

    def __init__(
        self,
        config: Config,
        praetorium: Praetorium,
        memoria: MemoriaStore,
        *,
        client_factory: ClientFactory = ClaudeSDKClient,
        reap_interval_s: float = 60.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.config = config
        self.castra = Castra(config.castra)
        self.praetorium = praetorium
        self.memoria = memoria
        self.client_factory = client_factory
        self.reap_interval_s = reap_interval_s
        self.idle_timeout_s = config.session_idle_timeout_minutes * 60
        self.env = dict(env or {})
        self._sessions: dict[str, AgentSession] = {}
        self._locks: dict[str, TicketLock] = {}
        self._state: dict[str, str] = {}
        self._specs: dict[str, SpecFactory] = {}
        self._on_status: dict[str, StatusCallback | None] = {}
        self._compaction_failures: dict[str, str] = {}
        self._reaper: asyncio.Task[None] | None = None
        self.outbox = Outbox()  # files agents send_file in their running turn
        self.attachments = AttachmentStore(praetorium)
        self.files = FileStore(self.castra.root)

    # ---------------------------------------------------------- specs and options

    def register(self, name: str, factory: SpecFactory) -> None:
        """Serve agent ``name`` (not a centurio, e.g. the Legatus) with its own spec."""
        self._specs[name] = factory

    async def centurio_spec(self, name: str) -> AgentSpec:
        """The spec of centurio ``name`` from its prompt file (``CastraError`` if gone)."""
        prompt = self.castra.read_centurio(name)

        def servers() -> dict[str, tuple[McpSdkServerConfig, list[str]]]:
            extra = [self.send_file_tool(prompt)]
            server = build_memoria_centurio_server(self.memoria, name, extra)
            return {server.name: (server.config, [t.name for t in server.tools])}

        return self.spec_from_prompt(prompt, prompt.body, prompt.sha256, servers)

    def send_file_tool(self, prompt: AgentPrompt) -> SdkMcpTool[Any]:
        """The agent's ``send_file`` tool: files from its workspace, queued on its turn."""
        guard = PathGuard(self.castra, prompt.name, self.config.path)
        workspace = lambda: working_dir(self.castra, prompt)  # noqa: E731
        return send_file_tool(self.outbox, prompt.name, workspace, guard)

    def spec_from_prompt(
        self,
        prompt: AgentPrompt,
        system_prompt: str,
        rebuild_key: str,
        servers: Callable[[], dict[str, tuple[McpSdkServerConfig, list[str]]]],
    ) -> AgentSpec:
        """An agent's spec: its prompt's frontmatter settings, else the config's."""
        settings = prompt.settings
        return AgentSpec(
            name=prompt.name,
            system_prompt=system_prompt,
            rebuild_key=rebuild_key,
            history_window=settings.history_window or self.config.history_window,
            history_token_budget=settings.history_token_budget or self.config.history_token_budget,
            model=settings.model or self.config.model or None,
            tools=builtin_tools(prompt),
            cwd=working_dir(self.castra, prompt),
            servers=servers,
        )

    async def _spec(self, name: str) -> AgentSpec:
        factory = self._specs.get(name)
        return await factory(name) if factory else await self.centurio_spec(name)

    def _options(self, spec: AgentSpec, stderr: deque[str], **extra: Any) -> ClaudeAgentOptions:
        servers = spec.servers()
        allowed = [f"mcp__{key}__{tool}" for key, (_, tools) in servers.items() for tool in tools]

        def on_stderr(line: str) -> None:
            logger.debug("%s CLI: %s", spec.name, line)
            stderr.append(line)

        guard = PathGuard(self.castra, spec.name, self.config.path)
        hooks: dict[Any, list[HookMatcher]] = {
            "PreToolUse": [HookMatcher(matcher=None, hooks=[path_guard_hook(guard)])]  # type: ignore[list-item]
        }
        return ClaudeAgentOptions(
            hooks=hooks,
            system_prompt=spec.system_prompt,
            model=spec.model,
            permission_mode=self.config.claude.permission_mode,
            cli_path=self.config.claude.cli_path or None,
            mcp_servers={key: server for key, (server, _) in servers.items()},
            allowed_tools=allowed + spec.tools,
            tools=spec.tools,
            cwd=str(spec.cwd),
            setting_sources=[],
            env=self.env,
            stderr=on_stderr,
            **extra,
        )

    # ---------------------------------------------------------- connecting

    async def _connect(self, spec: AgentSpec, *, resume: str | None) -> AgentSession:
        session_id = resume or str(uuid.uuid4())
        stderr: deque[str] = deque(maxlen=STDERR_LINES)
        extra: dict[str, Any] = {"resume": resume} if resume else {"session_id": session_id}
        client = self.client_factory(self._options(spec, stderr, **extra))
        try:
            await client.connect()
        except BaseException:
            with contextlib.suppress(Exception):
                await client.disconnect()
            raise
        return AgentSession(
            name=spec.name,
            client=client,
            session_id=session_id,
            rebuild_key=spec.rebuild_key,
            tracker=SessionTokenTracker(self.config.max_input_tokens),
            bootstrap=resume is None,
            stderr=stderr,
        )

    def _rebuild_reason(self, session: AgentSession, spec: AgentSpec) -> str | None:
        """Why a live session must be replaced before its next query (None: it goes on)."""
        if session.broken:
            return "its Claude CLI failed"
        if session.rebuild_key != spec.rebuild_key:
            return "its prompt changed"
        if session.tracker.should_reset():
            return f"its context passed {self.config.max_input_tokens:,} tokens"
        return None

    @staticmethod
    def _compacts_first(session: AgentSession) -> bool:
        """Whether the session's rebuild begins with a summary (the token ceiling)."""
        return not session.broken and session.tracker.should_reset()

    async def _ensure(
        self, spec: AgentSpec, on_status: StatusCallback | None = None
    ) -> AgentSession:
        name = spec.name
        session = self._sessions.get(name)
        if session is not None:
            reason = self._rebuild_reason(session, spec)
            if reason is None:
                return session
            logger.info("%s: rebuilding the session because %s", name, reason)
            crashed = session.broken  # a crashed CLI's session is resumed; the rest start anew
            if self._compacts_first(session):
                await self._compact_or_fall_back(session, spec, "ceiling", on_status)
            await self._close(name, "rebuild")
            if not crashed:
                await self.praetorium.clear_checkpoint(name)
        checkpoint = await self.praetorium.get_checkpoint(name)
        if checkpoint and checkpoint.session_id and checkpoint.prompt_hash == spec.rebuild_key:
            try:
                session = await self._connect(spec, resume=checkpoint.session_id)
            except Exception as e:
                logger.warning(
                    "%s: could not resume SDK session %s (%s); starting a fresh session "
                    "with history from the praetorium",
                    name,
                    checkpoint.session_id,
                    e,
                )
            else:
                session.last_seq = checkpoint.last_seq
                self._sessions[name] = session
                logger.info("%s: resumed SDK session %s", name, session.session_id)
                return session
        session = await self._connect(spec, resume=None)
        self._sessions[name] = session
        logger.info("%s: started SDK session %s", name, session.session_id)
        return session

    async def _close(self, name: str, why: str) -> None:
        session = self._sessions.pop(name, None)
        if session is None:
            return
        session.closed_because = why
        try:
            await session.client.disconnect()
        except Exception:
            logger.warning("%s: error while disconnecting its CLI", name, exc_info=True)

    # ---------------------------------------------------------- dispatch

    async def dispatch(
        self,
        name: str,
        nuntius: Nuntius,
        on_status: StatusCallback | None = None,
        *,
        prefix: Prefix = "",
        ticket: asyncio.Future[None] | None = None,
    ) -> str:
        """Ask agent ``name`` to answer ``nuntius``; return its answer text.

        ``prefix`` (e.g. the Legatus's ``<centurio_status>``) goes between the history and
        the text; a callable is called when the turn comes, so a request that queued
        carries the state of that moment. Raises ``AgentError`` (``AgentInterrupted``) or
        ``CastraError``.
        """
        await self._wait_turn(name, ticket, on_status)
        try:
            return await self._turn(name, nuntius, on_status, prefix)
        finally:
            self._locks[name].release()

    async def answer(
        self,
        name: str,
        nuntius: Nuntius,
        on_status: StatusCallback | None = None,
        *,
        prefix: Prefix = "",
        ticket: asyncio.Future[None] | None = None,
        deliver: Deliver | None = None,
    ) -> Outcome:
        """Like ``dispatch``, but a failure becomes the agent's error reply (never raised).

        ``deliver(outcome)`` runs before the agent's turn ends: answers of one agent are
        delivered in the order it took the requests, and each as soon as it is ready.
        """
        await self._wait_turn(name, ticket, on_status)
        try:
            try:
                outcome = Outcome(await self._turn(name, nuntius, on_status, prefix))
            except asyncio.CancelledError:
                raise
            except BaseException as e:
                outcome = self._failure(name, nuntius, e)
            if deliver is not None:
                try:
                    await deliver(outcome)
                except Exception:
                    logger.exception(
                        "%s: delivering its answer to nuntius %s failed", name, nuntius.seq
                    )
            return outcome
        finally:
            self._locks[name].release()

    async def dispatch_many(
        self,
        names: list[str],
        nuntius: Nuntius,
        on_status: StatusCallback | None = None,
        tickets: dict[str, asyncio.Future[None]] | None = None,
        deliver: Callable[[str, Outcome], Awaitable[None]] | None = None,
    ) -> dict[str, Outcome]:
        """Several agents in parallel; one failing never blocks the others."""
        tickets = tickets or {}

        def delivery(name: str) -> Deliver | None:
            if deliver is None:
                return None
            return lambda outcome: deliver(name, outcome)

        results = await asyncio.gather(
            *(
                self.answer(n, nuntius, on_status, ticket=tickets.get(n), deliver=delivery(n))
                for n in names
            )
        )
        return dict(zip(names, results, strict=True))

    def _failure(self, name: str, nuntius: Nuntius, error: BaseException) -> Outcome:
        """The reply that stands for an agent's failure to answer, logged."""
        if isinstance(error, AgentInterrupted):
            return Outcome(INTERRUPTED_REPLY.format(name=name), "interrupted")
        if isinstance(error, CastraError):
            logger.warning("%s cannot answer nuntius %s: %s", name, nuntius.seq, error)
            return Outcome(f"[{name}] cannot answer: {error}", "error")
        if isinstance(error, AgentError):
            logger.error("%s failed to answer nuntius %s: %s", name, nuntius.seq, error.reason)
            reason = error.reason
            if len(reason) > REASON_MAX:
                reason = reason[:REASON_MAX] + "…"
            return Outcome(f"{ERROR_REPLY.format(name=name)} ({reason})", "error")
        logger.error("%s failed to answer nuntius %s", name, nuntius.seq, exc_info=error)
        return Outcome(ERROR_REPLY.format(name=name), "error")

    async def _wait_turn(
        self, name: str, ticket: asyncio.Future[None] | None, on_status: StatusCallback | None
    ) -> None:
        turn = ticket if ticket is not None else self.reserve(name)
        if not turn.done():
            await _notify(on_status, name, f"⏳ Queued: {name} is finishing an earlier request...")
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._locks[name].release()  # the turn came just as we were cancelled
            raise

    async def _turn(
        self, name: str, nuntius: Nuntius, on_status: StatusCallback | None, prefix: Prefix
    ) -> str:
        """One query, with the agent's turn held by the caller."""
        if callable(prefix):
            prefix = prefix()
        spec = await self._spec(name)
        self._state[name] = "working"
        self._on_status[name] = on_status
        try:
            session = await self._start(spec, on_status)
            try:
                text = await self._query(session, spec, nuntius, prefix, on_status)
            except ContextOverflow as e:
                logger.warning(
                    "%s: the model refused nuntius %s as too long (%s); compacting and "
                    "trying once more in a new session",
                    name,
                    nuntius.seq,
                    e.reason,
                )
                await _notify(on_status, name, f"⏳ {name}'s context is full: compacting...")
                await self._compact_or_fall_back(session, spec, "overflow", on_status)
                await self._close(name, "rebuild")
                await self.praetorium.clear_checkpoint(name)
                session = await self._start(spec, on_status)
                text = await self._query(session, spec, nuntius, prefix, on_status)
        except AgentInterrupted:
            self._state[name] = "idle"
            raise
        except BaseException:
            self._state[name] = "error"
            raise
        finally:
            self._on_status.pop(name, None)
        self._state[name] = "idle"
        return text

    async def _start(self, spec: AgentSpec, on_status: StatusCallback | None) -> AgentSession:
        try:
            return await self._ensure(spec, on_status)
        except CLIConnectionError as e:
            raise AgentError(
                spec.name,
                f"cannot start the Claude CLI ({e}); `legio check` shows which CLI is used",
            ) from e

    def reserve(self, name: str) -> asyncio.Future[None]:
        """Take agent ``name``'s next place in line now; pass it as ``ticket=``."""
        return self._locks.setdefault(name, TicketLock()).ticket()

    def current_status(self, name: str) -> StatusCallback | None:
        """The status callback of the query agent ``name`` is running now, if any."""
        return self._on_status.get(name)

    async def _plan(
        self, spec: AgentSpec, *, fresh: bool, last_seq: int, before_seq: int
    ) -> ContextPlan:
        """What a query before nuntius ``before_seq`` carries ahead of its text.

        A fresh session: the agent's compaction summary, if it has one, then the nuntii
        it may see from the summary's first kept seq on (else the newest
        ``history_window``), within the token budget (the newest win). A continuing
        one: what it has not been given since ``last_seq``, minus its own answers.
        """
        name, window, budget = spec.name, spec.history_window, spec.history_token_budget
        compaction: Compaction | None = None
        summary = ""
        if fresh:
            compaction = await self.praetorium.latest_compaction(name)
            after, limit = None, window
            if compaction is not None:  # everything since the kept tail, within the budget
                summary = format_compaction_summary(compaction, budget // 2)
                budget = max(budget - estimate_tokens(summary), budget // 2)
                after, limit = compaction.first_kept_seq - 1, max(window, TAIL_ROWS_MAX)
            nuntii = await self.praetorium.get_visible_nuntii(
                name, limit, after_seq=after, before_seq=before_seq
            )
            truncated = False
        else:
            nuntii = await self.praetorium.get_visible_nuntii(
                name, window + 1, after_seq=last_seq, before_seq=before_seq
            )
            truncated = len(nuntii) > window
            nuntii = _unseen(nuntii[-window:], name)
        nuntii, cut = fit_to_budget(nuntii, budget)
        files = await self.attachments.of_nuntii(n.seq for n in nuntii)
        elements = window_elements(files, spec.cwd, name)
        return ContextPlan(name, fresh, compaction, summary, nuntii, truncated or cut, elements)

    async def _query(
        self,
        session: AgentSession,
        spec: AgentSpec,
        nuntius: Nuntius,
        prefix: str,
        on_status: StatusCallback | None,
    ) -> str:
        plan = await self._plan(
            spec, fresh=session.bootstrap, last_seq=session.last_seq, before_seq=nuntius.seq
        )
        files = await self.attachments.of_nuntius(nuntius.seq)
        delivery = await prepare_delivery(self.files, files, spec.cwd, nuntius.seq)
        parts = (plan.text(), prefix, nuntius.text, delivery.note)
        message = "\n\n".join(part for part in parts if part)
        session.last_seq = max(session.last_seq, nuntius.seq)
        session.bootstrap = False
        await self.praetorium.set_checkpoint(
            spec.name, session.session_id, session.last_seq, session.rebuild_key
        )
        text, _ = await self._ask(session, message, on_status, nuntius.seq, delivery.images)
        return text

    async def _ask(
        self,
        session: AgentSession,
        message: str,
        on_status: StatusCallback | None,
        seq: int | None,
        images: list[dict[str, Any]] | None = None,
    ) -> tuple[str, ResultMessage]:
        """Send one query in ``session``; its answer, with the CLI's failures as ``AgentError``.

        With ``images``, the query is one user message of content blocks (images, then text).
        """
        name = session.name
        session.last_active = time.monotonic()
        started = time.monotonic()
        result: ResultMessage | None = None
        try:
            await session.client.query(
                one_message(user_message(message, images)) if images else message
            )
            text, result = await collect_response(
                session.client, session.tracker, on_status, agent=name
            )
        except (AgentError, ProcessError, CLIJSONDecodeError, CLIConnectionError) as e:
            if session.closed_because:  # we closed it: /reset, /stop, shutdown
                why = f"its session was closed ({session.closed_because})"
                raise AgentInterrupted(name, why) from e
            if isinstance(e, AgentError):
                raise
            session.broken = True
            raise AgentError(name, _cli_failure(e, session.stderr)) from e
        finally:
            session.last_active = time.monotonic()
            await self._record(session, seq, result, started)
        return text, result

    async def _record(
        self, session: AgentSession, seq: int | None, result: ResultMessage | None, started: float
    ) -> None:
        usage = (result.usage if result else None) or {}
        cost = 0.0
        if result is not None and result.total_cost_usd is not None:
            cost = max(0.0, result.total_cost_usd - session.cost_base)
            session.cost_base = result.total_cost_usd
            session.cost += cost
        turn = Turn(
            agent=session.name,
            session_id=session.session_id,
            nuntius_seq=seq,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
            cache_creation_tokens=int(usage.get("cache_creation_input_tokens") or 0),
            cost_usd=cost,
            duration_ms=int((time.monotonic() - started) * 1000),
            is_error=result is None or result.is_error,
        )
        try:
            await self.praetorium.record_turn(turn)
        except Exception:
            logger.exception("%s: could not record the turn's usage", session.name)

    # ---------------------------------------------------------- compaction

    async def _compact(
        self,
        session: AgentSession,
        spec: AgentSpec,
        reason: str,
        on_status: StatusCallback | None,
        instructions: str | None = None,
    ) -> Compaction:
        """Ask ``session`` for its summary and store it as the agent's compaction record.

        The recent tail (the newest nuntii it may see, within half the history budget)
        is kept word for word in the next session; the record says where it starts.
        Raises ``AgentError`` if no summary comes back.
        """
        name = spec.name
        tokens_before = session.tracker.context_tokens
        if not tokens_before:  # resumed since its last turn: ask the CLI how full it is
            usage, _ = await self._sdk_usage(name, session, busy_ok=True)
            tokens_before = usage.total_tokens if usage else 0
        tail = await self.praetorium.get_visible_nuntii(
            name, spec.history_window, before_seq=session.last_seq + 1
        )
        tail, _ = fit_to_budget(tail, spec.history_token_budget // 2)
        first_kept = tail[0].seq if tail else session.last_seq + 1
        await _notify(on_status, name, f"⏳ {name} is writing a summary of its conversation...")
        logger.info(
            "%s: compacting (%s) session %s at %s tokens",
            name,
            reason,
            session.session_id,
            f"{tokens_before:,}",
        )
        summary, _ = await self._ask(
            session, format_compaction_request(instructions), on_status, None
        )
        if not summary:
            raise AgentError(name, "it answered the request for a summary with nothing")
        record = await self.praetorium.add_compaction(
            name,
            summary,
            first_kept,
            tokens_before,
            session_id=session.session_id,
            reason=reason,
            instructions=instructions or None,
        )
        self._compaction_failures.pop(name, None)
        logger.info(
            "%s: compaction #%s stored: %s tokens summed up in ~%s; the next session keeps "
            "nuntii from #%s",
            name,
            record.id,
            f"{tokens_before:,}",
            f"{estimate_tokens(summary):,}",
            first_kept,
        )
        return record

    async def _compact_or_fall_back(
        self,
        session: AgentSession,
        spec: AgentSpec,
        reason: str,
        on_status: StatusCallback | None,
    ) -> None:
        """Compact before a forced rebuild; if that fails, say so and rebuild anyway (the
        new session then starts from the last summary, if any, and the recent window)."""
        try:
            await self._compact(session, spec, reason, on_status)
        except AgentInterrupted:
            raise
        except AgentError as e:
            when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
            self._compaction_failures[spec.name] = f"{when}: {e.reason}"
            logger.warning(
                "%s: compaction failed (%s); rebuilding from the recent history instead",
                spec.name,
                e.reason,
            )

    async def compact(
        self,
        name: str,
        instructions: str | None = None,
        on_status: StatusCallback | None = None,
    ) -> Compaction:
        """``/compact``: have agent ``name`` sum up its conversation now, in its turn.

        Its session is closed afterwards; its next message starts a new one from the
        summary. Raises ``NothingToCompact``, ``AgentError`` (the conversation is then
        unchanged) or ``CastraError``.
        """
        await self._wait_turn(name, None, on_status)
        try:
            spec = await self._spec(name)
            self._state[name] = "working"
            session = await self._session_to_compact(spec)
            record = await self._compact(session, spec, "command", on_status, instructions)
            await self._close(name, "compacted")
            await self.praetorium.clear_checkpoint(name)
            return record
        finally:
            self._state[name] = "idle"
            self._locks[name].release()

    async def _session_to_compact(self, spec: AgentSpec) -> AgentSession:
        name = spec.name
        session = self._sessions.get(name)
        if session is not None and not session.broken:
            return session
        checkpoint = await self.praetorium.get_checkpoint(name)
        if checkpoint is None or not checkpoint.session_id:
            raise NothingToCompact(name, f"{name} has no conversation to compact yet")
        await self._close(name, "rebuild")
        try:
            session = await self._connect(spec, resume=checkpoint.session_id)
        except Exception as e:
            raise AgentError(name, f"its session could not be resumed ({e})") from e
        session.last_seq = checkpoint.last_seq
        session.rebuild_key = checkpoint.prompt_hash or spec.rebuild_key
        self._sessions[name] = session
        return session

    # ---------------------------------------------------------- context view

    async def context_report(self, name: str, prefix: str = "") -> ContextReport:
        """``/context``: what agent ``name``'s next query would carry (nothing is sent).

        ``prefix`` is what the caller adds to each query (the Legatus's status block).
        Raises ``CastraError`` for an agent whose prompt cannot be read.
        """
        spec = await self._spec(name)
        session = self._sessions.get(name)
        before = await self.praetorium.last_seq() + 1
        rebuild = self._rebuild_reason(session, spec) if session is not None else None
        if session is not None and (rebuild is None or session.broken):
            state, fresh, last_seq = "live", False, session.last_seq
        else:
            checkpoint = await self.praetorium.get_checkpoint(name)
            resumable = (
                session is None
                and checkpoint is not None
                and bool(checkpoint.session_id)
                and checkpoint.prompt_hash == spec.rebuild_key
            )
            last_seq = checkpoint.last_seq if checkpoint and resumable else 0
            state = "live" if session is not None else ("resumable" if resumable else "new")
            fresh = not resumable
        plan = await self._plan(spec, fresh=fresh, last_seq=last_seq, before_seq=before)
        usage, note = None, None
        if session is not None:
            usage, note = await self._sdk_usage(name, session)
        servers = spec.servers()
        return ContextReport(
            name=name,
            session=state,
            rebuild_reason=rebuild,
            compacts_first=session is not None and self._compacts_first(session),
            system_prompt_tokens=estimate_tokens(spec.system_prompt),
            prefix_tokens=estimate_tokens(prefix) if prefix else 0,
            tools=sum(len(tools) for _, tools in servers.values()) + len(spec.tools),
            plan=plan,
            latest_compaction=(
                plan.compaction if plan.fresh else await self.praetorium.latest_compaction(name)
            ),
            context_tokens=session.tracker.context_tokens if session else 0,
            turns=session.tracker.turns if session else 0,
            max_input_tokens=self.config.max_input_tokens,
            sdk_usage=usage,
            sdk_usage_note=note,
            compaction_failure=self._compaction_failures.get(name),
        )

    async def _sdk_usage(
        self, name: str, session: AgentSession, *, busy_ok: bool = False
    ) -> tuple[ContextUsage | None, str | None]:
        if self.state(name) == "working" and not busy_ok:
            return None, "it is working; the CLI answers after this turn"
        try:
            raw = await asyncio.wait_for(session.client.get_context_usage(), CONTEXT_USAGE_TIMEOUT)
        except Exception as e:  # an older CLI, a busy one, a crashed one
            logger.info("%s: no context usage from the CLI: %r", name, e)
            return None, "the CLI did not say"
        usage = ContextUsage.parse(dict(raw))
        return usage, None if usage else "the CLI did not say"

    # ---------------------------------------------------------- control

    async def interrupt(self, name: str) -> bool:
        """Interrupt the query agent ``name`` is running; False if it is not working."""
        session = self._sessions.get(name)
        if session is None or self._state.get(name) != "working":
            return False
        try:
            await session.client.interrupt()
        except Exception:
            logger.warning("%s: interrupt failed; closing its session instead", name, exc_info=True)
            await self._close(name, "stop")
        return True

    async def reset(self, name: str) -> bool:
        """Forget agent ``name``'s SDK session and compaction summary; its next query
        starts a fresh session from the recent history only.

        Returns whether there was anything to forget. A running query is cut off. The
        compaction records stay in the praetorium, no longer given to the agent.
        """
        had_session = name in self._sessions
        await self._close(name, "reset")
        had_checkpoint = await self.praetorium.get_checkpoint(name) is not None
        await self.praetorium.clear_checkpoint(name)
        had_summary = await self.praetorium.clear_compactions(name) > 0
        self._compaction_failures.pop(name, None)
        if not (self._locks.get(name) and self._locks[name].locked()):
            self._state[name] = "idle"
        return had_session or had_checkpoint or had_summary

    async def reset_all(self) -> list[str]:
        """Reset every agent with a session or a checkpoint; return their names."""
        names = sorted(set(self._sessions) | set(self._state))
        return [n for n in names if await self.reset(n)]

    async def reap_idle(self) -> list[str]:
        """Close sessions idle longer than the timeout (their checkpoints stay: they resume)."""
        now = time.monotonic()
        reaped = []
        for name, session in list(self._sessions.items()):
            lock = self._locks.get(name)
            if lock is not None and lock.locked():
                continue
            if now - session.last_active > self.idle_timeout_s:
                await self._close(name, "idle")
                reaped.append(name)
        if reaped:
            logger.info("reaped idle sessions: %s", ", ".join(reaped))
        return reaped

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(self.reap_interval_s)
            try:
                await self.reap_idle()
            except Exception:
                logger.exception("idle reaper failed (will try again)")

    def start(self) -> None:
        """Start the idle reaper."""
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap_loop(), name="legio-reaper")

    async def shutdown(self) -> None:
        """Stop the reaper and disconnect every client (each bounded by the SDK)."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        others = [n for n in self._sessions if n not in self._specs]  # centuriones first,
        await asyncio.gather(*(self._close(n, "shutdown") for n in others))
        await asyncio.gather(
            *(self._close(n, "shutdown") for n in list(self._sessions))
        )  # then the Legatus

    # ---------------------------------------------------------- status

    def state(self, name: str) -> str:
        """idle, working or error."""
        return self._state.get(name, "idle")

    def status(self, names: list[str]) -> list[AgentStatus]:
        """The state of each named agent's session."""
        now = time.monotonic()
        out = []
        for name in names:
            session = self._sessions.get(name)
            out.append(
                AgentStatus(
                    name=name,
                    state=self.state(name),
                    live=session is not None,
                    session_age_s=(now - session.created) if session else None,
                    context_tokens=session.tracker.context_tokens if session else 0,
                    turns=session.tracker.turns if session else 0,
                    cost_usd=session.cost if session else 0.0,
                    compaction_failure=self._compaction_failures.get(name),
                )
            )
        return out
