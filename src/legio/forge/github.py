"""GitHub (and GitHub Enterprise) behind the ``Forge`` seam, over its REST API.

Every call goes through ``Transport`` (conditional requests, rate limit, retries, the
forge's own reasons). A list of issues drops the pull requests GitHub lists among them
(each has a ``pull_request`` key). An Actions job's log answers 302 to a short-lived URL
on another host: it is followed by hand, without the token, and only its tail is kept.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx

from legio.errors import ForgeError
from legio.forge.base import (
    CheckRun,
    CiState,
    Comment,
    Issue,
    PrFile,
    PullRequest,
    RepoInfo,
    Review,
)
from legio.forge.transport import MAX_BODY, Notify, Sleep, Transport

PAGE = 100
METHOD_KEYS = (
    ("merge", "allow_merge_commit"),
    ("squash", "allow_squash_merge"),
    ("rebase", "allow_rebase_merge"),
)
LOG_DEADLINE_S = 120.0  # a job log's answer, whole


def web_host_of(api_url: str) -> str:
    """Where repositories live for an API: api.github.com → github.com; a GitHub
    Enterprise ``https://host/api/v3`` → host."""
    host = urlsplit(api_url).netloc
    return "github.com" if host == "api.github.com" else host


def _pull(data: dict[str, Any]) -> PullRequest:
    head = data.get("head") or {}
    head_repo = head.get("repo") or {}
    return PullRequest(
        number=int(data["number"]),
        url=str(data.get("html_url") or ""),
        state=str(data.get("state") or ""),
        merged=bool(data.get("merged") or data.get("merged_at")),
        title=str(data.get("title") or ""),
        head=str(head.get("ref") or ""),
        head_sha=str(head.get("sha") or ""),
        base=str((data.get("base") or {}).get("ref") or ""),
        head_repo=str(head_repo.get("full_name") or ""),
        body=str(data.get("body") or ""),
        mergeable_state=str(data.get("mergeable_state") or ""),
    )


def _comment(data: dict[str, Any]) -> Comment:
    return Comment(
        author=str((data.get("user") or {}).get("login") or ""),
        body=str(data.get("body") or ""),
        created_at=str(data.get("created_at") or ""),
        path=str(data.get("path") or ""),
        line=int(data.get("line") or 0),
        association=str(data.get("author_association") or ""),
    )


def _issue(data: dict[str, Any], comments: tuple[Comment, ...] = ()) -> Issue:
    return Issue(
        number=int(data["number"]),
        title=str(data.get("title") or ""),
        url=str(data.get("html_url") or ""),
        state=str(data.get("state") or ""),
        author=str((data.get("user") or {}).get("login") or ""),
        labels=tuple(
            str(label.get("name") if isinstance(label, dict) else label)
            for label in data.get("labels") or []
        ),
        created_at=str(data.get("created_at") or ""),
        body=str(data.get("body") or ""),
        comments=comments,
    )


