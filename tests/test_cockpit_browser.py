"""The cockpit in a real browser (Debian's chromium, driven by Playwright), opened as
Telegram opens a Mini App (signed launch data in the URL's fragment) at a phone's size and
a desktop's: vorenus's answer streams in live from a real turn on the fake CLI, Stop ends
a running turn, an approval is allowed on the page, a card's diff opens with its hostile
file name shown as text; a stranger, a tampered hash and an expired one see nothing.

One browser for the module; each test opens its own context (cookies apart).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio

from legio.request import Callbacks, Request, Status, Watch
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

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
SHOTS = os.environ.get("COCKPIT_SHOTS")  # a folder: screenshots for docs/cockpit.md

if not Path(CHROMIUM).exists():
    if os.environ.get("CI") == "true":
        raise RuntimeError(
            f"{CHROMIUM} is missing: .ci/run installs Debian's chromium (apt-get install "
            "chromium); the cockpit's browser tests cannot run without it"
        )
    pytest.skip("no chromium on this machine: apt-get install chromium", allow_module_level=True)

if os.environ.get("CI") == "true":
    import playwright.async_api as playwright_api  # CI fails loudly without it
else:
    playwright_api = pytest.importorskip("playwright.async_api")
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def cockpit(castra_dir: Path, fake_cli: FakeCli, tmp_path: Path) -> AsyncIterator[Running]:
    project = make_project(tmp_path / "app")
    extra = f'[approvals]\nask = ["Bash(touch:*)"]\n[projects.app]\npath = "{project}"\n'
    async with running_cockpit(castra_dir, fake_cli, extra) as r:
        yield r


def watching(running: Running, chat: Unanswered | None = None) -> Watch:
    """A request's watch as the chat makes it, handed to the cockpit as the bot does."""
    return running.cockpit.observe(Callbacks(asking=chat))


async def opened(browser: Any, running: Running, size: dict[str, int], data: str) -> Any:
    context = await browser.new_context(viewport=size)
    page = await context.new_page()
    await page.goto(f"{running.url}/#tgWebAppData={quote(data)}&tgWebAppVersion=8.0")
    return page


async def shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


@pytest.mark.parametrize("size", [PHONE, DESKTOP], ids=["phone", "desktop"])
async def test_caesar_sees_vorenus_answer_stream_live(
    browser: Any, cockpit: Running, size: dict[str, int]
) -> None:
    page = await opened(browser, cockpit, size, launch_data())
    await page.wait_for_selector("#agent-vorenus")
    await page.wait_for_selector("body[data-live=connected]")
    assert "tgWebAppData" not in page.url  # the launch data left the address bar
    turn = asyncio.create_task(
        cockpit.app.handle_message(
            Request("@vorenus STREAM 6 0.15 Marching on the project, Caesar."), watching(cockpit)
        )
    )
    stream = page.locator("#agent-vorenus .stream")
    await stream.filter(has_text="Marching").wait_for()  # part of it, while it streams
    replies = await turn
    assert replies[0].text == "Marching on the project, Caesar."
    await (
        page.locator("#agent-vorenus .stream")
        .filter(has_text="Marching on the project, Caesar.")
        .wait_for()
    )
    assert await page.locator("#agent-vorenus .kind").text_content() == "idle"
    if size is PHONE:
        await cockpit.source.live.status(
            Status(
                "pullo",
                "tool",
                tool="Bash",
                target="pytest -q tests/",
                project="app",
                since=time.time(),
            )
        )
        await cockpit.source.live.stream("pullo", "Running the tests on #app…")
        await page.locator("#agent-pullo .tool").filter(has_text="Bash").wait_for()
        await shot(page, "now-phone")
    await page.context.close()


async def working(running: Running, agent: str) -> bool:
    agents = (await running.app.operations.status_report())["agents"]
    return any(a["name"] == agent and a["seq"] for a in agents)


async def test_stop_ends_a_running_turn(browser: Any, cockpit: Running) -> None:
    turn = asyncio.create_task(cockpit.app.handle_message(Request("@vorenus SLEEP 60")))
    async with asyncio.timeout(30):
        while not await working(cockpit, "vorenus"):  # noqa: ASYNC110 (its status, polled)
            await asyncio.sleep(0.1)
    page = await opened(browser, cockpit, PHONE, launch_data())
    stop = page.locator("#agent-vorenus button.stop")
    await stop.wait_for(state="visible")
    await stop.click()
    async with asyncio.timeout(30):
        replies = await turn
    assert replies[0].kind == "interrupted"
    await page.locator("#toast").filter(has_text="Stopped.").wait_for()
    await page.context.close()


async def test_an_approval_is_allowed_on_the_page(browser: Any, cockpit: Running) -> None:
    page = await opened(browser, cockpit, PHONE, launch_data())
    await page.wait_for_selector("body[data-live=connected]")
    chat = Unanswered()
    command = json.dumps({"command": "touch allowed-on-the-page"})
    turn = asyncio.create_task(
        cockpit.app.handle_message(
            Request(f"@vorenus TOOL Bash {command}"), watching(cockpit, chat)
        )
    )
    allow = page.locator(".ask button", has_text="Allow once")
    await allow.wait_for()
    shown = await page.locator(".ask .target").text_content()
    assert shown == "touch allowed-on-the-page"  # the exact command
    await shot(page, "approval-phone")
    await allow.click()
    async with asyncio.timeout(30):
        replies = await turn
    assert replies[0].kind == "answer"
    assert chat.cancelled  # the chat's buttons withdrawn
    await page.locator(".ask").wait_for(state="detached")
    await page.context.close()


async def test_a_cards_diff_opens_with_its_names_as_text(browser: Any, cockpit: Running) -> None:
    hostile = "<img src=x onerror=alert(1)>.py"
    files = {
        hostile: "print('<script>alert(2)</script>')\n",
        "app.py": "def add(a, b):\n    return a + b\n",
    }
    card = await make_card(cockpit.app, files)
    page = await opened(browser, cockpit, PHONE, launch_data())
    await page.wait_for_selector("#agent-vorenus")
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    await page.goto(f"{cockpit.url}/work")
    await page.locator(f"a[href='/card/{card.id}']").click()
    await page.locator("a", has_text="Diff").click()
    await page.locator("h2", has_text="app.py").first.wait_for()
    shown = await page.inner_text("body")
    assert "return a + b" in shown
    assert hostile in shown and "print('<script>alert(2)</script>')" in shown  # as text
    assert await page.locator("img, script").count() == 0  # none of theirs became HTML
    await shot(page, "diff-phone")
    assert dialogs == []  # nothing of theirs ran
    await page.context.close()


@pytest.mark.parametrize(
    "data",
    [launch_data(user=7), tampered(), launch_data(age_s=3700)],
    ids=["stranger", "tampered", "expired"],
)
async def test_strangers_see_nothing(browser: Any, cockpit: Running, data: str) -> None:
    await cockpit.source.live.stream("vorenus", "a secret plan")
    page = await opened(browser, cockpit, PHONE, data)
    await page.locator("#signin").filter(has_text="Not allowed").wait_for()
    body = await page.inner_text("body")
    assert "vorenus" not in body and "secret plan" not in body
    response = await page.goto(f"{cockpit.url}/work")
    assert response is not None and response.status == 401
    await page.context.close()
