"""One agent's live SDK session: connecting (fresh or resumed), asking, closing.

``AgentSession`` is a connected ``ClaudeSDKClient`` and what it has been given.
``connect`` starts a CLI with an id we choose (``--session-id``) or resumes one
(``--resume``); ``ask`` sends one query, reads the answer (``collect_response``) and
hands the turn's usage to ``record`` (the caller stores it once the answer is
delivered: off the answer's path); a CLI that crashed or spoke garbage marks
the session broken, and a session we closed ourselves (``/stop``, ``/reset``,
shutdown) turns the failure into ``AgentInterrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legio.errors import AgentError, AgentInterrupted
from legio.request import Watch
from legio.sessions.spec import AgentSpec
from legio.sessions.steering import Steering, messages, query_message
from legio.sessions.turn import (
    SessionTokenTracker,
    collect_response,
)
from legio.store.praetorium import Praetorium
from legio.store.records import QueryUsage
from legio.timing import mark

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import ClaudeSDKClient, ResultMessage

logger = logging.getLogger(__name__)

STDERR_LINES = 20
CONTEXT_USAGE_TIMEOUT = 5.0

MakeClient = Callable[[deque[str], dict[str, Any]], "ClaudeSDKClient"]  # (stderr, extra options)
Record = Callable[[QueryUsage], None]  # a turn's usage, to be stored


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
    model: str | None = None
    effort: str | None = None  # its CLI's --effort: a change restarts the CLI
    observe: Callable[[object], None] | None = None  # sees every message (legio.limits.plan)
    hidden: tuple[str, ...] = ()  # the ~/.claude* entries its sandbox hides, one rule each
    cwd: Path | None = None  # its CLI's working directory (a project copy, or the workspace)
    config_dir: Path | None = None  # its CLI's config dir: the transcript is in there
    max_transcript_bytes: int = 0  # past this, the session starts anew (0: no bound)
    transcript: Path | None = None  # its transcript file, once found
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))
    # the turn under way (legio.operations: status, stuck turns): its nuntius, when its
    # query was written, when its CLI last sent anything (monotonic); None: no turn
    asking: int | None = None
    asked_at: float = 0.0
    heard: float = 0.0
    steering: Steering | None = None  # the latest turn's queries (legio.sessions.steering)

    def rebuild_reason(self, spec: AgentSpec) -> str | None:
        """Why this session must be replaced before its next query (None: it goes on)."""
        if self.broken:
            return "its Claude CLI failed"
        if self.rebuild_key != spec.rebuild_key:
            return "its prompt changed"
        if self.tracker.should_reset():
            return f"its context passed {self.tracker.max_input_tokens:,} tokens"
        if self.transcript_too_big():
            return f"its transcript passed {self.max_transcript_bytes // 1024:,} KiB"
        return None

    def compacts_first(self) -> bool:
        """Whether its rebuild begins with a summary (the token ceiling, the transcript's)."""
        return not self.broken and (self.tracker.should_reset() or self.transcript_too_big())

    def transcript_bytes(self) -> int:
        """The size of its CLI's transcript file (``projects/<cwd key>/<id>.jsonl``), 0 if
        there is none yet."""
        if self.transcript is None and self.config_dir is not None:
            found = sorted(self.config_dir.glob(f"projects/*/{self.session_id}.jsonl"))
            self.transcript = found[0] if found else None
        try:
            return self.transcript.stat().st_size if self.transcript else 0
        except OSError:
            self.transcript = None  # moved: looked for again next time
            return 0

    def transcript_too_big(self) -> bool:
        """Whether its transcript passed ``max_transcript_bytes``: each turn of a CLI costs
        more CPU the longer its transcript (docs/performance.md)."""
        return 0 < self.max_transcript_bytes < self.transcript_bytes()


async def connect(
    spec: AgentSpec, *, resume: str | None, make_client: MakeClient, max_input_tokens: int
) -> AgentSession:
    """Start agent ``spec.name``'s CLI: a new session, or ``resume`` an earlier one."""
    session_id = resume or str(uuid.uuid4())
    stderr: deque[str] = deque(maxlen=STDERR_LINES)
    extra: dict[str, Any] = {"resume": resume} if resume else {"session_id": session_id}
    client = make_client(stderr, extra)
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
        tracker=SessionTokenTracker(max_input_tokens),
        bootstrap=resume is None,
        stderr=stderr,
        model=spec.model,
        effort=spec.effort,
    )


