"""The cockpit over HTTP on a real ``LegioApp``: who gets in (Telegram's signed launch data,
a one-time link) and who sees nothing (a stranger, a tampered hash, an expired one, no
session, another Host), the headers, CSRF, the pages escaping what agents wrote, the live
feed with its catch-up, Stop, an approval decided on the page, a card's diff."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from legio.config import Config
from legio.frontends.web.server import COOKIE, web_problem
from legio.request import ApprovalRequest, Callbacks, Reply
from tests.cockpitbench import (
    Running,
    Unanswered,
    launch_data,
    make_card,
    running_cockpit,
    tampered,
)
from tests.conftest import FakeCli
from tests.gitrepo import make_project

SECRET_WORDS = ("vorenus", "pullo")  # agents' names: data a stranger must not see


@pytest.fixture
async def cockpit(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Running]:
    async with running_cockpit(castra_dir, fake_cli) as running:
        yield running


def client() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def signed_in(running: Running) -> tuple[aiohttp.ClientSession, str]:
    """A browser signed in with Caesar's launch data, and its CSRF token."""
    http = client()
    async with http.post(f"{running.url}/auth", json={"initData": launch_data()}) as r:
        assert r.status == 204
    async with http.get(f"{running.url}/") as r:
        page = await r.text()
    csrf = page.split('<meta name="csrf" content="')[1].split('"')[0]
    return http, csrf


@pytest.mark.parametrize(
    "data",
    [launch_data(user=7), tampered(), launch_data(age_s=3700), "", "hash=abc"],
    ids=["stranger", "tampered", "expired", "empty", "junk"],
)
async def test_who_is_not_caesar_gets_401_and_nothing(cockpit: Running, data: str) -> None:
    async with client() as http:
        async with http.post(f"{cockpit.url}/auth", json={"initData": data}) as r:
            assert r.status == 401
            assert COOKIE not in r.cookies
        for path in ("/", "/work", "/history?q=vorenus", "/memoria", "/health", "/events"):
            async with http.get(f"{cockpit.url}{path}") as r:
                body = await r.text()
                assert r.status == 401, path
                assert not any(word in body for word in SECRET_WORDS), path
        async with http.post(f"{cockpit.url}/stop/vorenus") as r:
            assert r.status == 401


