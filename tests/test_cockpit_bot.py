"""The cockpit wired into the Telegram bot (real PTB on the fake Bot API): the menu button
of Caesar's chat opens it, ``/cockpit`` sends a button for it (or says how to turn it on),
a request asked in the chat shows on the page, a work card gets ↗ Open, and the card's
page's 🛠 Fix asks the agent in the chat."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import aiohttp

from legio.frontends.telegram.cardview import card_keyboard
from legio.frontends.web.auth import sign_init_data
from legio.request import WorkCard
from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli
from tests.gitrepo import make_project

PUBLIC = "https://legio.example.ts.net"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_menu_button_and_cockpit_open_it_and_requests_show_there(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    port = free_port()
    web = f'[web]\nlisten = "127.0.0.1:{port}"\npublic_url = "{PUBLIC}"\n'
    async with running_bot(castra_dir, fake_cli, web) as bot:
        await bot.api.wait_for_call("setChatMenuButton")
        button = bot.api.menu_buttons[CAESAR]
        assert button == {"type": "web_app", "text": "Cockpit", "web_app": {"url": PUBLIC}}
        start = await bot.ask("/cockpit")
        sent = await bot.answer(start, lambda text: "cockpit" in text.lower())
        keyboard = sent.params["reply_markup"]["inline_keyboard"]
        assert keyboard[0][0]["web_app"] == {"url": PUBLIC}

        start = await bot.ask("@vorenus REPLY marching at dawn")
        await bot.answer(start, lambda text: "marching at dawn" in text)
        launch = sign_init_data(
            {"auth_date": str(int(time.time())), "user": f'{{"id":{CAESAR}}}'},
            bot.api.token,
        )
        url = f"http://127.0.0.1:{port}"
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            async with http.post(f"{url}/auth", json={"initData": launch}) as r:
                assert r.status == 204  # signed with the bot's own token
            async with http.get(f"{url}/") as r:
                page = await r.text()
        assert "marching at dawn" in page  # the chat's request, seen on the page


async def signed_in(port: int, token: str) -> tuple[aiohttp.ClientSession, str]:
    """A browser signed in with Caesar's launch data, and its CSRF token."""
    launch = sign_init_data(
        {"auth_date": str(int(time.time())), "user": f'{{"id":{CAESAR}}}'}, token
    )
    http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
    async with http.post(f"http://127.0.0.1:{port}/auth", json={"initData": launch}) as r:
        assert r.status == 204
    async with http.get(f"http://127.0.0.1:{port}/") as r:
        page = await r.text()
    return http, page.split('<meta name="csrf" content="')[1].split('"')[0]


async def test_fix_on_a_cards_page_asks_the_agent_in_the_chat(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    """A card whose check failed shows 🛠 Fix on its page; tapping it asks the card's agent
    to fix it, and the answer comes in the chat as the chat's own 🛠 Fix would bring it."""
    project = make_project(tmp_path / "app")  # its test fails: add() subtracts
    port = free_port()
    extra = (
        f'[projects.app]\npath = "{project}"\ncheck = "python3 test_app.py"\n'
        f'[web]\nlisten = "127.0.0.1:{port}"\npublic_url = "{PUBLIC}"\n'
    )
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        note = "echo '# notes' > NOTES.md && git add NOTES.md && git commit -qm notes"
        tool = "TOOL Bash " + json.dumps({"command": note})
        start = await bot.ask(f"@vorenus #app write notes\n{tool}")
        card = await bot.answer(start, lambda t: t.startswith("🗂 vorenus #app"))
        if "❌" not in str(card.params["text"]):  # the check ends after the card is sent
            await bot.api.wait_for_call(
                "editMessageText", lambda c: "❌" in str(c.params.get("text", "")), start=start
            )
        [number] = [
            int(b["callback_data"].rsplit(":", 1)[1])
            for row in card.params["reply_markup"]["inline_keyboard"]
            for b in row
            if str(b.get("callback_data", "")).startswith("card:diff:")
        ]
        http, csrf = await signed_in(port, bot.api.token)
        async with http:
            async with http.get(f"http://127.0.0.1:{port}/card/{number}") as r:
                page = await r.text()
            assert f'data-post="/card/{number}/fix"' in page
            start = len(bot.api.calls)
            post = {"headers": {"X-CSRF-Token": csrf}}
            async with http.post(f"http://127.0.0.1:{port}/card/{number}/fix", **post) as r:
                said = (await r.json())["said"]
        assert said.startswith("🛠 Asked vorenus to fix it")
        asked = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus #app"))
        echoed = str(asked.params["text"])  # the fake CLI echoes what it was asked
        assert "(python3 test_app.py) failed (exit code 1) on your branch" in echoed
        assert int(asked.params["chat_id"]) == CAESAR


async def test_without_a_public_url_cockpit_says_how_to_turn_it_on(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        start = await bot.ask("/cockpit")
        sent = await bot.answer(start, lambda text: "cockpit is off" in text)
        assert "[web] listen" in sent.params["text"] and "public_url" in sent.params["text"]
        assert not bot.api.calls_of("setChatMenuButton")


def test_a_work_card_opens_its_page_in_the_cockpit() -> None:
    card = WorkCard(9, "vorenus", "app", "legio/vorenus/main", "main", 1, 2, 3, 1, 0)
    rows = card_keyboard(card, open_url=f"{PUBLIC}/card/9").inline_keyboard
    opened = [b for row in rows for b in row if b.web_app is not None]
    assert [(b.text, b.web_app.url) for b in opened] == [("↗ Open", f"{PUBLIC}/card/9")]
    plain = card_keyboard(card).inline_keyboard
    assert not [b for row in plain for b in row if b.web_app is not None]