async def close(session: AgentSession, why: str) -> None:
    """Disconnect the session's CLI; a query it is running ends as interrupted."""
    session.closed_because = why
    try:
        await session.client.disconnect()
    except Exception:
        logger.warning("%s: error while disconnecting its CLI", session.name, exc_info=True)


def cli_failure(error: Exception, stderr: deque[str]) -> str:
    """A readable reason for a CLI that crashed or spoke garbage (its stderr, if any)."""
    from claude_agent_sdk import CLIJSONDecodeError, ProcessError

    if stderr:
        return "the Claude CLI failed: " + " / ".join(list(stderr)[-3:])
    if isinstance(error, CLIJSONDecodeError):
        return "the Claude CLI sent output that is not JSON"
    if isinstance(error, ProcessError) and error.exit_code is not None:
        return f"the Claude CLI exited with code {error.exit_code}"
    return f"the Claude CLI failed: {error}"


def user_message(text: str, images: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One SDK user message with content blocks: the images, then the text."""
    return {
        "type": "user",
        "message": {"role": "user", "content": [*images, {"type": "text", "text": text}]},
        "parent_tool_use_id": None,
    }


async def one_message(message: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """``ClaudeSDKClient.query`` takes an async iterable of messages for content blocks."""
    yield message


async def ask(
    session: AgentSession,
    message: str,
    watch: Watch | None,
    *,
    record: Record,
    seq: int | None,
    images: Sequence[dict[str, Any]] = (),
    on_sent: Callable[[], Awaitable[None]] | None = None,
) -> tuple[str, ResultMessage]:
    """Send one query in ``session``; its answer, with the CLI's failures as ``AgentError``.

    With ``images`` (image content blocks), the query is one user message of content
    blocks: the images, then the text. ``on_sent`` runs once the query is written (a
    stop may interrupt it from then on). The turn's usage (for nuntius ``seq``) goes to
    ``record``, failed or not.
    """
    from claude_agent_sdk import CLIConnectionError, CLIJSONDecodeError, ProcessError, ResultMessage

    name = session.name
    session.last_active = time.monotonic()
    started = time.monotonic()
    result: ResultMessage | None = None
    written = answered = False

    def observe(message: object) -> None:
        nonlocal answered
        session.heard = time.monotonic()  # the CLI is alive (a stuck turn is silent)
        answered = answered or isinstance(message, ResultMessage)  # its turn's end was read
        if session.observe is not None:
            session.observe(message)

    steering, uid = Steering.begin(session.client)
    try:
        session.steering = steering  # a message added from now on joins this turn
        await session.client.query(messages(query_message(message, list(images), uid)))
        written = True
        mark("query sent")
        session.asking, session.asked_at = seq if seq is not None else 0, time.monotonic()
        session.heard = session.asked_at
        if on_sent is not None:
            await on_sent()
        text, result = await collect_response(
            session.client,
            session.tracker,
            watch,
            agent=name,
            observe=observe,
            steering=steering,
        )
    except (AgentError, ProcessError, CLIJSONDecodeError, CLIConnectionError) as e:
        if session.closed_because:  # we closed it: /reset, /stop, shutdown
            why = f"its session was closed ({session.closed_because})"
            raise AgentInterrupted(name, why) from e
        if isinstance(e, AgentError):
            raise
        session.broken = True
        raise AgentError(name, cli_failure(e, session.stderr)) from e
    finally:
        steering.closed = True
        session.asking = None
        session.last_active = time.monotonic()
        record(_turn(session, seq, result, started))
        unread = not answered or bool(steering.pending)  # a result that may still come
        if written and unread and not session.closed_because:
            session.broken = True  # its result may still come: the next turn must not read it
    return text, result


def stale_result(client: ClaudeSDKClient) -> bool:
    """Empty the SDK's buffer of messages no turn read (an idle frame, the tail of a turn
    that ended early); whether one was a turn's result. Each turn must read its own
    result: a session one result behind would give every request the answer before it
    (the SDK's buffer is private: if its shape changes, nothing is drained)."""
    receive = getattr(getattr(client, "_query", None), "_message_receive", None)
    if receive is None or not hasattr(receive, "receive_nowait"):
        return False
    stale = False
    while True:
        try:
            message = receive.receive_nowait()
        except Exception:  # WouldBlock: empty; EndOfStream, ClosedResourceError: the CLI died
            return stale
        if isinstance(message, dict) and message.get("type") == "result":
            stale = True
        elif isinstance(message, dict) and message.get("type") in ("end", "error"):
            return True  # the stream ended under it: start anew


def _turn(
    session: AgentSession, seq: int | None, result: ResultMessage | None, started: float
) -> QueryUsage:
    usage = (result.usage if result else None) or {}
    cost = 0.0
    if result is not None and result.total_cost_usd is not None:
        cost = max(0.0, result.total_cost_usd - session.cost_base)  # the CLI's is cumulative
        session.cost_base = result.total_cost_usd
        session.cost += cost
    return QueryUsage(
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
        model=_model(result) or session.model,
    )


async def store_turns(praetorium: Praetorium, turns: list[QueryUsage], agent: str) -> None:
    """Store the usage ``ask`` handed over (and empty the list); a failure is logged."""
    while turns:
        turn = turns.pop(0)
        try:
            await praetorium.records.record_turn(turn)
        except Exception:
            logger.exception("%s: could not record the turn's usage", agent)


def _model(result: ResultMessage | None) -> str | None:
    """The model that cost the most in this turn (the CLI's ``modelUsage``), if it says."""
    usage = (result.model_usage if result else None) or {}
    if not usage:
        return None

    def cost(name: str) -> float:
        entry = usage.get(name)
        return float(entry.get("costUSD") or 0) if isinstance(entry, dict) else 0.0

    return max(usage, key=cost)


# ------------------------------------------------------------------ the CLI's own count


@dataclass(frozen=True)
class ContextUsage:
    """The SDK's own account of a live session's context (``get_context_usage``)."""

    total_tokens: int
    max_tokens: int
    percentage: float
    categories: list[tuple[str, int]]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> ContextUsage | None:
        """From the CLI's answer; None if it holds no totals."""
        try:
            total = int(raw["totalTokens"])
            most = int(raw.get("maxTokens") or 0)
        except (KeyError, TypeError, ValueError):
            return None
        categories = []
        for category in raw.get("categories") or []:
            if not isinstance(category, dict) or not isinstance(category.get("name"), str):
                continue
            if category["name"].lower() != "free space":
                try:
                    categories.append((category["name"], int(category.get("tokens") or 0)))
                except (TypeError, ValueError):
                    continue
        percentage = raw.get("percentage")
        if not isinstance(percentage, int | float):
            percentage = 100 * total / most if most else 0.0
        return cls(total, most, float(percentage), categories)


async def sdk_usage(client: ClaudeSDKClient, name: str) -> tuple[ContextUsage | None, str | None]:
    """The CLI's own count of a session's context, or why there is none."""
    try:
        raw = await asyncio.wait_for(client.get_context_usage(), CONTEXT_USAGE_TIMEOUT)
    except Exception as e:  # an older CLI, a busy one, a crashed one
        logger.info("%s: no context usage from the CLI: %r", name, e)
        return None, "the CLI did not say"
    usage = ContextUsage.parse(dict(raw))
    return usage, None if usage else "the CLI did not say"
