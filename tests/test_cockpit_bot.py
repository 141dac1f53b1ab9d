"""The cockpit wired into the Telegram bot (real PTB on the fake Bot API): the menu button
of Caesar's chat opens it, ``/cockpit`` sends a button for it (or says how to turn it on),
a request asked in the chat shows on the page, and a work card gets ↗ Open."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import aiohttp

from legio.frontends.telegram.cardview import card_keyboard
from legio.frontends.web.auth import sign_init_data
from legio.request import WorkCard
from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli

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
