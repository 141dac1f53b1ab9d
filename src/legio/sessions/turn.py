"""One turn of an agent: reading its answer, tracking its context, showing its progress.

- ``collect_response`` reads one turn's messages from a ``ClaudeSDKClient``: the answer
  text and the ``ResultMessage``; error results become ``AgentError`` (an interrupt
  ``AgentInterrupted``, a prompt too long for the model ``ContextOverflow``). With
  ``include_partial_messages`` the text also streams, as it is written, to the watch.
- ``SessionTokenTracker``: how full a session's context window is.
- ``status_of``: what a content block says an agent is doing, as a typed ``Status``.
- ``Outcome`` and ``failure_outcome``: what an agent made of a request, failures included.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from legio.errors import (
    AgentError,
    AgentInterrupted,
    CastraError,
    ContextOverflow,
    ProjectError,
)
from legio.request import Status, Watch
from legio.timing import mark

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import ClaudeSDKClient, ResultMessage


class Settles(Protocol):
    """A turn's queries (``legio.sessions.steering.Steering``): which results answer them."""

    def settle(self, result: ResultMessage, text: str) -> bool:
        """One result read; True when every query of the turn is answered."""
        ...


logger = logging.getLogger(__name__)

ERROR_REPLY = "[{name}] An error occurred during processing."
INTERRUPTED_REPLY = "[{name}] Interrupted."
STOPPED_REPLY = "[{name}] Stopped before it started."
RETRY_HINT = "Send /retry to run it again."
REASON_MAX = 300


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


# ------------------------------------------------------------------ status

_TARGET_KEYS = ("command", "file_path", "path", "notebook_path", "pattern", "url", "query", "name")


def status_of(agent: str, block: object) -> Status | None:
    """What a content block says ``agent`` is doing, as a ``Status`` (None: nothing)."""
    from claude_agent_sdk import TextBlock, ThinkingBlock, ToolUseBlock

    if isinstance(block, ThinkingBlock):
        return Status(agent, "thinking")
    if isinstance(block, ToolUseBlock):
        tool = block.name.rsplit("__", 1)[-1]
        if tool == "dispatch":
            names = block.input.get("centuriones") or []
            if isinstance(names, str):
                names = [names]
            return Status(agent, "tool", tool, ", ".join(str(n) for n in names))
        target = next(
            (v for k in _TARGET_KEYS if isinstance(v := block.input.get(k), str) and v.strip()),
            "",
        )
        return Status(agent, "tool", tool, " ".join(target.split()))
    if isinstance(block, TextBlock) and block.text.strip():
        return Status(agent, "writing", target=" ".join(block.text.split()))
    return None


def retry_status(agent: str, data: dict[str, Any]) -> Status:
    """The CLI retrying a request the Claude API refused or let fall."""
    status = data.get("error_status")
    why = f"answered {status}" if status else "is not reachable"
    attempt, most = data.get("attempt"), data.get("max_retries")
    delay = (data.get("retry_delay_ms") or 0) / 1000
    note = f"The Claude API {why}: trying again ({attempt} of {most}) in {delay:.0f} s"
    return Status(agent, "retrying", note=note)


def _same(a: Status | None, b: Status) -> bool:
    if a is None:
        return False
    return (a.kind, a.tool, a.target, a.note) == (b.kind, b.tool, b.target, b.note)


async def notify(watch: Watch | None, status: Status) -> None:
    """Hand a status to the request's watch; its failure never fails the turn."""
    if watch is None:
        return
    try:
        await watch.status(status)
    except Exception:
        logger.exception("status callback failed (ignored)")


async def _stream(watch: Watch, agent: str, text: str) -> None:
    try:
        await watch.stream(agent, text)
    except Exception:
        logger.exception("text callback failed (ignored)")


# ------------------------------------------------------------------ responses

# What the Claude CLI says when the model refuses a prompt for its size. CLI 2.1.330
# (after trying its own compaction) ends the turn with subtype "success", is_error true,
# result "Prompt is too long" and terminal_reason "prompt_too_long"; other versions
# have been seen to leave is_error false, or to pass the API's message on.
_OVERFLOW = re.compile(
    r"prompt is too long|prompt_too_long|context[ _-](?:window|length)[ _-]exceeded"
    r"|exceeds? the (?:model'?s? )?(?:maximum )?context",
    re.IGNORECASE,
)
_OVERFLOW_ANSWER_MAX = 300


def is_context_overflow(text: str | None, *, is_error: bool) -> bool:
    """Whether a turn's result says the context was too long for the model.

    An error result is an overflow when it says so anywhere; a non-error result only
    when its whole (short) text is that message, so an agent *talking about* long
    prompts is never taken for one.
    """
    if not text:
        return False
    if is_error:
        return _OVERFLOW.search(text) is not None
    stripped = text.strip()
    return len(stripped) <= _OVERFLOW_ANSWER_MAX and stripped.lower().startswith(
        "prompt is too long"
    )


def _stream_text(event: dict[str, Any], streamed: list[str]) -> bool:
    """Apply one Anthropic streaming event to ``streamed``; True if its text grew."""
    kind = event.get("type")
    if kind == "message_start":
        streamed.clear()
    elif kind == "content_block_start":
        block = event.get("content_block") or {}
        if block.get("type") == "text" and streamed:
            streamed.append("\n\n")
    elif kind == "content_block_delta":
        delta = event.get("delta") or {}
        if delta.get("type") == "text_delta" and delta.get("text"):
            streamed.append(str(delta["text"]))
            return True
    return False


