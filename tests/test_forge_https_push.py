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

from legio.errors import ForgeError, PushRejected
from legio.forge.push import PushRemote, push
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
    target = PushRemote(f"http://127.0.0.1:{port}/app.git", token=True, local=False)
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


async def serve(handler: object) -> tuple[web.AppRunner, int]:
    """An aiohttp server on 127.0.0.1 for ``handler`` (its runner and port)."""
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handler)  # type: ignore[arg-type]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("url.http://localhost:{evil}/.pushInsteadOf", "http://127.0.0.1:{forge}/"),
        ("url.http://localhost:{evil}/.insteadOf", "http://127.0.0.1:{forge}/"),
        ("http.http://127.0.0.1:{forge}/.proxy", "http://127.0.0.1:{evil}"),
        ("http.sslVerify", "false"),
        ("include.path", "/dev/null"),
        ("credential.http://localhost:{evil}.username", "x"),
    ],
)
async def test_project_config_that_could_send_the_token_elsewhere_is_refused(
    tmp_path: Path, key: str, value: str
) -> None:
    project = make_project(tmp_path / "app")
    root = tmp_path / "served"
    root.mkdir()
    git(root, "init", "-q", "--bare", "-b", "main", str(root / "app.git"))
    git(root / "app.git", "config", "http.receivepack", "true")
    git(project, "branch", "legio/vorenus/main")
    commit = git(project, "rev-parse", "HEAD").strip()
    forge = GitHttp(root)
    stolen: list[str] = []

    async def evil(request: web.Request) -> web.Response:
        stolen.append(request.headers.get("Authorization", ""))
        return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})

    forge_runner, forge_port = await serve(forge.handle)
    evil_runner, evil_port = await serve(evil)
    ports = {"evil": evil_port, "forge": forge_port}
    git(project, "config", key.format(**ports), value.format(**ports))
    target = PushRemote(f"http://127.0.0.1:{forge_port}/app.git", token=True, local=False)
    try:
        with pytest.raises(ForgeError) as caught:
            await push(project, target, "legio/vorenus/main", "vorenus", "main", commit, TOKEN)
    finally:
        await forge_runner.cleanup()
        await evil_runner.cleanup()
    assert key.format(**ports).lower() in str(caught.value).lower()
    assert "--unset-all" in str(caught.value)
    assert stolen == [] and forge.auth == []


async def test_the_helper_answers_only_the_targets_host(tmp_path: Path) -> None:
    """Even were a redirect to happen, git's ``get`` for another host gets no token."""
    project = make_project(tmp_path / "app")
    git(project, "branch", "legio/vorenus/main")
    commit = git(project, "rev-parse", "HEAD").strip()
    stolen: list[str] = []

    async def evil(request: web.Request) -> web.Response:
        stolen.append(request.headers.get("Authorization", ""))
        return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})

    runner, port = await serve(evil)
    # the push's URL names localhost; the helper is scoped to another host of the same server
    target = PushRemote(f"http://localhost:{port}/app.git", token=True, local=False)
    try:
        import legio.forge.push as pushing

        real = pushing.helper
        pushing.helper = lambda url, fd: real(f"http://127.0.0.1:{port}/", fd)  # type: ignore[assignment]
        try:
            with pytest.raises(PushRejected):
                await push(project, target, "legio/vorenus/main", "vorenus", "main", commit, TOKEN)
        finally:
            pushing.helper = real
    finally:
        await runner.cleanup()
    assert stolen and all(not a.startswith("Basic ") for a in stolen)


async def test_local_tags_and_submodules_are_not_pushed_along(tmp_path: Path) -> None:
    project = make_project(tmp_path / "app")
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(tmp_path / "remote.git"))
    git(project, "branch", "legio/vorenus/main")
    git(project, "tag", "-a", "v9.9.9-unreleased", "-m", "Caesar's local tag")
    git(project, "config", "push.followTags", "true")
    commit = git(project, "rev-parse", "HEAD").strip()
    target = PushRemote(str(tmp_path / "remote.git"), token=False, local=True)
    await push(project, target, "legio/vorenus/main", "vorenus", "main", commit, "")
    refs = git(tmp_path / "remote.git", "for-each-ref", "--format=%(refname)")
    assert refs.split() == ["refs/heads/legio/vorenus/main"]
