"""A fake Anthropic Messages API on 127.0.0.1, for running the real bundled Claude CLI.

A stdlib ``ThreadingHTTPServer`` in a background thread answering
``POST /v1/messages`` (SSE when ``stream`` is true, JSON otherwise) and
``/v1/messages/count_tokens``. The model is scripted like the fake CLI: the latest
user text decides the answer.

- a line ``CALL_TOOL <tool name> <json>`` → a ``tool_use`` block for that tool (e.g.
  ``mcp__memoria_vorenus__list_acta`` or ``Read``); the CLI runs it and posts again;
- a request whose last user content is a ``tool_result`` → ``TOOL_RESULT: <text>``;
- a line ``REPLY <text>`` → that text; otherwise ``ECHO: <last line of the prompt>``;
- a line ``LIMIT_FIRST <reset unix s> [tag]`` → the first time, HTTP 429 with the plan's
  unified rate-limit headers (status ``rejected``, five-hour window, that reset);
- a line ``USAGE <n>`` → the answer reports ``n`` input tokens (the CLI prices them);
- a line ``TOO_LONG <n>`` → HTTP 400, the API's "prompt is too long" refusal, for the
  first ``n`` requests whose latest prompt holds it (retries after that go through).

Every request body is kept in ``requests`` for assertions. ``safe_cli_env`` returns
the environment of PROTOCOLS.md "Safety first", so the CLI reaches nothing else.
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PLAN_FILE = re.compile(r"/[^\s\"\\]*/\.?plans/[^\s\"\\]+\.md")  # plan mode's file, in its reminder
TOOL_LINE = re.compile(r"^(?:@\w+\s+)*CALL_TOOL (\S+) (\{.*\})\s*$", re.MULTILINE)
REPLY_LINE = re.compile(r"^(?:@\w+\s+)*REPLY (.*)$", re.MULTILINE)
TOO_LONG_LINE = re.compile(r"^(?:@\w+\s+)*TOO_LONG(?: (\d+))?\s*$", re.MULTILINE)
TOO_LONG_ERROR = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 215000 tokens > 200000 maximum",
    },
}
OVERLOADED_LINE = re.compile(r"^(?:@\w+\s+)*OVERLOADED_FIRST (\d+) (\S+)\s*$", re.MULTILINE)
LIMIT_LINE = re.compile(r"^(?:@\w+\s+)*LIMIT_FIRST (\d+)(?: (\S+))?\s*$", re.MULTILINE)
LIMIT_ERROR = {
    "type": "error",
    "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your limit"},
}
USAGE_LINE = re.compile(r"^(?:@\w+\s+)*USAGE (\d+)\s*$", re.MULTILINE)
SLOW_LINE = re.compile(r"^(?:@\w+\s+)*SLOW (\d+(?:\.\d+)?)\s*$", re.MULTILINE)
PINNED_MODEL = "claude-sonnet-4-5"
REMINDER = re.compile(r"\s*<system-reminder>.*?</system-reminder>\s*", re.DOTALL)
# the message being answered, rendered like a nuntius of the history (Legio's current_message)
CURRENT = re.compile(r'<nuntius\b[^>]*\bcurrent="true"[^>]*>(.*?)</nuntius>', re.DOTALL)


def reads(text: str) -> str:
    """A user text as the model reads it: the current message's own text, unescaped."""
    return CURRENT.sub(lambda m: html.unescape(m.group(1)), text)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for block in content or []:
        if block.get("type") == "text":
            out.append(block.get("text", ""))
    return out


def latest_prompt(body: dict[str, Any]) -> str:
    """The latest user text of a request (system reminders left out)."""
    messages = body.get("messages") or []
    content = messages[-1].get("content") if messages else ""
    texts = [t for t in _texts(content) if not t.lstrip().startswith("<system-reminder>")]
    return reads(texts[-1]) if texts else ""


