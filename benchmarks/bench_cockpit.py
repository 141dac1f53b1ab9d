"""The cockpit (``legio.frontends.web``), measured over loopback with four agents and a
40-file work card, in Debian's chromium at a phone's size (390×844):

- **bytes**: the Now page as transferred (gzip), with its one stylesheet and one script;
  the 40-file card's diff page (gzip); target under 150 KB for the Now page;
- **first paint**: first contentful paint of the Now page once signed in, and the time
  from opening the Mini App's address (launch data in the fragment: the sign-in page,
  ``/auth``, the page again) to the agents shown; target under 1 s;
- **token to page**: an agent's streamed text handed to the cockpit (``Live.stream``, as
  a request's watch does) until the page's DOM holds it (a MutationObserver's clock, the
  same machine's); target under 300 ms;
- **overhead**: ``handle_message`` round trips on the fake CLI with the watch observed by
  the cockpit and without, no page open: the cockpit must cost the daemon nothing.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
import aiohttp
from _report import make_castra, ms_stats, table, update_section
from playwright.async_api import async_playwright

from legio.app import LegioApp
from legio.config import load_config
from legio.frontends.web.server import open_cockpit
from legio.projects.turnwork import mark
from legio.request import UNWATCHED, Callbacks, Request
from tests.cockpitbench import CAESAR_ID, TOKEN, launch_data
from tests.fakes.cli_log import FAKE_CLI

NAMES = ["vorenus", "pullo", "titus"]  # with the Legatus: four agents
FILES = 40
TOKENS = 60
ROUNDS = 30
CHROMIUM = "/usr/bin/chromium"
OBSERVE = """() => {
  window.seen = {};
  const pre = document.querySelector('#agent-vorenus .stream');
  new MutationObserver(() => {
    const m = pre.textContent.match(/t(\\d+)$/);
    if (m && !(m[1] in window.seen)) window.seen[m[1]] = performance.timeOrigin + performance.now();
  }).observe(pre, {childList: true, characterData: true, subtree: true});
}"""
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def project(root: Path) -> Path:
    path = root / "app"
    path.mkdir()
    run = lambda *a: subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    for i in range(FILES):
        (path / f"module_{i:02}.py").write_text("".join(f"x_{n} = {n}\n" for n in range(60)))
    run("add", ".")
    run("-c", "user.name=c", "-c", "user.email=c@x", "commit", "-qm", "first")
    return path


async def card(app: LegioApp, copy_of: str) -> int:
    place = await app.engine.sessions.projects.place("vorenus", copy_of)  # the bench's own turn
    before = await mark(place)
    for i in range(FILES):
        text = "".join(f"x_{n} = {n * 2}  # changed\n" for n in range(60))
        (place.copy / f"module_{i:02}.py").write_text(text)
    made = await app.engine.sessions.cards.after(place, before, None)
    assert made is not None
    return made.id


async def transferred(http: aiohttp.ClientSession, url: str) -> int:
    async with http.get(url, headers={"Accept-Encoding": "gzip"}, auto_decompress=False) as r:
        body = await r.read()
        assert r.status == 200, (url, r.status)
        return len(body)


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-cockpit-"))
    os.environ["FAKE_CLAUDE_LOG_DIR"] = str(root / "log")
    os.environ["FAKE_CLAUDE_STATE_DIR"] = str(root / "state")
    make_castra(root, NAMES)
    repo = project(root)
    (root / "legio.toml").write_text(
        f'[claude]\ncli_path = "{FAKE_CLI}"\n[telegram]\ncaesar_ids = [{CAESAR_ID}]\n'
        f'[web]\nlisten = "127.0.0.1:0"\n[projects.app]\npath = "{repo}"\n'
    )
    config = load_config(root / "legio.toml")
    app = await LegioApp.open(config)
    cockpit = await open_cockpit(app, config, TOKEN)
    assert cockpit is not None and cockpit.bound is not None
    url = cockpit.local_url()
    card_id = await card(app, "app")
    figures: dict[str, str] = {}

    # overhead: no page open, the watch observed or not
    plain, observed = [], []
    for i in range(ROUNDS):
        for samples, watch in ((plain, UNWATCHED), (observed, cockpit.observe(Callbacks()))):
            start = time.perf_counter()
            await app.handle_message(Request(f"@pullo REPLY pong {i}"), watch)
            samples.append(time.perf_counter() - start)

    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.post(f"{url}/auth", json={"initData": launch_data()}) as r:
            assert r.status == 204
        now_page = await transferred(http, f"{url}/")
        css = await transferred(http, f"{url}/static/cockpit.css")
        js = await transferred(http, f"{url}/static/cockpit.js")
        diff_page = await transferred(http, f"{url}/card/{card_id}/diff")
        async with http.get(f"{url}/card/{card_id}/diff") as r:
            diff_raw = len(await r.read())

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        paints, opens = [], []
        for _ in range(5):
            context = await browser.new_context(viewport={"width": 390, "height": 844})
            page = await context.new_page()
            start = time.perf_counter()
            await page.goto(f"{url}/#tgWebAppData={quote(launch_data())}")
            await page.wait_for_selector("#agent-titus")
            opens.append(time.perf_counter() - start)
            await page.wait_for_selector("body[data-live=connected]")
            fcp = await page.evaluate(
                "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1"
            )
            paints.append(fcp / 1000)
            if len(paints) < 5:
                await context.close()
        await page.evaluate(OBSERVE)
        sent: dict[str, float] = {}
        text = ""
        for i in range(TOKENS):
            text += f" t{i}"
            sent[str(i)] = time.time() * 1000
            await cockpit.source.live.stream("vorenus", text)
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        seen = await page.evaluate("window.seen")
        lags = [(seen[k] - sent[k]) / 1000 for k in sent if k in seen]
        await browser.close()

    await cockpit.close()
    await app.close()

    paint_p50, _ = ms_stats(paints)
    open_p50, open_p95 = ms_stats(opens)
    lag_p50, lag_p95 = ms_stats(lags)
    plain_p50, plain_p95 = ms_stats(plain)
    seen_p50, seen_p95 = ms_stats(observed)
    kb = lambda n: f"{n / 1024:.1f}"  # noqa: E731
    rows = [
        ["Now page (gzip), 4 agents", kb(now_page)],
        ["cockpit.css (as sent)", kb(css)],
        ["cockpit.js (as sent)", kb(js)],
        ["Now page in all", kb(now_page + css + js)],
        [f"a {FILES}-file card's diff page (gzip; {kb(diff_raw)} KB unzipped)", kb(diff_page)],
    ]
    timing_rows = [
        ["first contentful paint, signed in (390×844)", f"{paint_p50:.0f}",
         f"{max(paints) * 1000:.0f}"],
        ["open as a Mini App → agents shown (sign-in included)", f"{open_p50:.0f}",
         f"{open_p95:.0f}"],
        [f"a token to the page ({len(lags)} of {TOKENS} seen)", f"{lag_p50:.1f}", f"{lag_p95:.1f}"],
        ["handle_message, plain watch (no page)", f"{plain_p50:.1f}", f"{plain_p95:.1f}"],
        ["handle_message, watch observed (no page)", f"{seen_p50:.1f}", f"{seen_p95:.1f}"],
    ]  # fmt: skip
    figures["body"] = (
        f"{table(['what', 'KB'], rows)}\n\n"
        f"{table(['timing', 'p50 ms', 'p95 (max) ms'], timing_rows)}\n\n"
        "- Targets: the Now page under 150 KB transferred, first paint under 1 s at phone "
        "size, a token on the page within 300 ms, the daemon's round trip unchanged with "
        "no page open (the observed watch adds one ring append per event).\n"
    )
    print(figures["body"])
    update_section("bench_cockpit", "## The cockpit (`bench_cockpit.py`)\n\n" + figures["body"])


if __name__ == "__main__":
    asyncio.run(main())