class GitHub:
    """The ``Forge`` of GitHub's REST API at ``api_url``."""

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        notify: Notify | None = None,
        retries: int = 4,
        backoff_s: float = 1.0,
        sleep: Sleep | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.web_host = web_host_of(self.api_url)
        self.client = client or httpx.AsyncClient(timeout=30.0, follow_redirects=False)
        extra = {"sleep": sleep} if sleep is not None else {}
        self.http = Transport(
            self.client,
            token,
            self.api_url,
            notify=notify,
            retries=retries,
            backoff_s=backoff_s,
            **extra,  # type: ignore[arg-type]
        )

    def set_notify(self, notify: Notify | None) -> None:
        self.http.notify = notify

    async def close(self) -> None:
        await self.client.aclose()

    async def _get(self, path: str) -> Any:
        return await self.http.getitem(path)

    async def whoami(self) -> str:
        data = await self._get("/user")
        return str(data.get("login") or "")

    async def repo(self, repo: str) -> RepoInfo:
        data = await self._get(f"/repos/{repo}")
        return RepoInfo(
            full_name=str(data.get("full_name") or repo),
            default_branch=str(data.get("default_branch") or ""),
            private=bool(data.get("private")),
            url=str(data.get("html_url") or ""),
            can_push=bool((data.get("permissions") or {}).get("push")),
            merge_methods=tuple(
                method
                for method, key in METHOD_KEYS
                if data.get(key, True)  # GitHub leaves these out for a reader: all allowed
            ),
        )

    async def find_pull(self, repo: str, branch: str) -> PullRequest | None:
        owner = repo.split("/", 1)[0]
        head = quote(f"{owner}:{branch}", safe="")
        found = await self._get(f"/repos/{repo}/pulls?head={head}&state=open&per_page=10")
        pulls = [_pull(p) for p in found if isinstance(p, dict)]
        return next((p for p in pulls if p.head == branch), None)

    async def get_pull(self, repo: str, number: int) -> PullRequest:
        return _pull(await self._get(f"/repos/{repo}/pulls/{number}"))

    async def open_pull(
        self, repo: str, branch: str, base: str, title: str, body: str
    ) -> PullRequest:
        data = {"title": title, "head": branch, "base": base, "body": body}
        return _pull(await self.http.post(f"/repos/{repo}/pulls", data=data))

    async def update_pull(self, repo: str, number: int, title: str, body: str) -> PullRequest:
        data = {"title": title, "body": body}
        return _pull(await self.http.patch(f"/repos/{repo}/pulls/{number}", data=data))

    async def ci(self, repo: str, ref: str) -> CiState:
        ref = quote(ref, safe="/")
        checks = await self._get(f"/repos/{repo}/commits/{ref}/check-runs?per_page={PAGE}")
        status = await self._get(f"/repos/{repo}/commits/{ref}/status?per_page={PAGE}")
        runs = tuple(
            CheckRun(
                id=int(r["id"]),
                name=str(r.get("name") or ""),
                status=str(r.get("status") or ""),
                conclusion=str(r.get("conclusion") or ""),
                url=str(r.get("html_url") or r.get("details_url") or ""),
                actions_job="/actions/" in str(r.get("html_url") or r.get("details_url") or ""),
            )
            for r in checks.get("check_runs") or []
        )
        statuses = tuple(
            (str(s.get("context") or ""), str(s.get("state") or ""), str(s.get("target_url") or ""))
            for s in status.get("statuses") or []
        )
        return CiState(str(status.get("sha") or ref), runs, statuses)

    async def job_log_tail(self, repo: str, job_id: int, limit: int) -> str:
        url = f"{self.api_url}/repos/{repo}/actions/jobs/{job_id}/logs"
        headers = {"authorization": f"Bearer {self.http.token}", "user-agent": "legio"}
        try:
            async with asyncio.timeout(LOG_DEADLINE_S):
                async with self.client.stream("GET", url, headers=headers) as first:
                    status = first.status_code
                    moved = first.headers.get("location", "")
                    if status in (301, 302, 303, 307, 308):
                        # a short-lived URL on the forge's storage: never the token there
                        target = urljoin(url, moved)
                        same = urlsplit(target)[:2] == urlsplit(url)[:2]
                        if not same and not public_https(target):
                            raise ForgeError(
                                self.http.what("GET", url),
                                self.http.clean(
                                    f"the job log moved to {target!r}: neither the forge's "
                                    "host nor a public https address, not followed"
                                ),
                            )
                    elif status == 404:
                        return ""
                    elif status >= 400:
                        raise ForgeError(
                            self.http.what("GET", url), self.http.clean(f"HTTP {status}")
                        )
                    else:
                        return await _kept(first, limit)
                return await _tail(self.client, target, limit)
        except TimeoutError:
            raise ForgeError(
                self.http.what("GET", url), f"no whole answer within {LOG_DEADLINE_S:.0f} s"
            ) from None
        except httpx.HTTPError as e:
            raise ForgeError(
                self.http.what("GET", url), f"no answer ({type(e).__name__})"
            ) from None

    async def issues(self, repo: str, *, since: str = "", limit: int = 50) -> list[Issue]:
        query = f"state=open&sort=created&direction=desc&per_page={min(limit * 2, PAGE)}"
        if since:
            query += f"&since={quote(since, safe='')}"
        found: list[Issue] = []
        # the pages read at most: pull requests share the list, so a few more than needed
        items = (limit // PAGE + 2) * min(limit * 2, PAGE)
        async for item in self.http.getiter(f"/repos/{repo}/issues?{query}"):
            items -= 1
            if isinstance(item, dict) and "pull_request" not in item:
                found.append(_issue(item))
            if len(found) >= limit or items <= 0:
                break
        return found

    async def issue(self, repo: str, number: int) -> Issue:
        data = await self._get(f"/repos/{repo}/issues/{number}")
        notes = await self._get(f"/repos/{repo}/issues/{number}/comments?per_page={PAGE}")
        return _issue(data, tuple(_comment(c) for c in notes if isinstance(c, dict)))

    async def pull_files(self, repo: str, number: int) -> list[PrFile]:
        found = await self._get(f"/repos/{repo}/pulls/{number}/files?per_page={PAGE}")
        return [
            PrFile(
                str(f.get("filename") or ""),
                str(f.get("status") or ""),
                int(f.get("additions") or 0),
                int(f.get("deletions") or 0),
            )
            for f in found
            if isinstance(f, dict)
        ]

    async def reviews(self, repo: str, number: int) -> list[Review]:
        found = await self._get(f"/repos/{repo}/pulls/{number}/reviews?per_page={PAGE}")
        return [
            Review(
                int(r["id"]),
                str((r.get("user") or {}).get("login") or ""),
                str(r.get("state") or ""),
                str(r.get("body") or ""),
                str(r.get("submitted_at") or ""),
                str(r.get("author_association") or ""),
            )
            for r in found
            if isinstance(r, dict)
        ]

    async def review_comments(self, repo: str, number: int) -> list[Comment]:
        found = await self._get(f"/repos/{repo}/pulls/{number}/comments?per_page={PAGE}")
        return [_comment(c) for c in found if isinstance(c, dict)]

    async def comment(self, repo: str, number: int, body: str) -> str:
        data = await self.http.post(f"/repos/{repo}/issues/{number}/comments", data={"body": body})
        return str(data.get("html_url") or "")

    async def add_labels(self, repo: str, number: int, labels: list[str]) -> list[str]:
        data = await self.http.post(
            f"/repos/{repo}/issues/{number}/labels", data={"labels": labels}
        )
        return [str(label.get("name")) for label in data if isinstance(label, dict)]

    async def close_issue(self, repo: str, number: int) -> None:
        await self.http.patch(f"/repos/{repo}/issues/{number}", data={"state": "closed"})

    async def merge_pull(self, repo: str, number: int, *, sha: str, method: str) -> str:
        data = {"sha": sha, "merge_method": method}
        done = await self.http.put(f"/repos/{repo}/pulls/{number}/merge", data=data)
        return str((done or {}).get("sha") or "")


def public_https(url: str) -> bool:
    """Whether ``url`` is https to a named or public host (not loopback, private, local)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme != "https" or not host or host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return True
    return address.is_global


async def _kept(response: httpx.Response, limit: int) -> str:
    """The last ``limit`` bytes of a streamed answer; ``ForgeError`` past ``MAX_BODY``."""
    kept = b""
    total = 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if total > MAX_BODY:
            raise ForgeError(
                "the forge's job log", f"bigger than {MAX_BODY // (1024 * 1024)} MB: not read"
            )
        kept = (kept + chunk)[-limit:]
    return kept.decode(errors="replace")


async def _tail(client: httpx.AsyncClient, url: str, limit: int) -> str:
    """The last ``limit`` bytes at ``url``, read as a stream (no header of ours sent)."""
    async with client.stream("GET", url, headers={"user-agent": "legio"}) as response:
        if response.status_code >= 400:
            return ""
        return await _kept(response, limit)


ForgeFactory = Callable[..., GitHub]
