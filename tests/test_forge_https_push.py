"""Legio's push over git's HTTP transport, against a local smart-HTTP server (git
http-backend behind aiohttp): the token reaches the server as the password of Basic
authentication, through the credential helper's pipe — never in git's command line."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path

import pytest
from aiohttp import web

from legio.errors import PushRejected
from legio.forge.push import Target, push
from tests.gitrepo import git, make_project

TOKEN = "ghp_http_push_canary"


class GitHttp:
    """``git http-backend`` for the repositories under ``root``, Basic auth required."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.auth: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        self.auth.append(header)
        if not header.startswith("Basic "):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        if (user, password) != ("x-access-token", TOKEN):
            return web.Response(status=403, text="bad credentials")
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": user,
            "REQUEST_METHOD": request.method,
            "PATH_INFO": request.path,
            "QUERY_STRING": request.query_string,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
        }
        body = await request.read()
        process = await asyncio.create_subprocess_exec(
            "git",
            "http-backend",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate(body)
        head, _, content = out.partition(b"\r\n\r\n")
        headers = {}
        status = 200
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(": ")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers[key] = value
        return web.Response(status=status, body=content, headers=headers)


async def test_the_token_goes_to_git_over_http_through_the_pipe(tmp_path: Path) -> None:
    project = make_project(tmp_path / "app")
    root = tmp_path / "served"
    root.mkdir()
    git(root, "init", "-q", "--bare", "-b", "main", str(root / "app.git"))
    git(root / "app.git", "config", "http.receivepack", "true")
    git(project, "branch", "legio/vorenus/main")
    commit = git(project, "rev-parse", "HEAD").strip()
    server = GitHttp(root)
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    target = Target(f"http://127.0.0.1:{port}/app.git", token=True, local=False)
    try:
        moved = await push(project, target, "legio/vorenus/main", "vorenus", "main", commit, TOKEN)
        assert moved
        refs = git(root / "app.git", "for-each-ref", "--format=%(refname) %(objectname)")
        assert refs.split() == ["refs/heads/legio/vorenus/main", commit]
        assert any(a.startswith("Basic ") for a in server.auth)
        again = await push(project, target, "legio/vorenus/main", "vorenus", "main", commit, TOKEN)
        assert not again  # already there

        with pytest.raises(PushRejected) as caught:
            await push(project, target, "legio/vorenus/main", "vorenus", "main", commit, "bad-1")
        assert "bad-1" not in str(caught.value) and TOKEN not in str(caught.value)
    finally:
        await runner.cleanup()
