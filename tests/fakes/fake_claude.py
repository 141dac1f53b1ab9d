#!/usr/bin/env python3
"""A fake Claude Code CLI that speaks the SDK's stream-json protocol (stdlib only).

Give its path as ``ClaudeAgentOptions.cli_path``: the real ``ClaudeSDKClient`` then
runs end to end against it, SDK MCP tools included. It mirrors the recorded session
in ``tests/fixtures/claude-cli-2.1.330``: the MCP handshake with every SDK server
before answering ``initialize``; per turn ``session_state_changed`` running,
``system/init``, one ``assistant`` line per content block, ``user`` tool results,
``result`` (usage of the turn, cost cumulative for the process), then idle.

The message being answered arrives as Legio renders it, a ``<nuntius current="true">``
element with its text escaped; the fake reads it as the model would, as that text
unescaped (the log's ``text`` of a prompt is that reading; ``raw`` is what was sent).

What the model "says" is scripted by directives, one per line of the prompt
(text inside ``<praetorium>``, ``<context_notice>``, ``<centurio_status>`` and
``<compaction_summary>`` blocks is history, not directives, and is ignored; leading
``@name`` words are skipped, so ``@vorenus SLEEP 5`` is a directive):

    REPLY <text>                   answer with this text (default: "ECHO: " + the query)
    CALL_TOOL <server> <tool> <json>  call an SDK MCP tool; answer "TOOL_RESULT: <text>"
    TOOL <Name> <json>             use a built-in tool (Read, Write, Bash, Glob) after the
                                   PreToolUse hooks the SDK registered, as the real CLI does
                                   (``ExitPlanMode {"plan": …}``: asked in plan mode)
    THINK <text>                   emit a thinking block
    SLEEP <seconds>                wait (an interrupt ends the turn; if the SDK goes away,
                                   the turn is finished anyway, as the real CLI does)
    PAUSE                          stop at the hold point ``pause`` (below), in mid-turn
    SLEEP_FIRST <seconds> <tag>    wait only the first time ``tag`` is seen (state dir)
    ERROR <text>                   end the turn with an error result ("API Error: <text>")
    OVERFLOW [<tokens>]            refuse the turn as the CLI does when the prompt is too
                                   long for the model (only if the session already holds
                                   more than <tokens>, when given)
    ON_COMPACT <directive>         nothing now; run the directive when this session is
                                   asked for a summary (e.g. ``ON_COMPACT ERROR overloaded``)
    STDERR <text>                  print a line to stderr
    BROKEN_JSON                    print a line that is not JSON
    EXIT <code>                    exit at once with this code (a crash mid-answer)
    USAGE <input> <cache_read> <cache_creation> [<output>]   report this usage
    LIMIT_FIRST <rate_limit|authentication_failed> <resets unix s> [<tag>]   the plan limit
                              or an expired login, once per tag (as CLI 2.1.330)
    MALFORMED                      print an assistant message without its required ``model``
    EXTRA_RESULT <text>            after the turn's result, a second one with <text> (a CLI
                                   out of step: the next turn must not take it as its answer)
    FOR <mcp server key> <directive>   run the directive only in a CLI given that server
                                   (e.g. ``FOR memoria_pullo EXIT 3``: only pullo crashes)
    STREAM <chunks> <delay_s> <text>   answer with <text>, streamed in <chunks> text deltas
                                   <delay_s> apart (with ``--include-partial-messages``);
                                   <first_s>/<delay_s>: the message starts after <first_s>

Hold points, for tests that drive a race by construction: with ``FAKE_CLAUDE_HOLD`` set
to a folder, the CLI stops at each point named in ``FAKE_CLAUDE_HOLD_AT`` (comma
separated) — ``init`` before answering ``initialize``, ``turn`` once a user turn has come
and before answering it (whatever follows, an interrupt, waits in the pipe) — writes
``<folder>/at-<point>-<pid>`` and goes on once ``<folder>/go-<point>`` exists.

A user message written while a turn runs joins it at the turn's next tool result (as the
real CLI 2.1.332 does: its directives run next, logged as a ``folded`` event, and the turn's
one result lists both messages' uuids in ``user_message_uuids``); one that finds no more tool
results becomes the next turn, with its own result.

An interrupt that arrives while no turn runs is acknowledged and dropped, and a query
written after it is answered in full: the real CLI 2.1.330 does the same (checked against
the fake Messages API: an interrupt, then ``SLOW 6`` answered after 6 s; a query, then at
once an interrupt: ``error_during_execution``/``aborted_streaming``, no model call).

With ``--include-partial-messages`` (``include_partial_messages=True``) each content
block's ``assistant`` line is preceded, as the real CLI does, by its ``stream_event``
lines (Anthropic streaming events): ``message_start``, ``content_block_start``, the
deltas (``text_delta``: the text in 3 pieces unless ``STREAM`` says otherwise),
``content_block_stop``, ``message_delta``, ``message_stop``.

Usage otherwise models a cached conversation: ``input_tokens`` is the new prompt's
length // 4 and ``cache_read_input_tokens`` is everything the session held before.

A prompt holding ``<compaction_request>`` (Legio asking for a summary) is answered,
after the session's ``ON_COMPACT`` directives, with a "summary": the start of each of
the session's earlier prompts and answers, flattened to one line each, and the
request's ``<instructions>``. The ``get_context_usage`` control request is answered
from the transcript.

Environment:
    FAKE_CLAUDE_LOG_DIR    write ``<pid>.jsonl`` there: argv, env, cwd, every line in and
                           out, and a ``prompt`` record per user turn with the image blocks
                           it carried (see tests/fakes/cli_log.py)
    FAKE_CLAUDE_STATE_DIR  session transcripts (``<session_id>.json``) for ``--resume``
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

MODEL_DEFAULT = "claude-fake-1"
PRICES = {"opus": (5, 25), "haiku": (1, 5)}  # $ per million tokens in, out; else (3, 15)
# the message being answered, rendered like a nuntius of the history (Legio's current_message)
CURRENT = re.compile(r'<nuntius\b[^>]*\bcurrent="true"[^>]*>(.*?)</nuntius>', re.DOTALL)
HISTORY_BLOCKS = re.compile(
    r"<(praetorium|context_notice|centurio_status|compaction_summary)\b.*?</\1>\s*", re.DOTALL
)
VERBS = (
    "REPLY|CALL_TOOL|TOOL|THINK|SLEEP_FIRST|SLEEP|PAUSE|ERROR|STDERR|BROKEN_JSON|EXIT|USAGE|MALFORMED"
    "|EXTRA_RESULT"
    "|OVERFLOW|STREAM|LIMIT_FIRST"
)
DIRECTIVE = re.compile(rf"^({VERBS})\b ?(.*)$")
INTERRUPTED = "[Request interrupted by user]"
LEADING_MENTIONS = re.compile(r"^(@\w+\s+)+")
COMPACTION_REQUEST = "<compaction_request>"
TOO_LONG = "Prompt is too long"
CONTEXT_WINDOW = 200_000
SAID = 80  # characters of each earlier turn in a "summary", about a real summary's size


def hold(point: str) -> None:
    """Stop at ``point`` until the test says go (see the module docstring)."""
    folder = os.environ.get("FAKE_CLAUDE_HOLD")
    if not folder or point not in os.environ.get("FAKE_CLAUDE_HOLD_AT", "").split(","):
        return
    with open(os.path.join(folder, f"at-{point}-{os.getpid()}"), "w"):
        pass
    while not os.path.exists(os.path.join(folder, f"go-{point}")):
        time.sleep(0.01)


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


class Interrupted(Exception):
    """The SDK asked to interrupt the running turn."""


class FakeCLI:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.opts = self._parse_argv(argv)
        self.model = self.opts.get("--model") or MODEL_DEFAULT
        self.buffer = b""
        self.pending: list[dict[str, Any]] = []  # lines read while waiting for something else
        self.turn_uuids: list[str] = []  # the user messages the running turn answers
        self.lines: list[str] = []  # the running turn's directives still to run
        self.eof = False
        self.extra_result: str | None = None  # EXTRA_RESULT: a second result after the turn
        self.counter = 0
        self.hook_asked = ""  # the reason of the last PreToolUse "ask", if any
        self.fault_text = ""
        self.tool_interrupted = False
        self.fault_status: int | None = None
        self.cost = 0.0
        self.hooks: dict[str, Any] = {}
        self.mcp_servers = self._mcp_servers()
        self.mcp_tools: dict[str, list[str]] = {}
        self.state_dir = os.environ.get("FAKE_CLAUDE_STATE_DIR") or os.path.join(
            tempfile.gettempdir(), "fake-claude-sessions"
        )
        os.makedirs(self.state_dir, exist_ok=True)
        self.log_file = None
        log_dir = os.environ.get("FAKE_CLAUDE_LOG_DIR")
        if log_dir:
            os.makedirs(log_dir, exist_ok=True)
            self.log_file = open(os.path.join(log_dir, f"{os.getpid()}.jsonl"), "a")  # noqa: SIM115
        self.resumed = "--resume" in self.opts
        self.partial = "--include-partial-messages" in self.opts
        self.session_id = (
            self.opts.get("--resume") or self.opts.get("--session-id") or str(uuid.uuid4())
        )
        self.transcript: dict[str, Any] = {"session_id": self.session_id, "turns": []}
        self.interrupted_prompt: str | None = None
        self.images: list[dict[str, Any]] = []  # image blocks of the current user message
        self.stdout_closed = False
        self.log(
            {
                "event": "start",
                "argv": argv,
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                "session_id": self.session_id,
                "resumed": self.resumed,
            }
        )

    # ------------------------------------------------------------ plumbing

    @staticmethod
    def _parse_argv(argv: list[str]) -> dict[str, str]:
        opts: dict[str, str] = {}
        i = 0
        while i < len(argv):
            arg = argv[i]
            if arg.startswith("--") and "=" in arg:
                key, value = arg.split("=", 1)
                opts[key] = value
            elif arg.startswith("--"):
                if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                    opts[arg] = argv[i + 1]
                    i += 1
                else:
                    opts[arg] = ""
            i += 1
        return opts

    def _mcp_servers(self) -> list[str]:
        raw = self.opts.get("--mcp-config")
        if not raw:
            return []
        try:
            servers = json.loads(raw).get("mcpServers", {})
        except ValueError:
            return []
        return [k for k, v in servers.items() if isinstance(v, dict) and v.get("type") == "sdk"]

    def log(self, record: dict[str, Any]) -> None:
        if self.log_file:
            record["t"] = time.time()
            self.log_file.write(json.dumps(record) + "\n")
            self.log_file.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.log({"event": "out", "data": message})
        if self.stdout_closed:
            return
        try:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:  # the SDK is gone; like the real CLI, finish the turn anyway
            self.stdout_closed = True

    def _read_line(self, timeout: float | None) -> dict[str, Any] | None:
        """Next JSON line from stdin; None on EOF or when ``timeout`` passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if self.eof:
                return None
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([0], [], [], wait)
            if not ready:
                return None
            chunk = os.read(0, 65536)
            if not chunk:
                self.eof = True
                if not self.buffer.strip():
                    return None
                self.buffer += b"\n"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        if not line.strip():
            return self._read_line(timeout)
        message: dict[str, Any] = json.loads(line)
        self.log({"event": "in", "data": message})
        return message

    def next_message(self) -> dict[str, Any] | None:
        if self.pending:
            return self.pending.pop(0)
        return self._read_line(None)

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """Send a control request to the SDK and wait for its response."""
        request_id = str(uuid.uuid4())
        self.send({"type": "control_request", "request_id": request_id, "request": body})
        while True:
            message = self._read_line(None)
            if message is None:
                raise SystemExit(0)
            response = message.get("response", {})
            if message.get("type") == "control_response" and response.get("request_id") == (
                request_id
            ):
                if response.get("subtype") == "error":
                    return {"error": response.get("error", "error")}
                result: dict[str, Any] = response.get("response") or {}
                return result
            inner = message.get("request", {})
            if body.get("subtype") == "can_use_tool" and inner.get("subtype") == "interrupt":
                # as the real CLI: the permission prompt is cancelled, then the turn ends
                self.send({"type": "control_cancel_request", "request_id": request_id})
                self.respond(message["request_id"], {"still_queued": []})
                raise Interrupted
            self.pending.append(message)

    def respond(self, request_id: str, body: dict[str, Any]) -> None:
        self.send(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": body},
            }
        )

    def system(self, subtype: str, **fields: Any) -> None:
        self.send(
            {
                "type": "system",
                "subtype": subtype,
                "session_id": self.session_id,
                "uuid": str(uuid.uuid4()),
                **fields,
            }
        )

    # ------------------------------------------------------------ sessions

    def _transcript_path(self) -> str:
        return os.path.join(self.state_dir, f"{self.session_id}.json")

    def load_or_fail(self) -> bool:
        if not self.resumed:
            return True
        try:
            with open(self._transcript_path()) as f:
                self.transcript = json.load(f)
            self.cost = float(self.transcript.get("cost", 0.0))  # the session's, as the real CLI
            return True
        except FileNotFoundError:
            return False

    def save(self) -> None:
        tmp = self._transcript_path() + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.transcript, f)
        os.replace(tmp, self._transcript_path())

    def context_chars(self) -> int:
        return sum(len(t["prompt"]) + len(t.get("answer") or "") for t in self.transcript["turns"])

    def context_usage(self) -> dict[str, Any]:
        """The ``get_context_usage`` answer: the system prompt and the conversation."""
        system = len(self.opts.get("--system-prompt", "")) // 4
        messages = self.context_chars() // 4
        total = system + messages
        return {
            "categories": [
                {"name": "System prompt", "tokens": system, "color": "promptBorder"},
                {"name": "Messages", "tokens": messages, "color": "purple"},
            ],
            "totalTokens": total,
            "maxTokens": CONTEXT_WINDOW,
            "rawMaxTokens": CONTEXT_WINDOW,
            "percentage": round(100 * total / CONTEXT_WINDOW, 2),
            "model": self.model,
            "isAutoCompactEnabled": False,
            "memoryFiles": [],
            "mcpTools": [],
            "agents": [],
            "gridRows": [],
        }

    def summary_query(self, prompt: str) -> str:
        """Directives answering a ``<compaction_request>``: ON_COMPACT ones, then the summary."""
        directives: list[str] = []
        parts: list[str] = []
        for turn in self.transcript["turns"][:-1]:
            if COMPACTION_REQUEST in turn["prompt"]:
                continue
            for line in turn["prompt"].splitlines():
                line = LEADING_MENTIONS.sub("", line.strip())
                if line.startswith("ON_COMPACT "):
                    directives.append(line.removeprefix("ON_COMPACT "))
            said = " ".join(re.sub(r"<[^>]+>", " ", turn["prompt"]).split())
            answer = " ".join((turn.get("answer") or "").split())
            parts.append(f"[{said[:SAID]} => {answer[: SAID // 2]}]")
        found = re.search(r"<instructions[^>]*>(.*?)</instructions>", prompt, re.DOTALL)
        summary = f"SUMMARY of {len(parts)} turns: " + " ".join(parts)
        if found:
            summary += " INSTRUCTIONS: " + " ".join(found.group(1).split())
        return "\n".join([*directives, "REPLY " + summary])

    # ------------------------------------------------------------ protocol

    def handle_initialize(self, request_id: str, body: dict[str, Any]) -> None:
        hold("init")
        self.hooks = body.get("hooks") or {}
        if not self.load_or_fail():
            self.send(
                {
                    "type": "result",
                    "subtype": "error_during_execution",
                    "is_error": True,
                    "duration_ms": 0,
                    "duration_api_ms": 0,
                    "num_turns": 0,
                    "session_id": self.session_id,
                    "total_cost_usd": 0,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                    "errors": [f"No conversation found with session ID: {self.session_id}"],
                    "uuid": str(uuid.uuid4()),
                }
            )
            sys.stdout.flush()
            os._exit(1)
        for server in self.mcp_servers:
            self.request(
                {
                    "subtype": "mcp_message",
                    "server_name": server,
                    "message": {
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "clientInfo": {"name": "claude-code", "version": "fake"},
                        },
                        "jsonrpc": "2.0",
                        "id": 0,
                    },
                }
            )
        self.respond(request_id, {"commands": [], "output_style": "default", "models": []})
        for server in self.mcp_servers:
            self.request(
                {
                    "subtype": "mcp_message",
                    "server_name": server,
                    "message": {"jsonrpc": "2.0", "method": "notifications/initialized"},
                }
            )
            listed = self.request(
                {
                    "subtype": "mcp_message",
                    "server_name": server,
                    "message": {"method": "tools/list", "jsonrpc": "2.0", "id": 1},
                }
            )
            tools = listed.get("mcp_response", {}).get("result", {}).get("tools", [])
            self.mcp_tools[server] = [t["name"] for t in tools]

    def run(self) -> None:
        while True:
            message = self.next_message()
            if message is None:
                return
            kind = message.get("type")
            if kind == "control_request":
                body = message.get("request", {})
                if body.get("subtype") == "initialize":
                    self.handle_initialize(message["request_id"], body)
                elif body.get("subtype") == "interrupt":
                    self.respond(message["request_id"], {"still_queued": []})
                elif body.get("subtype") == "set_model":  # from the next model call on
                    self.model = body.get("model") or MODEL_DEFAULT
                    self.respond(message["request_id"], {})
                elif body.get("subtype") == "set_permission_mode":  # as the real CLI
                    mode = str(body.get("mode") or "default")
                    if mode == "plan":  # ExitPlanMode, once allowed, goes back to this one
                        self.before_plan = self.opts.get("--permission-mode", "default")
                    self.opts["--permission-mode"] = mode
                    self.log({"event": "permission_mode", "mode": mode})
                    self.respond(message["request_id"], {})
                elif body.get("subtype") == "get_context_usage":
                    self.respond(message["request_id"], self.context_usage())
                else:
                    self.respond(message["request_id"], {})
            elif kind == "user":
                self.turn_uuids = [message["uuid"]] if message.get("uuid") else []
                content = self.user_text(message)
                hold("turn")  # the query has come; it is not answered yet
                self.turn(content)

    def user_text(self, message: dict[str, Any]) -> str:
        """A user message's text (its images logged apart, in ``self.images``)."""
        content = message.get("message", {}).get("content", "")
        self.images = []
        if isinstance(content, list):  # content blocks: text, and images logged apart
            blocks = [b for b in content if isinstance(b, dict)]
            self.images = [
                {
                    "media_type": b.get("source", {}).get("media_type"),
                    "base64_chars": len(b.get("source", {}).get("data", "")),
                }
                for b in blocks
                if b.get("type") == "image"
            ]
            content = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
        return str(content)

    def fold(self) -> None:
        """At a tool result, as the real CLI does: user messages that came while the turn
        ran join it (the model reads them with the result: their directives run next in
        this turn, and its one result answers them too)."""
        while (line := self._read_line(0)) is not None:  # written while the tool ran
            self.pending.append(line)
        for message in [m for m in self.pending if m.get("type") == "user"]:
            self.pending.remove(message)
            raw = self.user_text(message)
            prompt = CURRENT.sub(lambda m: html.unescape(m.group(1)), raw)
            self.log({"event": "folded", "text": prompt, "session_id": self.session_id})
            if message.get("uuid"):
                self.turn_uuids.append(message["uuid"])
            self.lines.extend(HISTORY_BLOCKS.sub("", prompt).strip().splitlines())

    # ------------------------------------------------------------ a turn

    def stream_event(self, event: dict[str, Any]) -> None:
        self.send(
            {
                "type": "stream_event",
                "uuid": str(uuid.uuid4()),
                "session_id": self.session_id,
                "event": event,
                "parent_tool_use_id": None,
            }
        )

    def stream(
        self,
        message_id: str,
        block: dict[str, Any],
        usage: dict[str, int],
        chunks: int = 3,
        delay_s: float = 0.0,
        first_s: float = 0.0,
    ) -> None:
        """The streaming events of a one-block message, as the Messages API sends them."""
        if first_s:
            self.sleep(first_s)
        self.stream_event(
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            }
        )
        kind = block.get("type")
        empty = {"text": {"text": ""}, "thinking": {"thinking": "", "signature": ""}}.get(
            str(kind), {"input": {}}
        )
        start = {k: v for k, v in block.items() if k not in ("text", "thinking", "input")}
        self.stream_event(
            {"type": "content_block_start", "index": 0, "content_block": {**start, **empty}}
        )
        if kind == "text":
            text = str(block["text"])
            size = max(1, -(-len(text) // max(1, chunks)))
            pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]
            for n, piece in enumerate(pieces):
                if n and delay_s:
                    self.sleep(delay_s)
                self.stream_event(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    }
                )
        elif kind == "thinking":
            self.stream_event(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": block["thinking"]},
                }
            )
        elif kind == "tool_use":
            self.stream_event(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {
                        "type": "input_json_delta",
                        "partial_json": json.dumps(block["input"]),
                    },
                }
            )
        self.stream_event({"type": "content_block_stop", "index": 0})
        self.stream_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage.get("output_tokens", 1)},
            }
        )
        self.stream_event({"type": "message_stop"})

    def assistant(
        self,
        block: dict[str, Any],
        usage: dict[str, int],
        *,
        chunks: int = 3,
        delay_s: float = 0.0,
        first_s: float = 0.0,
    ) -> None:
        message_id = f"msg_fake_{uuid.uuid4().hex[:16]}"
        if self.partial:
            self.stream(message_id, block, usage, chunks, delay_s, first_s)
        elif first_s or delay_s:
            self.sleep(first_s + delay_s * (chunks - 1))
        self.send(
            {
                "type": "assistant",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [block],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": str(uuid.uuid4()),
                "timestamp": now_iso(),
            }
        )

    def plan_fault(self, kind: str, resets_at: int, usage: dict[str, int]) -> None:
        """A plan limit (429, with the rate-limit event a subscription login gets) or an
        expired login (401), as CLI 2.1.330 reports them."""
        if kind == "rate_limit":
            self.send(
                {
                    "type": "rate_limit_event",
                    "rate_limit_info": {
                        "status": "rejected",
                        "resetsAt": resets_at,
                        "rateLimitType": "five_hour",
                        "utilization": 1.0,
                    },
                    "uuid": str(uuid.uuid4()),
                    "session_id": self.session_id,
                }
            )
            self.fault_text, self.fault_status = "You've hit your 5-hour limit · resets soon", 429
        else:
            self.fault_text = "Failed to authenticate. API Error: 401 token expired"
            self.fault_status = 401
        message = {
            "type": "assistant",
            "message": {
                "id": f"msg_fake_{uuid.uuid4().hex[:16]}",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [{"type": "text", "text": self.fault_text}],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
            "parent_tool_use_id": None,
            "error": kind,
            "session_id": self.session_id,
            "uuid": str(uuid.uuid4()),
        }
        self.send(message)

    def sleep(self, seconds: float) -> None:
        """Wait, watching stdin: an interrupt ends the turn, other lines wait their turn."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            message = self._read_line(left)
            if message is None:
                if self.eof:  # the daemon died: keep going, as the real CLI does
                    time.sleep(max(0.0, deadline - time.monotonic()))
                    return
                continue
            body = message.get("request", {})
            if message.get("type") == "control_request" and body.get("subtype") == "interrupt":
                self.respond(message["request_id"], {"still_queued": []})
                raise Interrupted
            self.pending.append(message)

    def call_tool(self, server: str, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        """Run an SDK MCP tool through the control protocol, as the real CLI does."""
        name = f"mcp__{server}__{tool}"
        tool_use_id = f"toolu_fake_{uuid.uuid4().hex[:16]}"
        if server not in self.mcp_tools or tool not in self.mcp_tools[server]:
            return f"No such tool available: {name}", True
        denial = self.pre_tool_use(name, args, tool_use_id)
        if denial is not None:
            return f"PreToolUse:{name} hook error: {denial}", True
        asked = self.ask_permission(name, args, tool_use_id)
        if isinstance(asked, tuple):
            return asked
        args = asked
        self.counter += 1
        answer = self.request(
            {
                "subtype": "mcp_message",
                "server_name": server,
                "message": {
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": args},
                    "jsonrpc": "2.0",
                    "id": self.counter + 1,
                },
            }
        )
        if "error" in answer:
            return str(answer["error"]), True
        rpc = answer.get("mcp_response", {})
        if "error" in rpc:
            return str(rpc["error"].get("message", rpc["error"])), True
        result = rpc.get("result", {})
        text = "\n".join(
            c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"
        )
        return text, bool(result.get("isError"))

    def ask_permission(
        self, name: str, args: dict[str, Any], tool_use_id: str
    ) -> dict[str, Any] | tuple[str, bool]:
        """As the real CLI: ``can_use_tool`` when a hook said "ask" (or, outside
        bypassPermissions, always); the input to run, or the denial's (text, is_error)."""
        bypass = self.opts.get("--permission-mode") == "bypassPermissions"
        if bypass and not self.hook_asked and name != "AskUserQuestion":
            return args
        if self.opts.get("--permission-prompt-tool") != "stdio":
            if self.hook_asked:
                return "Permission to use this tool was denied (nobody to ask).", True
            return args
        verdict = self.request(
            {
                "subtype": "can_use_tool",
                "tool_name": name,
                "input": args,
                "permission_suggestions": [],
                "tool_use_id": tool_use_id,
                "decision_reason": self.hook_asked or None,
            }
        )
        if verdict.get("behavior") != "allow":
            if verdict.get("interrupt"):  # the real CLI then ends the turn (aborted_tools)
                self.tool_interrupted = True
            return str(verdict.get("message", "denied")), True
        return dict(verdict.get("updatedInput") or args)

    def pre_tool_use(self, name: str, args: dict[str, Any], tool_use_id: str) -> str | None:
        """Run the SDK's PreToolUse hooks; the denial reason, or None (an "ask" is kept
        in ``hook_asked``)."""
        self.hook_asked = ""
        for matcher in self.hooks.get("PreToolUse") or []:
            pattern = matcher.get("matcher")
            if pattern not in (None, "", "*") and not re.fullmatch(pattern, name):
                continue
            for callback_id in matcher.get("hookCallbackIds") or []:
                answer = self.request(
                    {
                        "subtype": "hook_callback",
                        "callback_id": callback_id,
                        "input": {
                            "session_id": self.session_id,
                            "transcript_path": self._transcript_path(),
                            "cwd": os.getcwd(),
                            "permission_mode": self.opts.get("--permission-mode", "default"),
                            "hook_event_name": "PreToolUse",
                            "tool_name": name,
                            "tool_input": args,
                            "tool_use_id": tool_use_id,
                        },
                        "tool_use_id": tool_use_id,
                    }
                )
                output = answer.get("hookSpecificOutput") or {}
                if output.get("permissionDecision") == "deny":
                    return str(output.get("permissionDecisionReason") or "denied")
                if output.get("permissionDecision") == "ask":
                    self.hook_asked = str(output.get("permissionDecisionReason") or "ask")
        return None

    def run_builtin(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        """A minimal stand-in for the CLI's own tools."""
        allowed = [t for t in (self.opts.get("--tools") or "").split(",") if t]
        if "--tools" in self.opts and name not in allowed:
            return f"No such tool available: {name}", True
        try:
            if name == "ExitPlanMode":  # allowed: plan mode ends (PROTOCOLS.md)
                self.opts["--permission-mode"] = getattr(self, "before_plan", "default")
                self.log({"event": "permission_mode", "mode": self.opts["--permission-mode"]})
                return "User has approved your plan. You can now start coding.", False
            if name == "AskUserQuestion":
                answers = args.get("answers") or {}
                said = ", ".join(f'"{q}"="{a}"' for q, a in answers.items())
                return f"Your questions have been answered: {said}", False
            if name == "Read":
                with open(args["file_path"], errors="replace") as f:
                    return f.read()[:20000], False
            if name == "Write":
                with open(args["file_path"], "w") as f:
                    f.write(args.get("content", ""))
                return f"File created successfully at: {args['file_path']}", False
            if name == "Bash":
                done = subprocess.run(
                    args["command"], shell=True, capture_output=True, text=True, timeout=20
                )
                return (done.stdout + done.stderr)[:20000], done.returncode != 0
            if name == "Glob":
                import glob

                found = glob.glob(args["pattern"], root_dir=args.get("path") or os.getcwd())
                return "\n".join(sorted(found)), False
        except (OSError, KeyError, subprocess.SubprocessError) as e:
            return f"{type(e).__name__}: {e}", True
        return f"{name} is not simulated by the fake CLI", True

    def send_tool_result(self, tool_use_id: str, text: str, is_error: bool) -> None:
        self.send(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "tool_use_id": tool_use_id,
                            "type": "tool_result",
                            "content": text,
                            "is_error": is_error,
                        }
                    ],
                },
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": str(uuid.uuid4()),
                "timestamp": now_iso(),
            }
        )

    def tool_turn(self, name: str, args: dict[str, Any], usage: dict[str, int]) -> str:
        """Use a built-in tool as the model would: tool_use, hooks, result."""
        for key in ("file_path", "notebook_path", "path"):
            if isinstance(args.get(key), str) and not os.path.isabs(args[key]):
                args[key] = os.path.join(os.getcwd(), args[key])  # the real CLI does this
        tool_use_id = f"toolu_fake_{uuid.uuid4().hex[:16]}"
        self.assistant({"type": "tool_use", "id": tool_use_id, "name": name, "input": args}, usage)
        denial = self.pre_tool_use(name, args, tool_use_id)
        asked = args if denial is not None else self.ask_permission(name, args, tool_use_id)
        if denial is not None:
            text, is_error = f"PreToolUse:{name} hook error: {denial}", True
        elif isinstance(asked, tuple):
            text, is_error = asked
        else:
            text, is_error = self.run_builtin(name, asked)
        self.send_tool_result(tool_use_id, text, is_error)
        return text

    def turn(self, raw: str) -> None:
        started = time.monotonic()
        # what the model reads: the current message's text, unescaped, where its element was
        prompt = CURRENT.sub(lambda m: html.unescape(m.group(1)), raw)
        self.log(
            {
                "event": "prompt",
                "text": prompt,
                "raw": raw,
                "session_id": self.session_id,
                "images": self.images,
            }
        )
        context_tokens = self.context_chars() // 4
        self.transcript["turns"].append({"prompt": prompt, "answer": None})
        self.save()  # the real CLI writes the prompt to its transcript at once
        self.system("session_state_changed", state="running", sdk_host_only=True)
        self.system(
            "init",
            cwd=os.getcwd(),
            tools=[f"mcp__{s}__{t}" for s, ts in self.mcp_tools.items() for t in ts],
            mcp_servers=[
                {"name": s, "status": "connected", "source": "sdk"} for s in self.mcp_servers
            ],
            model=self.model,
            permissionMode=self.opts.get("--permission-mode", "default"),
            claude_code_version="2.1.330-fake",
            apiKeySource="none",
        )
        query = HISTORY_BLOCKS.sub("", prompt).strip()
        if COMPACTION_REQUEST in prompt:
            query = self.summary_query(prompt)
        echo = query
        if self.interrupted_prompt is not None:
            # the real CLI sends the interrupted prompt along with the next one
            echo = f"{self.interrupted_prompt}\n\n{INTERRUPTED}\n\n{query}"
            self.interrupted_prompt = None
        usage = {
            "input_tokens": len(prompt) // 4,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": context_tokens,
        }
        calls = 1
        turn_usage = dict(usage)
        answers: list[str] = []
        reply: str | None = None
        pace = (3, 0.0, 0.0)  # text deltas of the reply, the pause between them, the first
        error: str | None = None
        self.lines = query.splitlines()
        try:
            while self.lines:
                line = LEADING_MENTIONS.sub("", self.lines.pop(0).strip())
                if line.startswith("FOR "):
                    _, server, line = ([*line.split(" ", 2), ""])[:3]
                    if server not in self.mcp_servers:
                        continue
                match = DIRECTIVE.match(line)
                if not match:
                    continue
                verb, rest = match.groups()
                if verb == "REPLY":
                    reply = rest.replace("\\n", "\n")
                elif verb == "STREAM":
                    chunks, delay, text = [*rest.split(" ", 2), "", "", ""][:3]
                    reply = text.replace("\\n", "\n")
                    first, _, delay = (delay or "0").rpartition("/")
                    pace = (max(1, int(chunks or 3)), float(delay or 0), float(first or 0))
                elif verb == "THINK":
                    self.assistant(
                        {"type": "thinking", "thinking": rest, "signature": "fake"}, usage
                    )
                elif verb == "SLEEP":
                    self.sleep(float(rest or 1))
                elif verb == "PAUSE":  # the hold point ``pause`` (if held there), mid-turn
                    hold("pause")
                elif verb == "SLEEP_FIRST":
                    seconds, _, tag = rest.partition(" ")
                    marker = os.path.join(self.state_dir, f"slept-{tag or 'default'}")
                    if not os.path.exists(marker):
                        open(marker, "w").close()
                        self.sleep(float(seconds or 1))
                elif verb == "LIMIT_FIRST":  # rate_limit|authentication_failed <resets> <tag>
                    kind, resets, tag = ([*rest.split(), "", "", ""])[:3]
                    marker = os.path.join(self.state_dir, f"limit-{tag or 'default'}")
                    if not os.path.exists(marker):
                        open(marker, "w").close()
                        self.plan_fault(kind or "rate_limit", int(resets or 0), usage)
                        self.finish(
                            started,
                            calls,
                            turn_usage,
                            self.fault_text,
                            "success",
                            is_error=True,
                            reason="api_error",
                        )
                        return
                elif verb == "ERROR":
                    error = rest or "fake error"
                elif verb == "OVERFLOW":
                    if not rest or context_tokens > int(rest):
                        error = TOO_LONG
                elif verb == "STDERR":
                    sys.stderr.write(rest + "\n")
                    sys.stderr.flush()
                elif verb == "EXTRA_RESULT":
                    self.extra_result = rest
                elif verb == "MALFORMED":
                    self.send(
                        {
                            "type": "assistant",
                            "message": {"content": [{"type": "text", "text": "?"}]},
                        }
                    )
                elif verb == "BROKEN_JSON":
                    sys.stdout.write('{"type": "assistant", "message": {broken\n')
                    sys.stdout.flush()
                elif verb == "EXIT":
                    sys.stdout.flush()
                    os._exit(int(rest or 1))
                elif verb == "USAGE":
                    numbers = [int(n) for n in rest.split()]
                    keys = (
                        "input_tokens",
                        "cache_read_input_tokens",
                        "cache_creation_input_tokens",
                        "output_tokens",
                    )
                    usage.update(dict(zip(keys, numbers, strict=False)))
                    turn_usage = dict(usage)
                elif verb == "TOOL":
                    name, _, raw = rest.partition(" ")
                    try:
                        args = json.loads(raw or "{}")
                    except ValueError:
                        args = {}
                    text = self.tool_turn(name, args, usage)
                    calls += 1
                    if self.tool_interrupted:
                        self.tool_interrupted = False
                        self.finish(
                            started,
                            calls,
                            turn_usage,
                            None,
                            "error_during_execution",
                            is_error=True,
                            reason="aborted_tools",
                        )
                        return
                    answers.append(f"TOOL_RESULT: {text}")
                    self.assistant({"type": "text", "text": answers[-1]}, usage)
                    self.fold()
                elif verb == "CALL_TOOL":
                    server, tool, raw = [*rest.split(" ", 2), "", "", "{}"][:3]
                    try:
                        args = json.loads(raw or "{}")
                    except ValueError:
                        args = {}
                    self.assistant({"type": "text", "text": f"Calling {tool}."}, usage)
                    tool_use_id = f"toolu_fake_{uuid.uuid4().hex[:16]}"
                    self.assistant(
                        {
                            "type": "tool_use",
                            "id": tool_use_id,
                            "name": f"mcp__{server}__{tool}",
                            "input": args,
                        },
                        usage,
                    )
                    text, is_error = self.call_tool(server, tool, args)
                    self.send_tool_result(tool_use_id, text, is_error)
                    calls += 1
                    usage = dict(
                        usage,
                        cache_read_input_tokens=usage["cache_read_input_tokens"]
                        + usage["input_tokens"],
                        input_tokens=len(text) // 4 + 10,
                    )
                    for key in (
                        "input_tokens",
                        "cache_read_input_tokens",
                        "cache_creation_input_tokens",
                    ):
                        turn_usage[key] += usage[key]
                    answers.append(f"TOOL_RESULT: {text}")
                    self.assistant({"type": "text", "text": answers[-1]}, usage)
                    self.fold()
        except Interrupted:
            self.interrupted_prompt = query
            self.send(
                {
                    "type": "user",
                    "message": {"role": "user", "content": [{"type": "text", "text": INTERRUPTED}]},
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": str(uuid.uuid4()),
                    "timestamp": now_iso(),
                }
            )
            self.finish(
                started,
                calls,
                turn_usage,
                None,
                "error_during_execution",
                is_error=True,
                reason="aborted_streaming",
            )
            return
        if error is not None:
            text = error if error == TOO_LONG else f"API Error: {error}"
            reason = "prompt_too_long" if error == TOO_LONG else "api_error"  # as CLI 2.1.330
            self.assistant({"type": "text", "text": text}, usage)
            self.finish(started, calls, turn_usage, text, "success", is_error=True, reason=reason)
            return
        if reply is None and not answers:
            reply = f"ECHO: {echo}"
        if reply is not None:
            answers.append(reply)
            try:
                self.assistant(
                    {"type": "text", "text": reply},
                    usage,
                    chunks=pace[0],
                    delay_s=pace[1],
                    first_s=pace[2],
                )
            except Interrupted:  # stopped while streaming: the answer is not finished
                self.interrupted_prompt = query
                self.finish(
                    started,
                    calls,
                    turn_usage,
                    None,
                    "error_during_execution",
                    is_error=True,
                    reason="aborted_streaming",
                )
                return
        final = answers[-1]
        turn_usage["output_tokens"] = max(1, sum(len(a) for a in answers) // 4)
        self.transcript["turns"][-1]["answer"] = "\n".join(answers)
        self.save()
        self.finish(
            started, calls, turn_usage, final, "success", is_error=False, reason="completed"
        )

    def finish(
        self,
        started: float,
        calls: int,
        usage: dict[str, int],
        result: str | None,
        subtype: str,
        *,
        is_error: bool,
        reason: str,
    ) -> None:
        price_in, price_out = PRICES.get(self.model, (3, 15))  # per million tokens
        self.cost += (
            usage["input_tokens"] * price_in
            + usage["output_tokens"] * price_out
            + usage["cache_read_input_tokens"] * price_in / 10
        ) / 1e6
        if isinstance(getattr(self, "transcript", None), dict):
            self.transcript["cost"] = self.cost
            with contextlib.suppress(OSError):
                self.save()
        message: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "is_error": is_error,
            "duration_ms": int((time.monotonic() - started) * 1000),
            "duration_api_ms": int((time.monotonic() - started) * 1000),
            "num_turns": calls,
            "session_id": self.session_id,
            "total_cost_usd": round(self.cost, 6),
            "usage": usage,
            "terminal_reason": reason,
            "stop_reason": "end_turn" if not is_error else None,
            "uuid": str(uuid.uuid4()),
        }
        if result is not None:
            message["result"] = result
        if self.turn_uuids:  # the user messages this result answers (folded ones too)
            message["user_message_uuid"] = self.turn_uuids[0]
            message["user_message_uuids"] = list(self.turn_uuids)
        if self.fault_status is not None:
            message["api_error_status"], self.fault_status = self.fault_status, None
        if subtype != "success":
            message["errors"] = [f"[ede_diagnostic] result_type=user stop_reason=null ({reason})"]
        self.send(message)
        self.system("session_state_changed", state="idle", sdk_host_only=True)
        if self.extra_result is not None:  # a CLI out of step: one result too many
            self.send({**message, "result": self.extra_result, "uuid": str(uuid.uuid4())})
            self.extra_result = None


def main() -> None:
    if "--version" in sys.argv[1:] or "-v" in sys.argv[1:]:
        print("2.1.330-fake (Claude Code)")
        return
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        FakeCLI(sys.argv[1:]).run()


if __name__ == "__main__":
    main()
