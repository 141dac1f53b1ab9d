"""The cockpit's pages and actions: data asked of ``Source``, rendered by Jinja2 templates
(``templates/``, autoescaping on: everything an agent, a check or the forge wrote is
text, never HTML). Markdown (the memoria) is rendered by markdown-it-py with raw HTML
off; a card's diff is ``review/page.py``'s self-contained page, served as it is.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from contextvars import ContextVar
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web
from markdown_it import MarkdownIt
from markupsafe import Markup

from legio.errors import ForgeError, MemoriaError, ProjectError, PushRejected, SearchQueryError
from legio.frontends.forgelines import published_text
from legio.frontends.web.auth import Session
from legio.frontends.web.charts import bars
from legio.frontends.web.source import Source
from legio.operations.report import render as status_lines
from legio.visible import visible

ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("legio.frontends.web", "templates"),
    autoescape=True,  # every page: what others wrote is escaped
    undefined=jinja2.StrictUndefined,
)
MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False})
LOG_TAIL_BYTES = 256 * 1024
LOG_LINES = 400
NAV = (
    ("/", "Now"),
    ("/work", "Work"),
    ("/history", "History"),
    ("/memoria", "Memoria"),
    ("/jobs", "Jobs"),
    ("/spend", "Spend"),
    ("/health", "Health"),
)


def markdown(text: str) -> Markup:
    """Markdown as HTML with no HTML of the author's: tags come out as text."""
    return Markup(MARKDOWN.render(visible(text)))