def decide(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks the fake model answers ``body`` with."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {"content": ""}
    content = last.get("content")
    if isinstance(content, list):
        results = [b for b in content if b.get("type") == "tool_result"]
        if results:
            inner = results[-1].get("content")
            text = "\n".join(_texts(inner)) if not isinstance(inner, str) else inner
            return [{"type": "text", "text": f"TOOL_RESULT: {REMINDER.sub('', text).strip()}"}]
    texts = [t for t in _texts(content) if not t.lstrip().startswith("<system-reminder>")]
    prompt = reads(texts[-1]) if texts else ""
    call = TOOL_LINE.search(prompt)
    if call:
        raw = call.group(2)
        if "$PLAN_FILE" in raw and (plan := PLAN_FILE.search(json.dumps(body))):
            raw = raw.replace("$PLAN_FILE", plan.group(0))
        return [
            {"type": "text", "text": f"Calling {call.group(1)}."},
            {
                "type": "tool_use",
                "id": f"toolu_fake_{uuid.uuid4().hex[:16]}",
                "name": call.group(1),
                "input": json.loads(raw),
            },
        ]
    reply = REPLY_LINE.search(prompt)
    if reply:
        return [{"type": "text", "text": reply.group(1)}]
    lines = [line for line in prompt.strip().splitlines() if line.strip()]
    return [{"type": "text", "text": f"ECHO: {lines[-1] if lines else ''}"}]


def _input_tokens(body: dict[str, Any]) -> int:
    return max(1, len(json.dumps(body.get("messages", []))) // 4)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._json(
            404, {"type": "error", "error": {"type": "not_found_error", "message": "not found"}}
        )

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    def _limit(self, resets_at: int) -> None:
        """The plan's limit: 429 with the unified rate-limit headers, status rejected."""
        data = json.dumps(LIMIT_ERROR).encode()
        self.send_response(429)
        self.send_header("content-type", "application/json")
        self.send_header("anthropic-ratelimit-unified-status", "rejected")
        self.send_header("anthropic-ratelimit-unified-reset", str(resets_at))
        self.send_header("anthropic-ratelimit-unified-representative-claim", "five_hour")
        self.send_header("anthropic-ratelimit-unified-5h-utilization", "1.0")
        self.send_header("anthropic-ratelimit-unified-5h-reset", str(resets_at))
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        if path.endswith("/v1/messages/count_tokens"):
            self._json(200, {"input_tokens": _input_tokens(body)})
            return
        if not path.endswith("/v1/messages"):
            self.do_GET()
            return
        with self.server.lock:
            self.server.requests.append(body)
            self.server.times.append(time.perf_counter())
            self.server.auth.append(
                self.headers.get("authorization") or self.headers.get("x-api-key") or ""
            )
        busy = OVERLOADED_LINE.search(latest_prompt(body))
        if busy:  # the first N requests of this tag: 529 overloaded (the CLI retries)
            with self.server.lock:
                seen = self.server.overloaded.get(busy.group(2), 0)
                self.server.overloaded[busy.group(2)] = seen + 1
            if seen < int(busy.group(1)):
                error = {"type": "overloaded_error", "message": "Overloaded"}
                self._json(529, {"type": "error", "error": error})
                return
        limit = LIMIT_LINE.search(latest_prompt(body))
        if limit:
            with self.server.lock:
                first = limit.group(0) not in self.server.limited
                self.server.limited.add(limit.group(0))
            if first:
                self._limit(int(limit.group(1)))
                return
        too_long = TOO_LONG_LINE.search(latest_prompt(body))
        if too_long:
            with self.server.lock:
                seen = self.server.too_long_seen.get(too_long.group(0), 0) + 1
                self.server.too_long_seen[too_long.group(0)] = seen
            if seen <= int(too_long.group(1) or 1):
                self._json(400, TOO_LONG_ERROR)
                return
        slow = SLOW_LINE.search(latest_prompt(body))
        if slow:  # a slow model: the answer waits (until ``release()`` or the server stops)
            self.server.thinking.set()
            self.server.released.wait(float(slow.group(1)))
        blocks = decide(body)
        reported = USAGE_LINE.search(latest_prompt(body))
        usage = {
            "input_tokens": int(reported.group(1)) if reported else _input_tokens(body),
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        message = {
            "id": f"msg_fake_{uuid.uuid4().hex[:16]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", PINNED_MODEL),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            message.update(content=blocks, stop_reason=stop)
            self._json(200, message)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()

        def event(name: str, data: dict[str, Any]) -> None:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

        event("message_start", {"type": "message_start", "message": message})
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
            event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            event("content_block_stop", {"type": "content_block_stop", "index": index})
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
        event("message_stop", {"type": "message_stop"})
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []  # when each request came (perf_counter): benchmarks
        self.auth: list[str] = []  # each request's credential header, in order
        self.too_long_seen: dict[str, int] = {}
        self.limited: set[str] = set()
        self.overloaded: dict[str, int] = {}
        self.lock = threading.Lock()
        self.thinking = threading.Event()  # a SLOW request has arrived
        self.released = threading.Event()  # SLOW requests answer now


class FakeMessagesApi:
    """Start with ``with FakeMessagesApi() as api``; ``api.url`` is its base URL."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._server.lock:
            return list(self._server.requests)

    @property
    def times(self) -> list[float]:
        """When each request came (``time.perf_counter``), in order."""
        with self._server.lock:
            return list(self._server.times)

    @property
    def auth(self) -> list[str]:
        """The credential each request carried (``Bearer …`` or the API key)."""
        with self._server.lock:
            return list(self._server.auth)

    def thinking(self, timeout: float) -> bool:
        """Wait until a ``SLOW`` request has arrived (the model is "thinking")."""
        return self._server.thinking.wait(timeout)

    def release(self) -> None:
        """Let every ``SLOW`` request answer now (and later ones at once)."""
        self._server.released.set()

    def __enter__(self) -> FakeMessagesApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.released.set()
        self._server.shutdown()
        self._server.server_close()

    def safe_cli_env(self, home: Path) -> dict[str, str]:
        """The environment under which the real CLI talks only to this server."""
        for sub in ("config", "home", "tmp"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "CLAUDE_CONFIG_DIR": str(home / "config"),
            "HOME": str(home / "home"),
            "TMPDIR": str(home / "tmp"),
            "NO_PROXY": "127.0.0.1,localhost",
            "IS_SANDBOX": "1",
        }