async def test_caesar_signs_in_and_sees_his_agents(cockpit: Running) -> None:
    http, _ = await signed_in(cockpit)
    async with http:
        async with http.post(f"{cockpit.url}/auth", json={"initData": launch_data()}) as r:
            cookie = r.headers["Set-Cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            assert "Secure" not in cookie  # plain loopback http: a Secure cookie would be lost
        async with http.get(f"{cockpit.url}/") as r:
            page = await r.text()
            assert r.status == 200
            assert "vorenus" in page and "pullo" in page and "legatus" in page
            csp = r.headers["Content-Security-Policy"]
            assert "default-src 'self'" in csp
            assert "frame-ancestors https://web.telegram.org https://*.telegram.org" in csp
            assert r.headers["X-Content-Type-Options"] == "nosniff"
            assert "token" not in page.lower() or "csrf" in page.lower()
        for path in ("/work", "/history", "/memoria", "/jobs", "/spend", "/health"):
            async with http.get(f"{cockpit.url}{path}") as r:
                assert r.status == 200, path


async def test_another_host_is_refused(cockpit: Running) -> None:
    """DNS rebinding: a page of evil.example resolving to 127.0.0.1 reaches nothing."""
    http, _ = await signed_in(cockpit)
    async with http:
        port = cockpit.url.rsplit(":", 1)[1]
        async with http.get(f"{cockpit.url}/", headers={"Host": f"evil.example:{port}"}) as r:
            assert r.status == 421
            assert "vorenus" not in await r.text()


async def test_a_post_needs_the_csrf_token(cockpit: Running) -> None:
    http, csrf = await signed_in(cockpit)
    async with http:
        async with http.post(f"{cockpit.url}/stop/vorenus") as r:
            assert r.status == 403
        async with http.post(f"{cockpit.url}/stop/vorenus", headers={"X-CSRF-Token": "x"}) as r:
            assert r.status == 403
        async with http.post(f"{cockpit.url}/stop/vorenus", headers={"X-CSRF-Token": csrf}) as r:
            assert r.status == 200
            assert await r.json() == {"stopped": 0}  # idle: nothing to stop
        async with http.post(f"{cockpit.url}/stop/brutus", headers={"X-CSRF-Token": csrf}) as r:
            assert r.status == 404


async def test_the_one_time_link_works_once(cockpit: Running) -> None:
    minted = await cockpit.cockpit.mint_link()
    assert minted["url"].startswith(f"{cockpit.url}/#login=")  # the token in the fragment
    token = minted["url"].split("#login=")[1]
    async with client() as http:
        async with http.post(f"{cockpit.url}/auth", json={"link": token}) as r:
            assert r.status == 204
        async with http.get(f"{cockpit.url}/") as r:
            assert r.status == 200
    async with client() as http, http.post(f"{cockpit.url}/auth", json={"link": token}) as r:
        assert r.status == 401


async def test_the_link_is_minted_through_the_status_socket(cockpit: Running) -> None:
    from legio.operations.control import ask_daemon

    await cockpit.app.operations.start_operations()
    answer = await asyncio.to_thread(ask_daemon, cockpit.app.engine.config.castra, 10.0, "cockpit")
    assert answer is not None and "#login=" in answer["url"]


async def test_what_agents_wrote_is_shown_as_text(cockpit: Running) -> None:
    await cockpit.source.live.stream("vorenus", "<script>alert(1)</script><b>bold</b>")
    http, _ = await signed_in(cockpit)
    async with http, http.get(f"{cockpit.url}/") as r:
        page = await r.text()
    assert "<script>alert(1)" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


async def read_events(response: aiohttp.ClientResponse, count: int) -> list[tuple[str, str]]:
    events: list[tuple[str, str]] = []
    name = ""
    async with asyncio.timeout(10):
        while len(events) < count:
            line = (await response.content.readline()).decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, line[6:]))
    return events


async def test_the_live_feed_and_its_catch_up(cockpit: Running) -> None:
    live = cockpit.source.live
    http, _ = await signed_in(cockpit)
    async with http:
        start = live.last_id
        async with http.get(f"{cockpit.url}/events?after={start}") as r:
            await live.stream("vorenus", "Hel")
            await live.stream("vorenus", "Hello")
            await live.reply(Reply("vorenus", "Hello, Caesar"))
            got = await read_events(r, 3)
        assert [name for name, _ in got] == ["stream", "stream", "reply"]
        assert '"append": "lo"' in got[1][1]
        # a page that lost its connection after the first event gets the rest
        async with http.get(
            f"{cockpit.url}/events", headers={"Last-Event-ID": str(start + 1)}
        ) as r:
            again = await read_events(r, 2)
        assert again == got[1:]
        for _ in range(live.ring.maxlen or 0):  # its gap left the ring: reload the page
            live.publish("notice", {"text": "x"})
        async with http.get(f"{cockpit.url}/events", headers={"Last-Event-ID": "1"}) as r:
            assert (await read_events(r, 1))[0][0] == "reload"


async def test_an_approval_is_allowed_on_the_page(cockpit: Running) -> None:
    chat = Unanswered()
    watch = cockpit.cockpit.observe(Callbacks(asking=chat))
    asker = watch.asker()
    assert asker is not None
    request = ApprovalRequest(7, "vorenus", "Bash", "rm -rf build", ("Bash(rm:*)",))
    waiting = asyncio.create_task(asker.approve(request))
    await asyncio.sleep(0)
    http, csrf = await signed_in(cockpit)
    async with http:
        async with http.get(f"{cockpit.url}/") as r:
            page = await r.text()
        assert "rm -rf build" in page and 'data-post="/ask/7/once"' in page
        async with http.post(f"{cockpit.url}/ask/7/once", headers={"X-CSRF-Token": csrf}) as r:
            assert r.status == 200
        assert (await waiting).choice == "once"
        assert chat.cancelled  # the chat's buttons withdrawn
        async with http.post(f"{cockpit.url}/ask/7/deny", headers={"X-CSRF-Token": csrf}) as r:
            assert r.status == 409  # decided already