def ago(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


ENV.filters["ago"] = ago
ENV.filters["markdown"] = markdown
ENV.filters["shown"] = visible


SOURCE = web.AppKey("source", Source)
SESSION: ContextVar[Session | None] = ContextVar("cockpit_session", default=None)


def door(request: web.Request) -> Source:
    return request.app[SOURCE]


def render(request: web.Request, name: str, status: int = 200, **data: Any) -> web.Response:
    session = SESSION.get()
    page = ENV.get_template(name).render(
        nav=NAV,
        path=request.path,
        csrf=session.csrf if session is not None else "",
        **data,
    )
    response = web.Response(status=status, text=page, content_type="text/html")
    response.enable_compression()
    return response


def sign_in(request: web.Request, status: int = 401) -> web.Response:
    """The page without a session: a script that signs in from the fragment, no data."""
    return render(request, "signin.html", status=status)


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/", now)
    router.add_get("/work", work)
    router.add_get("/card/{id:\\d+}", card)
    router.add_get("/card/{id:\\d+}/diff", card_diff)
    router.add_get("/check/{id:\\d+}/log", check_log)
    router.add_get("/history", history)
    router.add_get("/memoria", memoria)
    router.add_get("/jobs", jobs)
    router.add_get("/spend", spend)
    router.add_get("/health", health)
    router.add_post("/stop/{agent}", stop)
    router.add_post("/ask/{id:\\d+}/{choice}", decide)
    router.add_post("/jobs/{id:\\d+}/cancel", cancel_job)
    router.add_post("/card/{id:\\d+}/preview", preview)
    router.add_post("/publish/{digest:[0-9a-f]{12}}", publish)
    router.add_post("/card/{id:\\d+}/drop", drop)
    router.add_post("/card/{id:\\d+}/fix", fix)


# ---------------------------------------------------------------- Now


async def now(request: web.Request) -> web.Response:
    source = door(request)
    live = source.live
    last_id = live.last_id  # the page's events start after this one
    report = await source.status()
    rows = []
    clock = time.time()
    for agent in report.get("agents", []):
        here = live.agents.get(agent["name"])
        working = agent.get("state") not in (None, "idle", "closed") or agent.get("seq")
        kind = here.kind if here is not None else ("working" if working else "idle")
        since = here.since if here is not None and here.since else None
        rows.append(
            {
                "name": agent["name"],
                "kind": kind,
                "tool": here.tool if here else "",
                "target": here.target if here else "",
                "note": here.note if here else "",
                "project": here.project if here else None,
                "since": since,
                "for": ago(clock - since) if since else ago(agent.get("working_s")),
                "seq": agent.get("seq"),
                "queued": agent.get("queued", 0),
                "text": here.text if here else "",
            }
        )
    return render(request, "now.html", agents=rows, asks=source.pending_asks(), last_id=last_id)


async def stop(request: web.Request) -> web.Response:
    source = door(request)
    agent = request.match_info["agent"]
    if agent not in source.agents():
        return web.json_response({"error": f"no agent named {agent}"}, status=404)
    stopped = await source.stop(agent)
    return web.json_response({"stopped": len(stopped)})


async def decide(request: web.Request) -> web.Response:
    source = door(request)
    if not source.decide(int(request.match_info["id"]), request.match_info["choice"]):
        return web.json_response({"error": "this call waits no more"}, status=409)
    return web.json_response({"ok": True})


# ---------------------------------------------------------------- Work


async def work(request: web.Request) -> web.Response:
    source = door(request)
    cards = await source.cards(60)
    grouped: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for c in cards:
        grouped[c.project][c.agent].append(c)
    pulls = await source.pulls()
    ci = source.live.forge_states
    return render(
        request,
        "work.html",
        grouped={p: dict(a) for p, a in grouped.items()},
        pulls=[(p, ci.get((p.project, p.agent))) for p in pulls],
    )


async def card(request: web.Request) -> web.Response:
    source = door(request)
    found = await source.card(int(request.match_info["id"]))
    if found is None:
        raise web.HTTPNotFound(text="No such work card.")
    check = await source.check(found.check_id) if found.check_id is not None else None
    return render(request, "card.html", card=found, check=check)


async def card_diff(request: web.Request) -> web.Response:
    source = door(request)
    card_id = int(request.match_info["id"])
    diff = await source.card_diff(card_id)
    if diff is None:
        raise web.HTTPNotFound(text="No such work card.")
    c = diff.card
    title = f"{c.agent} · {c.project} · card {c.id}"
    from legio.review.page import html_page  # Pygments: imported when a diff is first asked

    page = await asyncio.to_thread(html_page, diff.committed + diff.uncommitted, title)
    response = web.Response(body=page, content_type="text/html", charset="utf-8")
    response.enable_compression()
    return response


async def preview(request: web.Request) -> web.Response:
    """🚀 Publish, first step: what would be posted, nothing pushed (the chat's preview)."""
    source = door(request)
    found = await source.card(int(request.match_info["id"]))
    if found is None:
        return web.json_response({"error": "This card is gone."}, status=404)
    try:
        shown = await source.publish_preview(found)
    except (ForgeError, ProjectError) as e:
        return web.json_response({"said": f"Not published: {e}"})
    return web.json_response(
        {
            "preview": {
                "title": shown.title,
                "body": shown.body,
                "where": f"{visible(shown.branch)} → {visible(shown.base)} of {shown.repo}",
                "commit": shown.commit[:12],
            },
            "post": f"/publish/{shown.digest}",
        }
    )


async def publish(request: web.Request) -> web.Response:
    """🚀 Post exactly the preview Caesar was shown, once; a push the forge refuses as not
    a fast-forward asks before replacing its branch (the chat's second question)."""
    source = door(request)
    shown = source.take_preview(request.match_info["digest"])
    if shown is None:
        return web.json_response(
            {
                "said": "Already answered (or Legio restarted): nothing more is posted. "
                "Tap 🚀 Publish again for a new preview."
            }
        )
    force = request.query.get("force") == "1"
    try:
        done = await source.publish(shown, force=force)
    except PushRejected as e:
        if not e.non_fast_forward or force:
            return web.json_response({"said": f"The forge refused the push: {e.reason}"})
        source.pin_preview(shown)
        question = (
            f"The forge refused the push: {e.reason}\nIts {visible(shown.branch)} has commits "
            f"{shown.agent}'s branch does not. Replace it with {shown.agent}'s, with the pull "
            "request shown? Only Legio's own branch moves; your base branch is never pushed."
        )
        return web.json_response({"ask": question, "again": f"{request.path}?force=1"})
    except (ForgeError, ProjectError) as e:
        return web.json_response({"said": f"Not published: {e}"})
    return web.json_response({"said": published_text(done)})


async def fix(request: web.Request) -> web.Response:
    """🛠 Fix (the chat's button): a request to the card's agent holding its check's
    failure, answered in the chat where the agent's answers go, live on the Now page."""
    source = door(request)
    found = await source.card(int(request.match_info["id"]))
    if found is None:
        return web.json_response({"error": "This card is gone."}, status=404)
    return web.json_response({"said": await source.fix(found)})


async def drop(request: web.Request) -> web.Response:
    """🗑 Drop (the page asked first, as the chat does)."""
    source = door(request)
    found = await source.card(int(request.match_info["id"]))
    if found is None:
        return web.json_response({"error": "This card is gone."}, status=404)
    try:
        left = await source.drop(found)
    except ProjectError as e:
        return web.json_response({"said": f"Not dropped: {e}"})
    if left is None:
        return web.json_response(
            {"said": f"{found.agent} has no copy of #{found.project} any more."}
        )
    lost = f"; {left} uncommitted change(s) went with it" if left else ""
    said = f"🗑 Dropped {found.agent}'s copy of #{found.project} (its branch stays{lost})."
    return web.json_response({"said": said})


def _tail(path: Path, query: str) -> tuple[list[str], bool]:
    with path.open("rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - LOG_TAIL_BYTES))
        data = f.read()
    lines = data.decode("utf-8", "replace").splitlines()
    if size > LOG_TAIL_BYTES:
        lines = lines[1:]
    if query:
        lines = [line for line in lines if query.lower() in line.lower()]
    return [visible(line) for line in lines[-LOG_LINES:]], size > LOG_TAIL_BYTES


async def check_log(request: web.Request) -> web.Response:
    source = door(request)
    run_id = int(request.match_info["id"])
    record = await source.check(run_id)
    path = source.check_log(run_id)
    query = request.query.get("q", "")[:200]
    lines: list[str] = []
    cut = False
    if path is not None and path.is_file():
        lines, cut = await asyncio.to_thread(_tail, path, query)
    elif record is not None and record.tail:
        lines = [visible(line) for line in record.tail.splitlines()]
    return render(
        request, "log.html", run_id=run_id, lines=lines, cut=cut, q=query, kept=bool(path)
    )


# ---------------------------------------------------------------- History, Memoria


async def history(request: web.Request) -> web.Response:
    source = door(request)
    query = request.query.get("q", "").strip()[:500]
    agent = request.query.get("agent", "")
    project = request.query.get("project", "")
    day = request.query.get("since", "")
    problem = ""
    found: list[Any] = []
    try:
        if query:
            found = [(h.nuntius, h.snippet) for h in await source.search(query, 100)]
        else:
            found = [(n, "") for n in await source.history(100)]
    except SearchQueryError as e:
        problem = str(e)
    since = None
    if day:
        with_date = _date(day)
        if with_date is None:
            problem = f"{day!r} is not a date: write it as 2026-11-01"
        since = with_date
    shown = [
        (n, snippet)
        for n, snippet in found
        if (not agent or agent == n.sender or agent in n.audience)
        and (not project or n.project == project)
        and (since is None or n.timestamp.date() >= since)
    ]
    files = await source.files_of([n.seq for n, _ in shown]) if shown else {}
    return render(
        request,
        "history.html",
        found=shown,
        files=files,
        q=query,
        agent=agent,
        project=project,
        since=day,
        agents=source.agents(),
        problem=problem,
    )


def _date(text: str) -> Any:
    try:
        return datetime.strptime(text, "%Y-%m-%d").date()
    except ValueError:
        return None


async def memoria(request: web.Request) -> web.Response:
    source = door(request)
    layer = request.query.get("layer", "edicta")
    agent = request.query.get("agent") or None
    problem = ""
    documents: list[Any] = []
    try:
        listing = await source.memoria(layer, agent)
        documents, problems = listing.documents, listing.problems
        problem = "; ".join(problems)
    except MemoriaError as e:
        problem = str(e)
    return render(
        request,
        "memoria.html",
        layer=layer,
        agent=agent or "",
        centuriones=source.centuriones(),
        documents=documents,
        problem=problem,
    )


# ---------------------------------------------------------------- Jobs, Spend, Health


async def jobs(request: web.Request) -> web.Response:
    return render(request, "jobs.html", jobs=await door(request).jobs())


async def cancel_job(request: web.Request) -> web.Response:
    done = await door(request).cancel_job(int(request.match_info["id"]))
    if not done:
        return web.json_response({"error": "no such scheduled job"}, status=404)
    return web.json_response({"ok": True})


async def spend(request: web.Request) -> web.Response:
    source = door(request)
    report = await source.usage()
    by_day: dict[str, float] = defaultdict(float)
    by_project: dict[str, float] = defaultdict(float)
    for day, project, cost in await source.spend_by_day(14):
        by_day[day] += cost
        by_project[project or "(no project)"] += cost
    today: dict[str, float] = defaultdict(float)
    week: dict[str, float] = defaultdict(float)
    left = None
    if report is not None:
        for row in report.today:
            today[row.agent] += row.cost_usd
        for row in report.week:
            week[row.agent] += row.cost_usd
        spent = sum(today.values())
        if report.daily_usd:
            left = max(0.0, report.daily_usd - spent - report.reserved)
    ranked = sorted(week.items(), key=lambda kv: -kv[1])
    projects = sorted(by_project.items(), key=lambda kv: -kv[1])
    return render(
        request,
        "spend.html",
        report=report,
        today=sorted(today.items(), key=lambda kv: -kv[1]),
        week=ranked,
        chart=bars(ranked),
        days=bars(sorted(by_day.items()), label="cost by day"),
        projects=bars(projects, label="cost by project"),
        left=left,
    )


async def health(request: web.Request) -> web.Response:
    report = await door(request).status()
    return render(request, "health.html", lines=status_lines(report))
