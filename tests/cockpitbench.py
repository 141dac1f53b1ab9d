"""The cockpit on a real ``LegioApp`` (the fake CLI), listening on 127.0.0.1, with
Telegram's launch data signed as Telegram signs it, for the web and browser tests."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from legio.app import LegioApp
from legio.frontends.web.auth import sign_init_data
from legio.frontends.web.server import Cockpit
from legio.frontends.web.source import Source
from legio.projects.turnwork import mark
from legio.request import ApprovalRequest, Decision, QuestionRequest, WorkCard
from tests.conftest import FakeCli
from tests.gitrepo import git
from tests.legion import fake_cli_config

TOKEN = "123456:TEST-cockpit-token"
CAESAR_ID = 42


def launch_data(user: int = CAESAR_ID, age_s: float = 0, token: str = TOKEN) -> str:
    """Launch data as Telegram signs it for ``user``, ``age_s`` old."""
    fields = {
        "query_id": "AAHdF6IQAAAAAN0XohDhrOrc",
        "user": json.dumps({"id": user, "first_name": "Gaius"}, separators=(",", ":")),
        "auth_date": str(int(time.time() - age_s)),
    }
    return sign_init_data(fields, token)


def tampered() -> str:
    return launch_data().replace("Gaius", "Brutus")


class Unanswered:
    """A chat's asker nobody answers (so the page's answer is the one that counts)."""

    def __init__(self) -> None:
        self.cancelled = False

    async def approve(self, request: ApprovalRequest) -> Decision:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("never answered")

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        return None


@dataclass
class Running:
    app: LegioApp
    source: Source
    cockpit: Cockpit
    url: str


@asynccontextmanager
async def running_cockpit(
    castra_dir: Path, fake_cli: FakeCli, extra: str = ""
) -> AsyncIterator[Running]:
    config = fake_cli_config(
        castra_dir,
        fake_cli,
        f'[telegram]\ncaesar_ids = [{CAESAR_ID}]\n[web]\nlisten = "127.0.0.1:0"\n{extra}',
    )
    app = await LegioApp.open(config)
    source = Source(app)
    cockpit = Cockpit(source, config, TOKEN)
    try:
        host, port = await cockpit.start()
        await source.attach()
        yield Running(app, source, cockpit, f"http://{host}:{port}")
    finally:
        source.detach()
        await cockpit.close()
        await app.close()


async def make_card(app: LegioApp, files: dict[str, str], agent: str = "vorenus") -> WorkCard:
    """A work card of ``agent``'s turn on ``app`` that committed ``files``, made as the turn
    makes it (the copy's branch published into the project, then the card)."""
    place = await app.engine.sessions.projects.place(agent, "app")
    before = await mark(place)
    for name, text in files.items():
        (place.copy / name).write_text(text)
    git(place.copy, "add", "-A", caesar=False)
    git(place.copy, "commit", "-qm", "<b>work</b>", caesar=False)
    await app.engine.sessions.projects.publish(place)
    card = await app.engine.sessions.cards.after(place, before, None)
    assert card is not None
    return card