async def test_a_request_without_its_own_asker_keeps_the_standing_one(cockpit: Running) -> None:
    assert cockpit.cockpit.observe(Callbacks()).asker() is None


def test_the_cockpit_listens_on_loopback_unless_allowed(tmp_path: Path) -> None:
    config = Config.model_validate({"web": {"listen": "0.0.0.0:8788"}})
    assert "not a loopback address" in (web_problem(config) or "")
    allowed = Config.model_validate({"web": {"listen": "0.0.0.0:8788", "allow_remote": True}})
    assert web_problem(allowed) is None
    assert web_problem(Config()) is None
    bad = Config.model_validate({"web": {"listen": "127.0.0.1:8788", "public_url": "javascript:x"}})
    assert "is not an address" in (web_problem(bad) or "")
    good = {"listen": "127.0.0.1:8788", "public_url": "https://legio.example.ts.net/"}
    assert web_problem(Config.model_validate({"web": good})) is None


async def test_the_memoria_renders_markdown_and_no_html_of_its_authors(cockpit: Running) -> None:
    body = (
        "# Marching orders\n\n**Hold** the ford.\n\n<script>alert(1)</script>\n\n"
        "[map](javascript:alert(2)) <img src=x onerror=alert(3)>"
    )
    await asyncio.to_thread(
        cockpit.app.engine.memoria.publish_actum, "orders", "Orders", body, "legatus"
    )
    http, _ = await signed_in(cockpit)
    async with http, http.get(f"{cockpit.url}/memoria?layer=acta") as r:
        page = await r.text()
    assert "<h1>Marching orders</h1>" in page and "<strong>Hold</strong>" in page
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert "<img src=x" not in page and 'href="javascript:' not in page


async def test_a_job_is_cancelled_from_the_page(cockpit: Running) -> None:
    from datetime import UTC, datetime, timedelta

    from legio.store.jobstore import JobStore, NewJob

    soon = datetime.now(UTC) + timedelta(hours=1)
    job = await JobStore(cockpit.app.engine.praetorium).add(
        NewJob(
            name="<b>digest</b>",
            target="pullo",
            request="REPLY x",
            kind="once",
            timezone="UTC",
            next_run=soon,
            created_by="legatus",
            cron=None,
            run_at=soon,
        ),
        50,
        datetime.now(UTC),
    )
    assert job is not None
    http, csrf = await signed_in(cockpit)
    async with http:
        async with http.get(f"{cockpit.url}/jobs") as r:
            page = await r.text()
        assert "&lt;b&gt;digest&lt;/b&gt;" in page and f'data-post="/jobs/{job.id}/cancel"' in page
        cancel = f"{cockpit.url}/jobs/{job.id}/cancel"
        async with http.post(cancel, headers={"X-CSRF-Token": csrf}) as r:
            assert r.status == 200
        async with http.post(cancel, headers={"X-CSRF-Token": csrf}) as r:
            assert r.status == 404  # no such scheduled job any more
        async with http.get(f"{cockpit.url}/jobs") as r:
            assert "digest" not in await r.text()


async def test_history_searches_like_search_and_filters(cockpit: Running) -> None:
    await cockpit.app.handle_message("@vorenus REPLY the <legion> crossed the river")
    await cockpit.app.handle_message("@pullo REPLY the camp is quiet")
    http, _ = await signed_in(cockpit)
    async with http:
        async with http.get(f"{cockpit.url}/history", params={"q": "river"}) as r:
            page = await r.text()
        assert "crossed the" in page and "camp is quiet" not in page
        assert "&lt;legion&gt;" in page
        async with http.get(f"{cockpit.url}/history", params={"agent": "pullo"}) as r:
            page = await r.text()
        assert "camp is quiet" in page and "crossed the river" not in page
        async with http.get(f"{cockpit.url}/history", params={"q": 'river"'}) as r:
            assert r.status == 200  # a bad query is said, not a traceback
        async with http.get(f"{cockpit.url}/history", params={"since": "yesterday"}) as r:
            assert "is not a date" in await r.text()


