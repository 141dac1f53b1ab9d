"""How Legio talks to a forge's REST API: gidgethub over one ``httpx.AsyncClient``, with
the faults a long-running daemon meets handled once, here.

- **Conditional requests.** gidgethub keeps an ETag cache (bounded here, ``Cache``): a GET
  it has seen goes out with ``If-None-Match``, and a 304 (which GitHub does not count
  against the rate limit) answers from the cache. CI polling depends on it.
- **Rate limit.** A 403 or 429 with ``Retry-After`` or ``X-RateLimit-Remaining: 0`` is
  not an error: the request waits until the reset (``Retry-After``, else
  ``X-RateLimit-Reset``, capped by ``max_wait_s``) and goes again; ``notify`` is told
  once per exhaustion, in words.
- **The forge down.** No answer, a 5xx, or a success that is not JSON: retried with
  backoff (``retries`` times), then one ``ForgeError`` that says so in words.
- **Refusals.** Any other 4xx is a ``ForgeError`` with the forge's own reason
  ("Bad credentials", "Not Found", a 422's messages).

The token goes in the ``Authorization`` header of requests to ``api_url`` only; every
error's text passes ``redact`` (no token in a message, log line or exception).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
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
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        # gidgethub types its client as httpx2's (a fork with the same API)
        shared: Any = client
        super().__init__(
            shared, "legio", oauth_token=token or None, cache=Cache(), base_url=api_url
        )
        self.client = client
        self.token = token
        self.host = urlsplit(api_url).netloc
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
        attempt = 0
        while True:
            problem = ""
            try:
                self.calls += 1
                response = await self.client.request(
                    method, url, headers=dict(headers), content=body
                )
            except httpx.HTTPError as e:
                problem = f"no answer ({type(e).__name__})"
            else:
                status, answer, content = response.status_code, response.headers, response.content
                wait = rate_wait(status, answer, time.time())
                if wait is not None:
                    await self._wait_for_limit(wait)
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

    async def _wait_for_limit(self, wait: float) -> None:
        wait = min(wait, self.max_wait_s)
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
