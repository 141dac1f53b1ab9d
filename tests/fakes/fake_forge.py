"""A fake GitHub REST API (aiohttp, 127.0.0.1, a random port) for the forge tests.

It speaks the endpoints Legio uses, with GitHub's habits (shared/PROTOCOLS.md, "The
forge"): ``GET /user``; ``GET /repos/{o}/{r}``; pull requests listed (``head=owner:branch``,
``state``), opened (422 "A pull request already exists for owner:branch." for a second open
one of the same head), read and updated; issues listed *with* the pull requests among them
(each carrying a ``pull_request`` key), pull requests and issues sharing one number
sequence; an issue's comments; a pull request's files, reviews and review comments; the
check runs and combined status of a ref (a ref may hold slashes; a branch name is resolved
to its head commit); an Actions job's log as a 302 to another local path (which refuses
an ``Authorization`` header, as the storage host would not get one from a careful client).
``PUT …/pulls/{n}/merge`` (``sha``, ``merge_method``) as GitHub answers it: 405 for a
method the repository does not allow (``merge_methods``, also in the repository's
``allow_*`` fields), a required review missing (``blocked``: ``mergeable_state``
"blocked") or a closed pull request, 409 when ``sha`` is not the head; else the merge is
made in the bare repository (the base moves) and the pull request is closed as merged.

Every JSON answer has an ``ETag``; a GET with a matching ``If-None-Match`` answers 304,
which does not count against the rate limit. Every answer carries ``X-RateLimit-*``;
``exhaust(reset_in)`` makes the next request a 403 with ``X-RateLimit-Remaining: 0`` (and
the limit comes back after ``reset_in`` seconds). ``fail(path_part, status, times)``
answers a 5xx (or anything) that many times; ``not_json(path_part, times)`` answers 200 with
an HTML page. Requests need ``Authorization: Bearer <token>`` (or ``token <token>``), else
401 ``{"message": "Bad credentials"}``. ``calls`` logs every request (``wait_for``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

OWNER = "caesar"


@dataclass
class ForgeCall:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    status: int = 0


@dataclass
class FakeRepo:
    full_name: str
    default_branch: str = "main"
    items: dict[int, dict[str, Any]] = field(default_factory=dict)  # issues and pulls, by number
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    review_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    files: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by sha
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)  # branch -> sha (tests set it)
    next_number: int = 1
    bare: Path | None = None  # a bare repository standing for the forge's git side
    merge_methods: tuple[str, ...] = ("merge", "squash", "rebase")  # what the repo allows
    blocked: set[int] = field(default_factory=set)  # pulls missing a required review
    # what a lying or misconfigured forge says of pull n over its own record, key by key
    # ({"head": {"ref": "main"}}): shown by GET only, the merge still uses the record
    reported: dict[int, dict[str, Any]] = field(default_factory=dict)

    def sha_of(self, branch: str) -> str:
        """The commit ``branch`` names: set by a test, else read in ``bare``; ""."""
        if branch in self.branches:
            return self.branches[branch]
        if self.bare is None:
            return ""
        done = subprocess.run(
            [
                "git",
                "--git-dir",
                str(self.bare),
                "rev-parse",
                "--verify",
                "--quiet",
                f"refs/heads/{branch}^{{commit}}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip()


class FakeForge:
    """See the module docstring."""

    def __init__(self, token: str = "ghp_fake_token") -> None:
        self.token = token
        self.login = OWNER
        self.repos: dict[str, FakeRepo] = {}
        self.calls: list[ForgeCall] = []
        self.logs: dict[int, str] = {}  # Actions job id -> its log
        self.limit = 5000
        self.remaining = 5000
        self.reset_at = int(time.time()) + 3600
        self._exhausted_until = 0.0
        self._faults: list[list[Any]] = []  # [path part, status, times, body, content type]
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Event()
        self.port = 0
        self._next_id = 1000

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---------------------------------------------------------- setup

    async def start(self) -> FakeForge:
        app = web.Application()
        app.router.add_get("/storage/logs/{job}", self._storage_log)
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeForge:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def add_repo(
        self, full_name: str, default_branch: str = "main", bare: Path | None = None
    ) -> FakeRepo:
        self.repos[full_name] = FakeRepo(full_name, default_branch, bare=bare)
        return self.repos[full_name]

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def add_issue(
        self, repo: str, title: str, body: str = "", labels: tuple[str, ...] = (), **extra: Any
    ) -> dict[str, Any]:
        r = self.repos[repo]
        number = r.next_number
        r.next_number += 1
        item = {
            "id": self.new_id(),
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "html_url": f"https://github.example/{repo}/issues/{number}",
            "user": {"login": "someone"},
            "labels": [{"name": name} for name in labels],
            "created_at": extra.pop("created_at", _iso(time.time())),
            "updated_at": _iso(time.time()),
            **extra,
        }
        r.items[number] = item
        r.comments[number] = []
        return item

    def add_comment(self, repo: str, number: int, body: str, login: str = "someone") -> None:
        self.repos[repo].comments.setdefault(number, []).append(
            {
                "id": self.new_id(),
                "body": body,
                "user": {"login": login},
                "created_at": _iso(time.time()),
            }
        )

    def add_check_run(
        self,
        repo: str,
        sha: str,
        name: str,
        status: str = "completed",
        conclusion: str = "success",
        *,
        log: str | None = None,
    ) -> dict[str, Any]:
        run_id = self.new_id()
        run = {
            "id": run_id,
            "name": name,
            "status": status,
            "conclusion": conclusion if status == "completed" else None,
            "html_url": f"https://github.example/{repo}/actions/runs/1/job/{run_id}",
            "head_sha": sha,
        }
        self.repos[repo].check_runs.setdefault(sha, []).append(run)
        if log is not None:
            self.logs[run_id] = log
        self._changed.set()
        return run

    def set_status(self, repo: str, sha: str, context: str, state: str) -> None:
        found = self.repos[repo].statuses.setdefault(sha, [])
        found[:] = [s for s in found if s["context"] != context]
        found.append({"context": context, "state": state, "target_url": "https://ci.example/1"})

    def pulls(self, repo: str) -> list[dict[str, Any]]:
        return [i for i in self.repos[repo].items.values() if "head" in i]

    def close_pull(self, repo: str, number: int, *, merged: bool = False) -> None:
        item = self.repos[repo].items[number]
        item["state"] = "closed"
        item["merged"] = merged
        item["merged_at"] = _iso(time.time()) if merged else None

    def add_review(
        self,
        repo: str,
        number: int,
        state: str,
        body: str,
        comments: list[str],
        association: str = "COLLABORATOR",
    ) -> None:
        """A review (and its comments) by ``reviewer``, of ``author_association``
        ``association`` (``NONE``: an outsider)."""
        review_id = self.new_id()
        self.repos[repo].reviews.setdefault(number, []).append(
            {
                "id": review_id,
                "user": {"login": "reviewer"},
                "author_association": association,
                "state": state,
                "body": body,
                "submitted_at": _iso(time.time()),
            }
        )
        for text in comments:
            self.repos[repo].review_comments.setdefault(number, []).append(
                {
                    "id": self.new_id(),
                    "pull_request_review_id": review_id,
                    "body": text,
                    "user": {"login": "reviewer"},
                    "author_association": association,
                    "path": "app.py",
                    "line": 2,
                    "created_at": _iso(time.time()),
                }
            )

    # ---------------------------------------------------------- faults

    def exhaust(self, reset_in: float = 1.0) -> None:
        """The next request is refused for the rate limit, until ``reset_in`` s pass."""
        self.remaining = 0
        self._exhausted_until = time.time() + reset_in
        self.reset_at = int(self._exhausted_until + 0.999)

    def fail(self, path_part: str, status: int = 502, times: int = 1, body: str = "") -> None:
        self._faults.append(
            [
                path_part,
                status,
                times,
                body or json.dumps({"message": "Server Error"}),
                "application/json",
            ]
        )

    def not_json(self, path_part: str, times: int = 1) -> None:
        self._faults.append(
            [path_part, 200, times, "<html><body>Unicorn!</body></html>", "text/html"]
        )

    # ---------------------------------------------------------- waiting

    def calls_to(self, method: str, path_part: str) -> list[ForgeCall]:
        return [c for c in self.calls if c.method == method and path_part in c.path]

    async def wait_for(
        self, method: str, path_part: str, count: int = 1, timeout: float = 30
    ) -> list[ForgeCall]:
        async def until() -> list[ForgeCall]:
            while len(found := [c for c in self.calls_to(method, path_part) if c.status]) < count:
                self._changed.clear()
                await self._changed.wait()
            return found

        return await asyncio.wait_for(until(), timeout)

    # ---------------------------------------------------------- serving

    def _headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_at),
            "X-RateLimit-Used": str(self.limit - self.remaining),
            "X-RateLimit-Resource": "core",
        }

    def _json(self, call: ForgeCall, data: Any, status: int = 200) -> web.Response:
        text = json.dumps(data)
        etag = '"' + hashlib.sha1(text.encode()).hexdigest() + '"'
        headers = {**self._headers(), "ETag": etag}
        if call.method == "GET" and call.headers.get("if-none-match") == etag:
            self.remaining += 1  # a 304 is not counted
            headers["X-RateLimit-Remaining"] = str(self.remaining)
            call.status = 304
            return web.Response(status=304, headers=headers)
        call.status = status
        return web.Response(
            text=text, status=status, headers=headers, content_type="application/json"
        )

    def _error(self, call: ForgeCall, status: int, message: str, **extra: Any) -> web.Response:
        call.status = status
        return web.json_response(
            {"message": message, **extra}, status=status, headers=self._headers()
        )

    async def _storage_log(self, request: web.Request) -> web.Response:
        call = ForgeCall(
            "GET",
            request.path,
            dict(request.query),
            {k.lower(): v for k, v in request.headers.items()},
            None,
        )
        self.calls.append(call)
        self._changed.set()
        if "authorization" in call.headers:
            call.status = 400
            return web.Response(status=400, text="a token was sent to the storage host")
        call.status = 200
        return web.Response(
            text=self.logs.get(int(request.match_info["job"]), ""), content_type="text/plain"
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            body = json.loads(raw) if raw else None
        call = ForgeCall(
            request.method,
            "/" + request.match_info["path"],
            dict(request.query),
            {k.lower(): v for k, v in request.headers.items()},
            body,
        )
        self.calls.append(call)
        try:
            return await self._answer(call)
        finally:
            self._changed.set()

    async def _answer(self, call: ForgeCall) -> web.StreamResponse:
        auth = call.headers.get("authorization", "")
        if auth not in (f"Bearer {self.token}", f"token {self.token}"):
            return self._error(
                call, 401, "Bad credentials", documentation_url="https://docs.github.com/rest"
            )
        for fault in self._faults:
            if fault[0] in call.path and fault[2] > 0:
                fault[2] -= 1
                call.status = fault[1]
                return web.Response(
                    status=fault[1], text=fault[3], content_type=fault[4], headers=self._headers()
                )
        if self.remaining <= 0:
            if time.time() < self._exhausted_until:
                return self._error(call, 403, "API rate limit exceeded for user ID 1.")
            self.remaining = self.limit
        self.remaining -= 1
        parts = call.path.strip("/").split("/")
        if parts == ["user"]:
            return self._json(call, {"login": self.login, "id": 1})
        if len(parts) < 3 or parts[0] != "repos":
            return self._error(call, 404, "Not Found")
        repo = self.repos.get(f"{parts[1]}/{parts[2]}")
        if repo is None:
            return self._error(call, 404, "Not Found")
        rest = parts[3:]
        if not rest:
            return self._json(
                call,
                {
                    "full_name": repo.full_name,
                    "default_branch": repo.default_branch,
                    "private": True,
                    "html_url": f"https://github.example/{repo.full_name}",
                    "permissions": {"push": True},
                    "allow_merge_commit": "merge" in repo.merge_methods,
                    "allow_squash_merge": "squash" in repo.merge_methods,
                    "allow_rebase_merge": "rebase" in repo.merge_methods,
                },
            )
        if rest[0] == "pulls":
            return self._pulls(call, repo, rest[1:])
        if rest[0] == "issues":
            return self._issues(call, repo, rest[1:])
        if rest[0] == "commits" and len(rest) >= 3 and rest[-1] in ("check-runs", "status"):
            ref = "/".join(rest[1:-1])
            sha = repo.sha_of(ref) or ref
            if rest[-1] == "check-runs":
                runs = repo.check_runs.get(sha, [])
                return self._json(call, {"total_count": len(runs), "check_runs": runs})
            statuses = repo.statuses.get(sha, [])
            states = {s["state"] for s in statuses}
            state = (
                "failure"
                if states & {"failure", "error"}
                else "pending"
                if "pending" in states or not statuses
                else "success"
            )
            return self._json(
                call,
                {"sha": sha, "state": state, "total_count": len(statuses), "statuses": statuses},
            )
        if rest[:2] == ["actions", "jobs"] and len(rest) == 4 and rest[3] == "logs":
            job = int(rest[2])
            if job not in self.logs:
                return self._error(call, 404, "Not Found")
            call.status = 302
            return web.Response(
                status=302,
                headers={**self._headers(), "Location": f"{self.api_url}/storage/logs/{job}"},
            )
        return self._error(call, 404, "Not Found")

    def _pulls(self, call: ForgeCall, repo: FakeRepo, rest: list[str]) -> web.StreamResponse:
        pulls = [i for i in repo.items.values() if "head" in i]
        if not rest:
            if call.method == "GET":
                head = call.query.get("head", "")
                state = call.query.get("state", "open")
                found = [
                    p
                    for p in pulls
                    if state in ("all", p["state"])
                    and (not head or head == f"{OWNER}:{p['head']['ref']}")
                ]
                return self._json(call, found)
            if call.method == "POST":
                data = call.body or {}
                branch, base = data.get("head", ""), data.get("base", "")
                if any(p["head"]["ref"] == branch and p["state"] == "open" for p in pulls):
                    return self._error(
                        call,
                        422,
                        "Validation Failed",
                        errors=[
                            {
                                "resource": "PullRequest",
                                "code": "custom",
                                "message": f"A pull request already exists for {OWNER}:{branch}.",
                            }
                        ],
                    )
                if not repo.sha_of(branch):
                    return self._error(
                        call,
                        422,
                        "Validation Failed",
                        errors=[{"resource": "PullRequest", "field": "head", "code": "invalid"}],
                    )
                number = repo.next_number
                repo.next_number += 1
                item = {
                    "id": self.new_id(),
                    "number": number,
                    "title": data.get("title", ""),
                    "body": data.get("body", ""),
                    "state": "open",
                    "merged": False,
                    "merged_at": None,
                    "html_url": f"https://github.example/{repo.full_name}/pull/{number}",
                    "user": {"login": self.login},
                    "labels": [],
                    "created_at": _iso(time.time()),
                    "head": {
                        "ref": branch,
                        "sha": repo.sha_of(branch),
                        "repo": {"full_name": repo.full_name},
                    },
                    "base": {"ref": base},
                    "pull_request": {"url": "..."},
                }
                repo.items[number] = item
                return self._json(call, item, 201)
        number = int(rest[0]) if rest[0].isdigit() else 0
        item = repo.items.get(number)
        if item is None or "head" not in item:
            return self._error(call, 404, "Not Found")
        if len(rest) == 1:
            if call.method == "PATCH":
                item.update(
                    {k: v for k, v in (call.body or {}).items() if k in ("title", "body", "state")}
                )
                return self._json(call, item)
            branch = item["head"]["ref"]
            if item["state"] == "open" and repo.sha_of(branch):
                item["head"]["sha"] = repo.sha_of(branch)  # a push moves an open PR's head
            item["mergeable_state"] = "blocked" if number in repo.blocked else "clean"
            shown = dict(item)
            for key, value in repo.reported.get(number, {}).items():
                shown[key] = {**shown[key], **value} if isinstance(value, dict) else value
            return self._json(call, shown)
        if rest[1] == "merge" and call.method == "PUT":
            return self._merge(call, repo, item)
        if rest[1] == "files":
            return self._json(call, repo.files.get(number, []))
        if rest[1] == "reviews":
            return self._json(call, repo.reviews.get(number, []))
        if rest[1] == "comments":
            return self._json(call, repo.review_comments.get(number, []))
        return self._error(call, 404, "Not Found")

    def _merge(self, call: ForgeCall, repo: FakeRepo, item: dict[str, Any]) -> web.StreamResponse:
        """``PUT …/pulls/{n}/merge`` as GitHub answers it: 405 when it is not mergeable (a
        method the repo does not allow, a required review missing, closed), 409 when
        ``sha`` is not the head; else the merge is made in ``bare`` (the base moves)."""
        data = call.body or {}
        method = data.get("merge_method", "merge")
        branch = item["head"]["ref"]
        head = repo.sha_of(branch) or item["head"]["sha"]
        if item["state"] != "open":
            return self._error(call, 405, "Pull Request is not mergeable")
        if method not in repo.merge_methods:
            words = {"merge": "Merge commits", "squash": "Squash merges", "rebase": "Rebase"}
            return self._error(
                call, 405, f"{words.get(method, method)} are not allowed on this repository."
            )
        if item["number"] in repo.blocked:
            return self._error(
                call,
                405,
                "At least 1 approving review is required by reviewers with write access.",
            )
        if data.get("sha") and data["sha"] != head:
            return self._error(
                call, 409, "Head branch was modified. Review and try the merge again."
            )
        merged = self._merge_in_bare(repo, item["base"]["ref"], head, method, item["title"])
        item.update(state="closed", merged=True, merged_at=_iso(time.time()))
        return self._json(
            call, {"sha": merged, "merged": True, "message": "Pull Request successfully merged"}
        )

    @staticmethod
    def _merge_in_bare(repo: FakeRepo, base: str, head: str, method: str, title: str) -> str:
        if repo.bare is None:
            return hashlib.sha1(f"{base}{head}{method}".encode()).hexdigest()

        def git(*args: str) -> str:
            done = subprocess.run(
                [
                    "git",
                    "--git-dir",
                    str(repo.bare),
                    "-c",
                    "user.name=forge",
                    "-c",
                    "user.email=forge@example.invalid",
                    *args,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            return done.stdout.strip()

        onto = git("rev-parse", f"refs/heads/{base}")
        tree = git("merge-tree", "--write-tree", onto, head).splitlines()[0]
        parents = ["-p", onto, "-p", head] if method == "merge" else ["-p", onto]
        commit = git("commit-tree", tree, *parents, "-m", title)
        git("update-ref", f"refs/heads/{base}", commit, onto)
        return commit

    def _issues(self, call: ForgeCall, repo: FakeRepo, rest: list[str]) -> web.StreamResponse:
        if not rest:
            state = call.query.get("state", "open")
            since = call.query.get("since", "")
            found = [
                i
                for i in repo.items.values()
                if state in ("all", i["state"]) and (not since or i["updated_at"] >= since)
            ]
            found.sort(key=lambda i: i["number"], reverse=True)
            return self._json(call, found)
        number = int(rest[0]) if rest[0].isdigit() else 0
        item = repo.items.get(number)
        if item is None:
            return self._error(call, 404, "Not Found")
        if len(rest) == 1:
            if call.method == "PATCH":
                item.update({k: v for k, v in (call.body or {}).items() if k in ("state", "title")})
            return self._json(call, item)
        if rest[1] == "comments":
            if call.method == "POST":
                self.add_comment(
                    repo.full_name, number, (call.body or {}).get("body", ""), self.login
                )
                made = repo.comments[number][-1]
                made["html_url"] = f"{item['html_url']}#issuecomment-{made['id']}"
                return self._json(call, made, 201)
            return self._json(call, repo.comments.get(number, []))
        if rest[1] == "labels" and call.method == "POST":
            names = [label["name"] for label in item["labels"]]
            names += [n for n in (call.body or {}).get("labels", []) if n not in names]
            item["labels"] = [{"name": n} for n in names]
            return self._json(call, item["labels"])
        return self._error(call, 404, "Not Found")


def _iso(stamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))