async def collect_response(
    client: ClaudeSDKClient,
    tracker: SessionTokenTracker | None = None,
    watch: Watch | None = None,
    *,
    agent: str = "agent",
    observe: Callable[[object], None] | None = None,
    steering: Settles | None = None,
) -> tuple[str, ResultMessage]:
    """Read one turn's messages: the answer text and its ``ResultMessage``.

    Statuses go to ``watch`` (never the same one twice in a row); its ``stream``
    gets the text of the agent's current message as it streams (``StreamEvent`` text
    deltas of the top-level conversation; it starts again with each new message). A message
    the SDK cannot parse is logged and skipped. An error result raises ``AgentError``
    (``AgentInterrupted`` for an interrupt); a stream that ends without a result raises
    ``AgentError``; CLI crashes and broken JSON propagate as the SDK raised them.

    ``steering``: the turn's queries (a message added while it runs): results are read
    until each is answered (``legio.sessions.steering``); the first one's is returned.
    """
    answer: tuple[str, ResultMessage] | None = None
    while True:
        final, result, done = await _one_result(client, tracker, watch, agent, observe, steering)
        answer = answer or (final, result)
        if done:
            return answer


async def _one_result(
    client: ClaudeSDKClient,
    tracker: SessionTokenTracker | None,
    watch: Watch | None,
    agent: str,
    observe: Callable[[object], None] | None,
    steering: Settles | None,
) -> tuple[str, ResultMessage, bool]:
    """``collect_response`` up to one ``ResultMessage`` (settled with ``steering`` before
    it is judged); whether it was the turn's last."""
    from claude_agent_sdk import (
        AssistantMessage,
        ResultMessage,
        StreamEvent,
        SystemMessage,
        TextBlock,
    )
    from claude_agent_sdk._errors import MessageParseError  # not exported from its root

    texts: list[str] = []
    result: ResultMessage | None = None
    last_status: Status | None = None
    streamed: list[str] = []
    first = True
    while True:
        try:
            async for message in client.receive_response():
                if observe is not None:  # legio.limits.plan: limits and logins
                    observe(message)
                if first and isinstance(message, StreamEvent | AssistantMessage):
                    first = False
                    mark("first token")
                if isinstance(message, StreamEvent):
                    top = watch is not None and message.parent_tool_use_id is None
                    if watch is not None and top and _stream_text(message.event, streamed):
                        await _stream(watch, agent, "".join(streamed))
                elif isinstance(message, AssistantMessage):
                    if tracker is not None and message.parent_tool_use_id is None:
                        tracker.observe_call(message.usage)
                    for block in message.content:
                        if isinstance(block, TextBlock):
                            texts.append(block.text)
                        status = status_of(agent, block)
                        if status is not None and not _same(last_status, status):
                            last_status = status
                            await notify(watch, status)
                elif isinstance(message, ResultMessage):
                    result = message
                elif isinstance(message, SystemMessage) and message.subtype == "api_retry":
                    retry = retry_status(agent, message.data)  # now, not when retries end
                    logger.warning("%s: %s", agent, retry.note)
                    await notify(watch, retry)
            break
        except MessageParseError as e:
            logger.warning("%s: skipped a message the SDK could not parse: %s", agent, e)
    if result is None:
        raise AgentError(agent, "the Claude CLI stopped before answering")
    if tracker is not None:
        tracker.update(result)
    final = result.result if result.result is not None else "\n".join(texts)
    done = steering is None or steering.settle(result, final.strip())
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
    return final.strip(), result, done


# ------------------------------------------------------------------ outcomes


@dataclass(frozen=True)
class Outcome:
    """What one agent made of a request: its answer, or why there is none."""

    text: str
    kind: Literal["answer", "error", "interrupted", "held"] = "answer"  # held: not started
    model: str | None = None  # the [models] name it ran on, when known


def failure_outcome(
    name: str, seq: int, error: BaseException, interrupted: str = INTERRUPTED_REPLY
) -> Outcome:
    """The reply that stands for an agent's failure to answer nuntius ``seq``, logged
    (``interrupted``: the words for a stop, ``{name}`` filled in)."""
    if isinstance(error, AgentInterrupted):
        return Outcome(interrupted.format(name=name), "interrupted")
    if isinstance(error, CastraError | ProjectError):
        logger.warning("%s cannot answer nuntius %s: %s", name, seq, error)
        return Outcome(f"[{name}] cannot answer: {error}", "error")
    if isinstance(error, AgentError):
        logger.error("%s failed to answer nuntius %s: %s", name, seq, error.reason)
        reason = error.reason
        if len(reason) > REASON_MAX:
            reason = reason[:REASON_MAX] + "…"
        return Outcome(f"{ERROR_REPLY.format(name=name)} ({reason}) {RETRY_HINT}", "error")
    logger.error("%s failed to answer nuntius %s", name, seq, exc_info=error)
    return Outcome(f"{ERROR_REPLY.format(name=name)} {RETRY_HINT}", "error")
