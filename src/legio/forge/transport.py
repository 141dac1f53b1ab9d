"""How Legio talks to a forge's REST API: gidgethub over one ``httpx.AsyncClient``, with
the faults a long-running daemon meets handled once, here.

- **Conditional requests.** gidgethub keeps an ETag cache (bounded here, ``Cache``): a GET
  it has seen goes out with ``If-None-Match``, and a 304 (which GitHub does not count
  against the rate limit) answers from the cache. CI polling depends on it.
- **Rate limit.** A 403 or 429 with ``Retry-After`` or ``X-RateLimit-Remaining: 0`` is
  not an error: the request waits until the reset (``Retry-After``, else
  ``X-RateLimit-Reset``, at least ``MIN_RATE_WAIT_S``, capped by ``max_wait_s``) and goes
  again, at most ``MAX_RATE_WAITS`` times; ``notify`` is told once per exhaustion, in
  words. Inside ``caesar_waits()`` (commands, agent tools, Publish: someone waits for
  the answer) a wait longer than ``CAESAR_WAIT_S`` is a ``ForgeError`` saying until when;
  the CI follower, outside it, waits.
- **Bounds.** Each call has a total deadline (``deadline_s``); answers are read as a
  stream and refused past ``MAX_BODY``.
- **The forge down.** No answer, a 5xx, or a success that is not JSON: retried with
  backoff (``retries`` times), then one ``ForgeError`` that says so in words.
- **Refusals.** Any other 4xx is a ``ForgeError`` with the forge's own reason
  ("Bad credentials", "Not Found", a 422's messages).

The token goes in the ``Authorization`` header of requests to ``api_url`` only: a URL
(a ``Link: rel=next`` page) whose scheme or host differs is refused; every
error's text passes ``redact`` (no token in a message, log line or exception).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import httpx
from gidgethub import httpx as gh_httpx

from legio.errors import ForgeError
from legio.fence.vault import REDACTED, redact

logger = logging.getLogger(__name__)

Notify = Callable[[str], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]
CACHE_ENTRIES = 512
MAX_BODY = 8 * 1024 * 1024  # an answer bigger than this is not read whole
MAX_RATE_WAITS = 3  # rate-limit answers waited out per call; then a ForgeError
MIN_RATE_WAIT_S = 1.0
CAESAR_WAIT_S = 30.0  # the longest rate-limit wait when Caesar waits for the answer
DEADLINE_S = 120.0  # one call, its retries and backoff (rate-limit waits apart)
_patience: ContextVar[float | None] = ContextVar("legio_forge_patience", default=None)


@contextlib.contextmanager
def caesar_waits(limit_s: float = CAESAR_WAIT_S) -> Iterator[None]:
    """Forge calls made inside wait for a rate limit ``limit_s`` at most: a longer one is
    a ``ForgeError`` "the forge's rate limit: until HH:MM" (someone waits for them)."""
    token = _patience.set(limit_s)
    try:
        yield
    finally:
        _patience.reset(token)


def until(seconds: float) -> str:
    """The local time ``seconds`` from now, as HH:MM."""
    return time.strftime("%H:%M", time.localtime(time.time() + seconds))


async def read_bounded(response: httpx.Response, limit: int = MAX_BODY) -> bytes | None:
    """A streamed answer's body, or None when it is bigger than ``limit`` bytes."""
    length = response.headers.get("content-length", "").strip()
    size = int(length) if length.isdigit() else 0
    if size > limit:
        return None
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if total > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class Cache(OrderedDict[str, Any]):
    """gidgethub's ETag cache, the least recently stored entries dropped past ``limit``."""

    def __init__(self, limit: int = CACHE_ENTRIES) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


def reason_of(body: bytes) -> str:
    """The forge's own words in an error answer: its ``message`` and each error's."""
    try:
        data = json.loads(body)
    except ValueError:
        text = body.decode(errors="replace").strip()
        return f"an answer that is not JSON ({text[:120]!r})" if text else "an empty answer"
    if not isinstance(data, dict):
        return "an answer of an unexpected shape"
    parts = [str(data.get("message") or "").strip()]
    for error in data.get("errors") or []:
        if isinstance(error, dict):
            parts.append(str(error.get("message") or error.get("code") or "").strip())
        elif isinstance(error, str):
            parts.append(error)
    return ": ".join(p for p in parts if p) or "no reason given"


def rate_wait(status: int, headers: Mapping[str, str], now: float) -> float | None:
    """Seconds to wait when an answer says the rate limit is reached; None otherwise."""
    if status not in (403, 429):
        return None
    after = headers.get("retry-after", "").strip()
    if after.isdigit():
        return float(after)
    if after:  # an HTTP date
        try:
            return max(0.0, email.utils.parsedate_to_datetime(after).timestamp() - now)
        except (TypeError, ValueError):
            return 60.0
    if headers.get("x-ratelimit-remaining", "").strip() == "0":
        reset = headers.get("x-ratelimit-reset", "").strip()
        return max(0.0, float(reset) - now) + 1 if reset.isdigit() else 60.0
    return 60.0 if status == 429 else None