async def test_spend_and_health(cockpit: Running) -> None:
    from datetime import UTC, datetime

    await cockpit.app.handle_message("@vorenus USAGE 200000 0 0 5000\nREPLY costly")
    http, _ = await signed_in(cockpit)
    async with http:
        async with http.get(f"{cockpit.url}/health") as r:
            page = await r.text()
        assert "is running" in page and "vorenus" in page
        async with http.get(f"{cockpit.url}/spend") as r:
            page = await r.text()
    assert 'aria-label="cost by day"' in page and 'aria-label="cost by project"' in page
    assert datetime.now(UTC).strftime("%Y-%m-%d") in page and "(no project)" in page


async def test_a_cards_page_drops_its_copy_and_says_why_it_cannot_publish(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    async with running_cockpit(castra_dir, fake_cli, f'[projects.app]\npath = "{project}"\n') as c:
        card = await make_card(c.app, {"app.py": "def add(a, b):\n    return a + b\n"})
        http, csrf = await signed_in(c)
        async with http:
            async with http.get(f"{c.url}/card/{card.id}") as r:
                page = await r.text()
            assert "legio/vorenus/main" in page and f'href="/card/{card.id}/diff"' in page
            assert "/preview" not in page  # no forge: no Publish button
            async with http.get(f"{c.url}/card/{card.id}/diff") as r:
                assert "app.py" in await r.text()
                assert "default-src 'none'" in r.headers["Content-Security-Policy"]
            post = {"headers": {"X-CSRF-Token": csrf}}
            async with http.post(f"{c.url}/card/{card.id}/preview", **post) as r:
                said = (await r.json())["said"]
            assert said.startswith("Not published: ")
            async with http.post(f"{c.url}/card/{card.id}/drop", **post) as r:
                said = (await r.json())["said"]
            assert said.startswith("🗑 Dropped vorenus's copy of #app")
            async with http.post(f"{c.url}/card/{card.id}/drop", **post) as r:
                assert (await r.json())["said"] == "vorenus has no copy of #app any more."


async def test_publish_posts_exactly_the_preview_shown_and_once(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.fake_forge import FakeForge
    from tests.gitrepo import git

    token = "ghp_CANARY_cockpit_1d2e3f"
    project = make_project(tmp_path / "app")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(project, "remote", "set-url", "origin", f"file://{remote}")
    git(project, "push", "--quiet", "origin", "main")
    monkeypatch.setenv("GITHUB_TOKEN", token)
    async with FakeForge(token) as forge:
        repo = forge.add_repo("caesar/app", bare=remote)
        extra = (
            f'[forge]\napi_url = "{forge.api_url}"\n'
            f'[projects.app]\npath = "{project}"\nrepo = "caesar/app"\n'
        )
        async with running_cockpit(castra_dir, fake_cli, extra) as c:
            card = await make_card(c.app, {"app.py": "def add(a, b):\n    return a + b\n"})
            http, csrf = await signed_in(c)
            post = {"headers": {"X-CSRF-Token": csrf}}
            async with http:
                async with http.post(f"{c.url}/card/{card.id}/preview", **post) as r:
                    shown = await r.json()
                assert not repo.items  # a preview pushes and posts nothing
                assert "legio/vorenus/main → main of caesar/app" in shown["preview"]["where"]
                async with http.post(f"{c.url}{shown['post']}", **post) as r:
                    said = (await r.json())["said"]
                assert said.startswith("🚀 Opened pull request #1 of vorenus on #app")
                [pull] = repo.items.values()
                assert pull["title"] == shown["preview"]["title"]
                assert pull["body"] == shown["preview"]["body"]
                async with http.post(f"{c.url}{shown['post']}", **post) as r:
                    assert (await r.json())["said"].startswith("Already answered")
                assert len(repo.items) == 1  # posted once


async def test_history_shows_a_messages_files_by_name(cockpit: Running, tmp_path: Path) -> None:
    from legio.request import Request

    plan = tmp_path / "<plan>.txt"
    plan.write_text("cross at dawn\n")
    sent = await cockpit.app.inbox.attach_local(str(plan), "@vorenus REPLY read the plan")
    await cockpit.app.handle_message(Request("@vorenus REPLY read the plan", attachments=(sent,)))
    http, _ = await signed_in(cockpit)
    async with http, http.get(f"{cockpit.url}/history", params={"agent": "vorenus"}) as r:
        page = await r.text()
    assert "📎 &lt;plan&gt;.txt" in page


async def test_an_open_feed_ends_with_its_session(
    cockpit: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    from legio.frontends.web import server

    monkeypatch.setattr(server, "HEARTBEAT_S", 0.05)
    http, _ = await signed_in(cockpit)
    async with http:
        session_id = next(c.value for c in http.cookie_jar if c.key == COOKIE)
        async with http.get(f"{cockpit.url}/events") as r:
            assert (await r.content.readline()).startswith(b": still here")  # kept alive
            await r.content.readline()
            cockpit.cockpit.sessions.end(session_id)  # ended (idle, too old, signed out)
            async with asyncio.timeout(10):
                rest = await r.content.read()
        assert b"event:" not in rest
        async with http.head(f"{cockpit.url}/") as r:
            assert r.status == 401  # the page's script then shows the sign-in page


async def test_legio_cockpit_prints_a_link_that_works_once(
    cockpit: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    from legio.cli import main

    await cockpit.app.operations.start_operations()
    config = str(cockpit.app.engine.config.path)
    assert await asyncio.to_thread(main, ["cockpit", "-c", config]) == 0
    printed = capsys.readouterr().out
    assert "within 5 minutes; it works once" in printed
    token = printed.split("#login=")[1].split()[0]
    async with client() as http, http.post(f"{cockpit.url}/auth", json={"link": token}) as r:
        assert r.status == 204


def test_legio_cockpit_says_how_to_turn_it_on(
    write_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from legio.cli import main

    assert main(["cockpit", "-c", str(write_config(""))]) == 1
    assert "The cockpit is off: set [web] listen" in capsys.readouterr().err


async def test_connections_beyond_the_bound_are_closed_at_once(
    cockpit: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any local user can connect: idle connections cannot take the daemon's descriptors."""
    from legio.frontends.web import server

    monkeypatch.setattr(server, "MAX_CONNECTIONS", 2)
    host, port = cockpit.url.removeprefix("http://").rsplit(":", 1)
    held = [await asyncio.open_connection(host, int(port)) for _ in range(2)]
    await asyncio.sleep(0.1)  # both accepted and held, idle
    reader, writer = await asyncio.open_connection(host, int(port))
    async with asyncio.timeout(5):
        with contextlib.suppress(ConnectionResetError):  # closed at once, unanswered
            assert await reader.read() == b""
    writer.close()
    for _, w in held:
        w.close()
        await w.wait_closed()
    await asyncio.sleep(0.1)
    async with client() as http, http.get(f"{cockpit.url}/") as r:
        assert r.status == 401  # served again once they went


async def test_a_console_request_is_live_on_the_page(cockpit: Running) -> None:
    """`legio console` with `[web] listen`: what the console asks shows on the Now page as
    it happens (its watch observed), not only in the history afterwards."""
    import io
    import os

    from legio.frontends.console.terminal import run_console

    async def opened() -> Any:
        return cockpit.app

    out = io.StringIO()
    read, write = os.pipe()  # the console reads a real descriptor, as from a pipe
    os.write(write, b"@vorenus STREAM 3 0.05 seen live on the page\n")
    os.close(write)
    with open(read, encoding="utf-8") as stdin:
        await run_console(opened, stdin=stdin, out=out, observe=cockpit.cockpit.observe)
    assert "seen live on the page" in out.getvalue()
    events = [(kind, data) for _, kind, data in cockpit.source.live.ring]
    assert any(k == "stream" and "vorenus" in d for k, d in events), events
    assert any(k == "reply" and "seen live on the page" in d for k, d in events), events
