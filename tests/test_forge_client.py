"""The GitHub client against the fake forge: answers, refusals in the forge's words, the
rate limit honoured (one notice), retries, conditional requests, job logs without the token."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from legio.errors import ForgeError
from legio.forge.github import GitHub, web_host_of
from tests.fakes.fake_forge import FakeForge

TOKEN = "ghp_canary_client_0123456789"
REPO = "caesar/app"


@pytest.fixture
async def forge() -> AsyncIterator[FakeForge]:
    async with FakeForge(TOKEN) as server:
        server.add_repo(REPO)
        yield server


@pytest.fixture
async def client(forge: FakeForge) -> AsyncIterator[GitHub]:
    notices: list[str] = []

    async def notify(text: str) -> None:
        notices.append(text)

    github = GitHub(forge.api_url, TOKEN, notify=notify, backoff_s=0.01)
    github.notices = notices  # type: ignore[attr-defined]
    yield github
    await github.close()


async def test_whoami_and_repo(client: GitHub) -> None:
    assert await client.whoami() == "caesar"
    info = await client.repo(REPO)
    assert (info.full_name, info.default_branch, info.can_push) == (REPO, "main", True)


async def test_bad_token_is_said_in_the_forges_words(forge: FakeForge) -> None:
    github = GitHub(forge.api_url, "wrong-token-value", backoff_s=0.01)
    try:
        with pytest.raises(ForgeError) as caught:
            await github.whoami()
    finally:
        await github.close()
    assert caught.value.reason == "Bad credentials" and caught.value.status == 401
    assert "wrong-token-value" not in str(caught.value)


async def test_unknown_repo_is_not_found(client: GitHub) -> None:
    with pytest.raises(ForgeError, match="Not Found"):
        await client.repo("caesar/nope")


async def test_issues_leave_pull_requests_out(forge: FakeForge, client: GitHub) -> None:
    for title in ("one", "two", "three"):
        forge.add_issue(REPO, title, labels=("bug",))
    forge.repos[REPO].branches["legio/vorenus/main"] = "a" * 40
    pull = await client.open_pull(REPO, "legio/vorenus/main", "main", "fix", "body")
    assert pull.number == 4  # one number sequence with the issues
    issues = await client.issues(REPO)
    assert [i.number for i in issues] == [3, 2, 1]
    assert issues[0].labels == ("bug",)
    forge.add_comment(REPO, 2, "a comment")
    read = await client.issue(REPO, 2)
    assert read.title == "two" and [c.body for c in read.comments] == ["a comment"]


async def test_second_open_pull_is_refused_with_the_forges_reason(
    forge: FakeForge, client: GitHub
) -> None:
    forge.repos[REPO].branches["legio/vorenus/main"] = "a" * 40
    await client.open_pull(REPO, "legio/vorenus/main", "main", "t", "b")
    with pytest.raises(
        ForgeError, match=r"A pull request already exists for caesar:legio/vorenus/main\."
    ):
        await client.open_pull(REPO, "legio/vorenus/main", "main", "t", "b")
    found = await client.find_pull(REPO, "legio/vorenus/main")
    assert found is not None and found.number == 1


async def test_rate_limit_waits_until_reset_and_says_so_once(
    forge: FakeForge, client: GitHub
) -> None:
    forge.exhaust(reset_in=1.0)
    assert await client.whoami() == "caesar"
    assert await client.whoami() == "caesar"
    assert len(client.notices) == 1  # type: ignore[attr-defined]
    assert "rate limit" in client.notices[0]  # type: ignore[attr-defined]
    refused = [c for c in forge.calls_to("GET", "/user") if c.status == 403]
    assert len(refused) >= 1


async def test_server_errors_are_retried_then_succeed(forge: FakeForge, client: GitHub) -> None:
    forge.fail("/repos/caesar/app", 502, times=2)
    assert (await client.repo(REPO)).full_name == REPO
    assert [c.status for c in forge.calls_to("GET", "/repos/caesar/app")] == [502, 502, 200]


async def test_forge_down_is_one_error_in_words(forge: FakeForge, client: GitHub) -> None:
    forge.fail("/repos/caesar/app", 503, times=50)
    with pytest.raises(ForgeError, match=r"HTTP 503.*5 tries; the forge may be down"):
        await client.repo(REPO)


async def test_an_answer_that_is_not_json(forge: FakeForge, client: GitHub) -> None:
    forge.not_json("/user", times=1)
    assert await client.whoami() == "caesar"  # retried
    forge.not_json("/user", times=50)
    with pytest.raises(ForgeError, match="not JSON"):
        await client.whoami()


async def test_conditional_requests_answer_304_from_the_cache(
    forge: FakeForge, client: GitHub
) -> None:
    forge.add_check_run(REPO, "b" * 40, "tests", "in_progress")
    first = await client.ci(REPO, "b" * 40)
    left = forge.remaining
    again = await client.ci(REPO, "b" * 40)
    assert first == again and not again.settled
    assert [c.status for c in forge.calls_to("GET", "check-runs")] == [200, 304]
    assert forge.remaining == left  # 304s are not counted


async def test_ref_with_slashes_and_job_log_tail_without_the_token(
    forge: FakeForge, client: GitHub
) -> None:
    sha = "c" * 40
    forge.repos[REPO].branches["legio/vorenus/main"] = sha
    run = forge.add_check_run(REPO, sha, "tests", conclusion="failure", log="x" * 9000 + "END")
    state = await client.ci(REPO, "legio/vorenus/main")
    assert state.settled and state.failed == ["tests"] and state.runs[0].actions_job
    tail = await client.job_log_tail(REPO, int(run["id"]), 100)
    assert tail.endswith("END") and len(tail) == 100
    storage = forge.calls_to("GET", "/storage/logs/")
    assert storage and storage[0].status == 200 and "authorization" not in storage[0].headers


def test_web_host() -> None:
    assert web_host_of("https://api.github.com") == "github.com"
    assert web_host_of("https://ghe.example.com/api/v3") == "ghe.example.com"


async def test_a_moved_repository_is_said_not_followed(forge: FakeForge, client: GitHub) -> None:
    forge.fail("/repos/caesar/app", 301, times=1, body="")
    with pytest.raises(ForgeError, match=r"moved \(HTTP 301\): a renamed repository"):
        await client.repo(REPO)


def test_rate_wait_reads_retry_after_and_the_reset() -> None:
    from legio.forge.transport import rate_wait

    assert rate_wait(429, {"retry-after": "7"}, 0) == 7
    assert rate_wait(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "100"}, 40) == 61
    assert rate_wait(403, {"x-ratelimit-remaining": "12"}, 0) is None  # a plain refusal
    assert rate_wait(404, {"retry-after": "7"}, 0) is None
    assert rate_wait(429, {"retry-after": "not a date"}, 0) == 60
