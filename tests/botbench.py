"""The bot under test: serve() (real PTB) on the fake Bot API; agents on the fake CLI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from legio.app import LegioApp
from legio.config import Config
from legio.frontends.telegram.serving import serve
from tests.conftest import FakeCli
from tests.fakes.bot_api import Call, FakeBotApi
from tests.legion import fake_cli_config

CAESAR = 1001


@dataclass
class Running:
    api: FakeBotApi
    config: Config
    app: LegioApp
    fake_cli: FakeCli

    async def ask(self, text: str, *, user_id: int = CAESAR) -> int:
        """Send a message; return the index in the call log from which to look for answers."""
        start = len(self.api.calls)
        self.api.add_message(text, user_id=user_id)
        return start

    async def answer(
        self, start: int, predicate: Callable[[str], bool] | None = None, wait_s: float = 60
    ) -> Call:
        """The first message (not a status line) sent after ``start`` matching ``predicate``."""

        def sent(call: Call) -> bool:
            text = str(call.params.get("text", ""))
            return not is_status(call) and (predicate is None or predicate(text))

        return await self.api.wait_for_call("sendMessage", sent, start=start, timeout=wait_s)

    def answers(self) -> list[str]:
        """Every message sent to Caesar, status messages and steering's ➕ marks (a message
        that joined a running turn: said, then answered like the rest) excluded."""
        return [
            str(c.params.get("text", ""))
            for c in self.api.calls_of("sendMessage")
            if int(c.params["chat_id"]) == CAESAR
            and not is_status(c)
            and not str(c.params.get("text", "")).startswith("➕ added to ")
        ]


def is_status(call: Call) -> bool:
    """The status message: ``⏳`` lines, one per working agent (``vorenus: ⏳ ...`` when there
    are several), with their ⏹ Stop buttons. It appears once a request takes over a second,
    so a slow machine shows it where a fast one does not."""
    text = str(call.params.get("text", ""))
    markup = call.params.get("reply_markup") or {}
    stops = [
        b
        for row in markup.get("inline_keyboard", [])
        for b in row
        if str(b.get("callback_data", "")).startswith("stop:")
    ]
    return text.startswith("⏳") or bool(stops)


@asynccontextmanager
async def running_bot(
    castra_dir: Path,
    fake_cli: FakeCli,
    extra: str = "",
    *,
    api: FakeBotApi | None = None,
    telegram: str = "",
    grace_s: float = 20.0,
) -> AsyncIterator[Running]:
    """Serve the bot until the block ends, then stop it as SIGTERM would; ``extra`` is
    top-level TOML, ``telegram`` more keys of the ``[telegram]`` table."""
    async with api or FakeBotApi() as server:
        config = fake_cli_config(
            castra_dir,
            fake_cli,
            f"shutdown_grace_seconds = 2\n{extra}\n[telegram]\n"
            f'caesar_ids = [{CAESAR}]\nbase_url = "{server.base_url}"\n{telegram}',
        )
        opened: list[LegioApp] = []

        async def factory() -> LegioApp:
            opened.append(await LegioApp.open(config))
            return opened[-1]

        stop = asyncio.Event()
        first = len(server.calls)  # a server reused across restarts has older calls
        task = asyncio.create_task(
            serve(config, server.token, factory, stop, poll_timeout=1, grace_s=grace_s)
        )
        await server.wait_for_call("setMyCommands", start=first)
        await server.wait_for_call("getUpdates", completed=False, start=first)
        try:
            yield Running(server, config, opened[0], fake_cli)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
