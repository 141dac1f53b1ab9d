"""The forge client's bounds (an attacker's pass): the token never follows a link to
another host, rate-limit answers are counted, a long rate limit is an answer when Caesar
waits, every call has a deadline, answers are read up to ``MAX_BODY``, issue pages are
capped, a job log's redirect to a loopback or private host is refused."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from legio.errors import ForgeError
from legio.forge.github import GitHub, public_https
from legio.forge.transport import MAX_BODY, MIN_RATE_WAIT_S, Transport, caesar_waits

API = "https://api.forge.test"
TOKEN = "ghp_bounds_canary"
Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def transport(handler: Handler, slept: list[float], **options: float) -> Transport:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return Transport(client, TOKEN, API, sleep=sleep, backoff_s=0.0, **options)  # type: ignore[arg-type]


async def test_a_next_page_on_another_host_does_not_get_the_token() -> None:
    seen: list[tuple[str, str]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.host, request.headers.get("authorization", "")))
        link = '<https://evil.test/repos/o/r/issues?page=2>; rel="next"'
        return httpx.Response(200, json=[{"n": 1}], headers={"link": link})

    http = transport(handler, [])
    with pytest.raises(ForgeError, match=r"refused to send the token to https://evil\.test"):
        async for _ in http.getiter("/repos/o/r/issues"):
            pass
    assert [host for host, _ in seen] == ["api.forge.test"]
    with pytest.raises(ForgeError, match="refused"):  # another scheme, same host
        await http.getitem("http://api.forge.test/user")


async def test_rate_limit_answers_count_and_wait_at_least_a_second() -> None:
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        past = str(int(time.time()) - 100)
        headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": past, "retry-after": "0"}
        return httpx.Response(403, json={"message": "rate limit"}, headers=headers)

    slept: list[float] = []
    http = transport(handler, slept)
    with pytest.raises(ForgeError, match="rate limit, still, after 3 waits"):
        await http.getitem("/user")
    assert calls == 4 and len(slept) == 3 and all(s >= MIN_RATE_WAIT_S for s in slept)


async def test_a_long_rate_limit_is_an_answer_when_caesar_waits() -> None:
    answers = [403, 200]

    async def handler(request: httpx.Request) -> httpx.Response:
        status = answers.pop(0) if answers else 200
        if status == 403:
            reset = str(int(time.time()) + 600)
            headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}
            return httpx.Response(403, json={"message": "rate limit"}, headers=headers)
        return httpx.Response(200, json={"login": "caesar"})

    slept: list[float] = []
    http = transport(handler, slept)
    with caesar_waits(), pytest.raises(ForgeError, match=r"rate limit: until \d\d:\d\d"):
        await http.getitem("/user")
    assert slept == []
    answers[:] = [403, 200]
    assert (await http.getitem("/user"))["login"] == "caesar"  # the follower waits
    assert len(slept) == 1 and slept[0] > 500


async def test_a_call_has_a_deadline() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()  # never answers
        raise AssertionError

    http = transport(handler, [], deadline_s=0.3)
    with pytest.raises(ForgeError, match="no answer within"):
        await http.getitem("/user")


@pytest.mark.parametrize("sized", [True, False])
async def test_an_answer_past_max_body_is_not_read(sized: bool) -> None:
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(MAX_BODY // 65536 + 8):
            sent += 65536
            yield b" " * 65536

    async def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json"}
        if sized:
            return httpx.Response(200, content=b" " * (MAX_BODY + 1), headers=headers)
        return httpx.Response(200, content=chunks(), headers=headers)

    http = transport(handler, [])
    with pytest.raises(ForgeError, match="an answer bigger than 8 MB: not read"):
        await http.getitem("/user")
    assert sent <= MAX_BODY + 65536


async def test_issue_pages_are_capped() -> None:
    pages = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal pages
        pages += 1
        link = f'<{API}/repos/o/r/issues?page={pages + 1}>; rel="next"'
        items = [{"number": i, "pull_request": {}} for i in range(100)]  # pull requests only
        return httpx.Response(200, json=items, headers={"link": link})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    github = GitHub(API, TOKEN, client=client)
    try:
        assert await github.issues("o/r", limit=30) == []
    finally:
        await github.close()
    assert 1 <= pages <= 3


@pytest.mark.parametrize(
    "location",
    [
        "http://logs.example.com/1",
        "https://127.0.0.1/1",
        "https://10.1.2.3/1",
        "https://localhost/x",
    ],
)
async def test_a_job_log_redirect_to_a_private_or_plain_host_is_refused(location: str) -> None:
    hosts: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        return httpx.Response(302, headers={"location": location})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    github = GitHub(API, TOKEN, client=client)
    try:
        with pytest.raises(ForgeError, match="not followed"):
            await github.job_log_tail("o/r", 1, 1000)
    finally:
        await github.close()
    assert hosts == ["api.forge.test"]
    assert public_https("https://logs.githubusercontent.com/x")


async def test_a_job_log_is_read_up_to_max_body() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"x" * (MAX_BODY + 10))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    github = GitHub(API, TOKEN, client=client)
    try:
        with pytest.raises(ForgeError, match="bigger than 8 MB"):
            await github.job_log_tail("o/r", 1, 1000)
    finally:
        await github.close()
