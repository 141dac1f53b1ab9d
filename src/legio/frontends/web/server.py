"""The cockpit's web server: aiohttp in Legio's own event loop, its door checks, the
sign-in, the live feed and the actions. The pages themselves are ``pages.py``'s.

Every request passes ``guard`` first: its ``Host`` must be the address Legio listens on
or ``[web] public_url``'s (no DNS rebinding); every answer carries a strict
Content-Security-Policy (``default-src 'self'``, ``frame-ancestors`` Telegram's web
clients only), ``nosniff``, no referrer, no caching. Without a session a page answers
401 with the sign-in page alone (it holds no data: its script reads Telegram's launch
data, or a one-time link's token, from the URL's fragment and posts it to ``/auth``). A
POST needs the session's CSRF token. Nothing secret is logged: no access log is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from legio.app import LegioApp
from legio.config import Config
from legio.frontends.web import pages
from legio.frontends.web.auth import Links, Refused, Session, Sessions, csrf_ok, verify_init_data
from legio.frontends.web.source import Source
from legio.request import Watch

logger = logging.getLogger(__name__)

COOKIE = "legio_cockpit"
STATIC = Path(__file__).parent / "static"
FRAMERS = "https://web.telegram.org https://*.telegram.org"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    f"form-action 'self'; frame-ancestors {FRAMERS}"
)
# the diff page (review/page.py) styles itself inline and runs no script
DIFF_CSP = f"default-src 'none'; style-src 'unsafe-inline'; frame-ancestors {FRAMERS}"
HEARTBEAT_S = 15.0
PUBLIC_URL = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+(/[^\s?#]*)?")
OPEN = frozenset({"/auth", "/logout"})
MAX_CONNECTIONS = 64  # held at once; one beyond them is closed at once, unanswered
KEEPALIVE_S = 15.0  # an idle kept-alive connection is closed after this

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def web_problem(config: Config) -> str | None:
    """Why ``[web]`` cannot be served as it is, or None."""
    listen, url = config.web.listen, config.web.public_url
    if not listen:
        return None
    if url and not PUBLIC_URL.fullmatch(url):
        return (
            f"[web] public_url = {url!r} is not an address: write the one your phone opens, "
            'e.g. "https://legio.example.ts.net" (no query, no fragment)'
        )
    host = listen.rpartition(":")[0].strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return f"[web] listen = {listen!r}: the host must be an IP address or localhost"
    if not loopback and not config.web.allow_remote:
        return (
            f"[web] listen = {listen!r} is not a loopback address: the cockpit shows and "
            "steers your agents. Listen on 127.0.0.1 and put HTTPS in front (tailscale "
            "serve, a reverse proxy: docs/cockpit.md), or set [web] allow_remote = true"
        )
    return None


async def open_cockpit(app: LegioApp, config: Config, bot_token: str = "") -> Cockpit | None:
    """The cockpit listening and attached to the app, when ``[web] listen`` is set; None
    (a problem logged, Legio runs on) otherwise. A front-end hands each request's watch
    to ``Cockpit.observe``."""
    if not config.web.listen:
        return None
    problem = web_problem(config)
    if problem:
        logger.error("no cockpit: %s", problem)
        return None
    source = Source(app)
    cockpit = Cockpit(source, config, bot_token)
    try:
        await cockpit.start()
    except OSError as e:
        logger.error("no cockpit: cannot listen on %s: %s", config.web.listen, e)
        await cockpit.close()
        return None
    await source.attach()
    return cockpit


class Cockpit:
    """The server; ``start`` listens, ``close`` stops. ``bot_token`` checks Telegram's
    launch data ("" under ``legio console``: only one-time links sign in)."""

    def __init__(self, source: Source, config: Config, bot_token: str = "") -> None:
        self.source = source
        self.config = config
        self.bot_token = bot_token
        self.caesar_ids = frozenset(config.telegram.caesar_ids)
        self.sessions = Sessions()
        self.links = Links()
        self.public_url = config.web.public_url.rstrip("/")
        self.public = urlsplit(self.public_url) if self.public_url else None
        self.hosts: set[str] = set()
        self.bound: tuple[str, int] | None = None
        self.web = web.Application(middlewares=[self.guard], client_max_size=64 * 1024)
        self.web[pages.SOURCE] = source
        self.web.router.add_post("/auth", self.auth)
        self.web.router.add_post("/logout", self.logout)
        self.web.router.add_get("/events", self.events)
        self.web.router.add_static("/static/", STATIC, append_version=False)
        pages.routes(self.web.router)
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None

    # ---------------------------------------------------------- life

    async def start(self) -> tuple[str, int]:
        """Listen on ``[web] listen``; the address bound (port 0 picks one). At most
        ``MAX_CONNECTIONS`` at once (any local user can connect: one beyond them is closed
        at once, so the daemon's descriptors are never the cockpit's to spend); an idle
        kept-alive connection is closed after ``KEEPALIVE_S``."""
        host, _, port = self.config.web.listen.rpartition(":")
        self._runner = web.AppRunner(
            self.web,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
            keepalive_timeout=KEEPALIVE_S,
        )
        await self._runner.setup()
        handler = self._runner.server
        assert handler is not None

        def protocol() -> asyncio.BaseProtocol:
            if len(handler.connections) >= MAX_CONNECTIONS:
                return Turned()
            return handler()

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(protocol, host.strip("[]"), int(port))
        bound = self._server.sockets[0].getsockname()[:2]
        self.bound = (str(bound[0]), int(bound[1]))
        self.hosts = self.allowed_hosts()
        self.source.answer_on_socket("cockpit", self.mint_link)
        logger.info("the cockpit listens on http://%s:%s", *self.bound)
        return self.bound

    async def close(self) -> None:
        self.source.detach()
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._runner is not None:
            await self._runner.cleanup()  # its connections ended, then the app's
            self._runner = None

    def allowed_hosts(self) -> set[str]:
        assert self.bound is not None
        host, port = self.bound
        shown = f"[{host}]" if ":" in host else host
        hosts = {f"{shown}:{port}"}
        if ipaddress.ip_address(host).is_loopback:
            hosts |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
        if self.public is not None and self.public.netloc:
            hosts.add(self.public.netloc.lower())
            default = {"https": 443, "http": 80}.get(self.public.scheme)
            if self.public.port is None and default:
                hosts.add(f"{self.public.netloc.lower()}:{default}")
        return hosts

    def local_url(self) -> str:
        assert self.bound is not None
        host, port = self.bound
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def base_url(self) -> str:
        return self.public_url or self.local_url()

    def observe(self, watch: Watch) -> Watch:
        """A request's ``watch``, seen on the page too (``sharing.Observed``)."""
        return self.source.observe(watch)

    async def mint_link(self) -> dict[str, Any]:
        """``legio cockpit``'s one-time link: the token in the fragment, never sent on."""
        return {"url": f"{self.base_url()}/#login={self.links.mint()}", "expires_s": 300}

    # ---------------------------------------------------------- the door's checks

    def session_of(self, request: web.Request) -> Session | None:
        return self.sessions.get(request.cookies.get(COOKIE))

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if (request.host or "").lower() not in self.hosts:
            return secured(web.Response(status=421, text="This address is not the cockpit's."))
        path = request.path
        if path.startswith("/static/"):
            response = await handler(request)
            response.headers["Cache-Control"] = "max-age=3600"
            return secured(response)
        if path in OPEN:
            return secured(await handler(request))
        session = self.session_of(request)
        if session is None:
            if request.method == "GET" and path != "/events":
                return secured(pages.sign_in(request, status=401))
            return secured(web.Response(status=401, text="Sign in first."))
        if request.method == "POST":
            given = request.headers.get("X-CSRF-Token")
            if given is None and request.content_type == "application/x-www-form-urlencoded":
                given = str((await request.post()).get("csrf", ""))
            if not csrf_ok(session, given):
                return secured(web.Response(status=403, text="This action lacks its token."))
        pages.SESSION.set(session)  # this request's task only
        response = await handler(request)
        return secured(response, diff=path.endswith("/diff"))

    # ---------------------------------------------------------- sign-in

    async def auth(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc.lower() not in self.hosts:
            return web.Response(status=401, text="Not allowed.")
        try:
            body = await request.json()
        except ValueError:
            return web.Response(status=400, text="Send the launch data as JSON.")
        if not isinstance(body, dict):
            return web.Response(status=400, text="Send the launch data as JSON.")
        try:
            if isinstance(body.get("link"), str):
                self.links.take(body["link"])
                user = min(self.caesar_ids, default=0)
            else:
                init = body.get("initData")
                user = verify_init_data(
                    init if isinstance(init, str) else "", self.bot_token, self.caesar_ids
                )
        except Refused as e:
            logger.warning("cockpit: a sign-in refused: %s", e)
            return web.Response(status=401, text="Not allowed.")
        session_id, _ = self.sessions.start(user)
        response = web.Response(status=204)
        response.set_cookie(
            COOKIE,
            session_id,
            httponly=True,
            samesite="Strict",
            secure=self.secure(request),
            path="/",
        )
        return response

    def secure(self, request: web.Request) -> bool:
        """Secure cookies where the cockpit is reached over HTTPS (its public address)."""
        public = self.public
        return (
            public is not None
            and public.scheme == "https"
            and (request.host or "").lower().split(":")[0] == (public.hostname or "")
        )

    async def logout(self, request: web.Request) -> web.StreamResponse:
        self.sessions.end(request.cookies.get(COOKIE))
        response = web.Response(status=204)
        response.del_cookie(COOKIE, path="/")
        return response

    # ---------------------------------------------------------- the live feed

    async def events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events from ``Live``: what the page missed since ``Last-Event-ID``
        (or ``?after=``, the page's own number) first, then each event as it comes."""
        live = self.source.live
        raw = request.headers.get("Last-Event-ID") or request.query.get("after") or ""
        last = int(raw) if raw.isdigit() else live.last_id
        sub = live.subscribe()
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        secured(response)
        await response.prepare(request)
        try:
            missed = live.since(last)
            if missed is None:
                await response.write(b"event: reload\ndata: {}\n\n")
                return response
            sent = last
            for item in missed:
                await response.write(frame(*item))
                sent = item[0]
            while True:
                if sub.overflowed:
                    await response.write(b"event: reload\ndata: {}\n\n")
                    return response
                try:
                    item = await asyncio.wait_for(sub.queue.get(), HEARTBEAT_S)
                except TimeoutError:
                    if self.session_of(request) is None:
                        return response  # its session ended: the page signs in again
                    await response.write(b": still here\n\n")  # keeps the session alive
                    continue
                if item[0] > sent:
                    await response.write(frame(*item))
                    sent = item[0]
        except ConnectionResetError:
            return response  # the page went away
        finally:
            live.unsubscribe(sub)
            with contextlib.suppress(Exception):
                await response.write_eof()


class Turned(asyncio.Protocol):
    """A connection beyond ``MAX_CONNECTIONS``: closed at once, its descriptor given back."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.abort()


def frame(event_id: int, event: str, data: str) -> bytes:
    return f"id: {event_id}\nevent: {event}\ndata: {data}\n\n".encode()


def secured(response: web.StreamResponse, *, diff: bool = False) -> web.StreamResponse:
    """The headers every answer carries (set before it is sent)."""
    if response.prepared:
        return response
    headers = response.headers
    headers["Content-Security-Policy"] = DIFF_CSP if diff else CSP
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Referrer-Policy"] = "no-referrer"
    headers.setdefault("Cache-Control", "no-store")
    headers["Cross-Origin-Opener-Policy"] = "same-origin"
    return response