class Transport(gh_httpx.GitHubAPI):
    """gidgethub's client with Legio's retry, rate-limit and error rules (module docstring)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        token: str,
        api_url: str,
        *,
        notify: Notify | None = None,
        retries: int = 4,
        backoff_s: float = 1.0,
        max_wait_s: float = 3600.0,
        deadline_s: float = DEADLINE_S,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        # gidgethub types its client as httpx2's (a fork with the same API)
        shared: Any = client
        super().__init__(
            shared, "legio", oauth_token=token or None, cache=Cache(), base_url=api_url
        )
        self.client = client
        self.token = token
        parts = urlsplit(api_url)
        self.host = parts.netloc
        self.origin = (parts.scheme.lower(), parts.netloc.lower())
        self.deadline_s = deadline_s
        self.notify = notify
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        self._told = False  # the rate limit said once per exhaustion
        self.calls = 0  # requests that went out (tests and /status)

    def clean(self, text: str) -> str:
        """``text`` without the token (the vault's secrets and this client's own)."""
        text = redact(text)
        return text.replace(self.token, REDACTED) if self.token else text

    def what(self, method: str, url: str) -> str:
        path = urlsplit(url).path
        return self.clean(f"the forge ({self.host}) {method} {path}")

    async def sleep(self, seconds: float) -> None:
        await self._sleep(seconds)

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        parts = urlsplit(url)
        if (parts.scheme.lower(), parts.netloc.lower()) != self.origin:
            raise ForgeError(
                self.clean(f"the forge ({self.host}) {method}"),
                self.clean(
                    f"refused to send the token to {parts.scheme}://{parts.netloc} (not the "
                    "forge's API URL; a pagination link elsewhere?)"
                ),
            )
        attempt = 0
        waits = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.deadline_s
        while True:
            problem = ""
            left = deadline - loop.time()
            if left <= 0:
                raise ForgeError(
                    self.what(method, url),
                    f"no answer within {_duration(self.deadline_s)}; the forge may be down",
                )
            try:
                self.calls += 1
                async with asyncio.timeout(left):
                    request = self.client.build_request(
                        method, url, headers=dict(headers), content=body
                    )
                    response = await self.client.send(request, stream=True)
                    try:
                        content = await read_bounded(response)
                    finally:
                        await response.aclose()
            except (httpx.HTTPError, TimeoutError) as e:
                problem = f"no answer ({type(e).__name__})"
            else:
                status, answer = response.status_code, response.headers
                if content is None:
                    raise ForgeError(
                        self.what(method, url),
                        f"an answer bigger than {MAX_BODY // (1024 * 1024)} MB: not read",
                        status,
                    )
                wait = rate_wait(status, answer, time.time())
                if wait is not None:
                    waits += 1
                    if waits > MAX_RATE_WAITS:
                        raise ForgeError(
                            self.what(method, url),
                            f"the forge's rate limit, still, after {MAX_RATE_WAITS} waits",
                            status,
                        )
                    deadline += await self._wait_for_limit(wait, method, url)  # apart
                    continue
                if 300 <= status < 400 and status != 304:
                    moved = answer.get("location", "")
                    raise ForgeError(
                        self.what(method, url),
                        self.clean(
                            f"moved (HTTP {status}{' to ' + moved if moved else ''}): "
                            "a renamed repository? set [projects.<name>] repo"
                        ),
                        status,
                    )
                if status < 400 or status == 304:
                    if status in (200, 201) and not _is_json(answer, content):
                        problem = f"an answer that is not JSON (HTTP {status})"
                    else:
                        self._told = False
                        return status, answer, content
                elif status >= 500:
                    problem = f"HTTP {status} ({reason_of(content)})"
                else:
                    raise ForgeError(self.what(method, url), self.clean(reason_of(content)), status)
            attempt += 1
            if attempt > self.retries:
                raise ForgeError(
                    self.what(method, url),
                    self.clean(f"{problem}, {attempt} tries; the forge may be down, try later"),
                )
            logger.info("forge %s %s: %s; trying again", method, urlsplit(url).path, problem)
            await self.sleep(min(self.backoff_s * 2 ** (attempt - 1), 60.0))

    async def _wait_for_limit(self, wait: float, method: str, url: str) -> float:
        """Wait out a rate limit (the seconds waited); ``ForgeError`` when Caesar waits
        and it is longer than his patience (``caesar_waits``)."""
        wait = min(max(wait, MIN_RATE_WAIT_S), self.max_wait_s)
        patience = _patience.get()
        if patience is not None and wait > patience:
            raise ForgeError(self.what(method, url), f"the forge's rate limit: until {until(wait)}")
        if not self._told:
            self._told = True
            message = (
                f"The forge's rate limit ({self.host}) is reached: Legio waits "
                f"{_duration(wait)} and goes on."
            )
            logger.warning("%s", message)
            if self.notify is not None:
                await self.notify(message)
        await self.sleep(wait)
        return wait


def _is_json(headers: Mapping[str, str], content: bytes) -> bool:
    if not content.strip():
        return True  # 201/200 with no body: nothing to decode
    if "json" not in headers.get("content-type", ""):
        return False
    try:
        json.loads(content)
    except ValueError:
        return False
    return True


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"
