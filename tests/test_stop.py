"""A stop holds at every moment of a request's life, and says what it ended.

Each window is driven by construction, not by sleeps: a request stamped but not yet
routed, a CLI held before it answers ``initialize`` (starting), a query held in the
CLI's input pipe, a request queued behind another, the model "thinking" on the fake
Messages API (the real CLI). See ``legio.sessions.errands``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.app import LegioApp, Stopped
from legio.errors import AgentInterrupted
from legio.request import Callbacks, Request, Status
from legio.sessions.errands import Errand
from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.legion import Legion, fake_cli_config

INTERRUPTED = "[{}] Interrupted."
NEVER_STARTED = "[{}] Stopped before it started."


class Hold:
    """The fake CLI's hold points (``FAKE_CLAUDE_HOLD``): wait until a CLI stands at one,
    then let it go."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def reached(self, point: str) -> None:
        for _ in range(6000):  # a bound for a broken test, not a timing: 60 s
            if any(self.folder.glob(f"at-{point}-*")):
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"no CLI reached {point}")

    def go(self, point: str) -> None:
        (self.folder / f"go-{point}").touch()


def hold_at(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *points: str) -> Hold:
    folder = tmp_path / "hold"
    folder.mkdir()
    monkeypatch.setenv("FAKE_CLAUDE_HOLD", str(folder))
    monkeypatch.setenv("FAKE_CLAUDE_HOLD_AT", ",".join(points))
    return Hold(folder)


def prompts_of(fake_cli: FakeCli, name: str) -> list[str]:
    return [
        prompt
        for process in fake_cli.processes()
        if f"memoria_{name}" in " ".join(process.argv)
        for prompt in process.prompts
    ]


@pytest.fixture
async def app(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[LegioApp]:
    opened = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_stop_that_comes_before_the_request_is_routed_ends_it(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    # /stop 0.1 s after "@pullo …": the front-end stamped the message first, but its
    # handler has not routed it yet when the stop is handled
    receipt = app.receive()
    turn = asyncio.create_task(app.handle_message(Request("@pullo SLEEP 30", receipt=receipt)))
    assert await app.stop(["pullo"]) == [Stopped("pullo", running=False, queued=1)]
    [reply] = await asyncio.wait_for(turn, 20)
    assert reply.kind == "interrupted" and reply.text.endswith(NEVER_STARTED.format("pullo"))
    assert prompts_of(fake_cli, "pullo") == []  # never sent
    [after] = await app.handle_message("@pullo REPLY at once")
    assert after.text.endswith("at once")


async def test_a_request_that_arrives_after_the_stop_is_not_stopped(app: LegioApp) -> None:
    stop = app.receive(request=False)
    turn = asyncio.create_task(
        app.handle_message(Request("@pullo REPLY fine", receipt=app.receive()))
    )
    assert await app.stop(["pullo"], stop) == []
    [reply] = await asyncio.wait_for(turn, 20)
    assert (reply.kind, reply.text.splitlines()[-1]) == ("answer", "fine")


async def test_a_stop_while_the_cli_starts_never_sends_the_query(
    app: LegioApp, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hold = hold_at(monkeypatch, tmp_path, "init")
    turn = asyncio.create_task(app.handle_message("@pullo SLEEP 30"))
    await hold.reached("init")  # its CLI is starting: no session yet
    assert await app.stop(["pullo"]) == [Stopped("pullo", running=True, queued=0)]
    hold.go("init")
    [reply] = await asyncio.wait_for(turn, 20)
    assert reply.kind == "interrupted" and reply.text.endswith(INTERRUPTED.format("pullo"))
    assert prompts_of(fake_cli, "pullo") == []
    [after] = await asyncio.wait_for(app.handle_message("@pullo REPLY next"), 20)
    assert after.text.endswith("next")


async def test_a_stop_once_the_cli_has_the_query_interrupts_it(
    app: LegioApp, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hold = hold_at(monkeypatch, tmp_path, "turn")
    turn = asyncio.create_task(app.handle_message("@pullo SLEEP 30"))
    await hold.reached("turn")  # its CLI has the query and does not answer it yet
    assert await app.stop(["pullo"]) == [Stopped("pullo", running=True, queued=0)]
    hold.go("turn")  # it answers, and reads the interrupt written after the query
    [reply] = await asyncio.wait_for(turn, 20)
    assert reply.kind == "interrupted" and reply.text.endswith(INTERRUPTED.format("pullo"))
    assert prompts_of(fake_cli, "pullo")[-1].endswith("SLEEP 30")


async def test_a_stop_ends_the_running_turn_and_drops_the_queued_ones(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    queued = asyncio.Event()

    async def on_status(status: Status) -> None:
        if status.kind == "queued":
            queued.set()

    first = asyncio.create_task(app.handle_message("@vorenus SLEEP 30"))
    for _ in range(6000):
        if prompts_of(fake_cli, "vorenus"):
            break
        await asyncio.sleep(0.01)
    second = asyncio.create_task(  # ⏭ after this turn (not added to it: test_steer.py)
        app.handle_message(
            Request("@vorenus REPLY never", queue=True), Callbacks(on_status=on_status)
        )
    )
    await asyncio.wait_for(queued.wait(), 20)
    assert await app.stop(["vorenus"]) == [Stopped("vorenus", running=True, queued=1)]
    [interrupted] = await asyncio.wait_for(first, 20)
    [dropped] = await asyncio.wait_for(second, 20)
    assert interrupted.text.endswith(INTERRUPTED.format("vorenus"))
    assert dropped.text.endswith(NEVER_STARTED.format("vorenus"))
    [after] = await asyncio.wait_for(app.handle_message("@vorenus REPLY next"), 20)
    assert after.text.endswith("next")
    assert not any(p.endswith("REPLY never") for p in prompts_of(fake_cli, "vorenus"))
    assert await app.stop(["vorenus"]) == []  # nothing left: said so


async def test_the_interrupt_always_follows_the_query() -> None:
    loop = asyncio.get_running_loop()
    sent: list[str] = []

    async def interrupt() -> None:
        sent.append("interrupt")

    early = Errand("pullo", 1, loop.create_future())
    early.stop()  # a stop while its query was being written: nothing to interrupt yet
    assert sent == []
    await early.sent(interrupt)  # written: interrupted now (in the background), after it
    for _ in range(10):
        await asyncio.sleep(0)
    assert sent == ["interrupt"]
    early.ended.set()  # its turn ended: nothing to close
    with pytest.raises(AgentInterrupted):
        early.check()

    calm = Errand("pullo", 2, loop.create_future())
    await calm.sent(interrupt)
    await asyncio.sleep(0)
    assert sent == ["interrupt"]  # not stopped: nothing sent


async def test_a_stop_cancels_a_wait_before_the_query() -> None:
    errand = Errand("pullo", 1, asyncio.get_running_loop().create_future())
    forever = asyncio.Event()
    waiting = asyncio.create_task(errand.until_stopped(forever.wait()))
    await asyncio.sleep(0)
    errand.stop()
    with pytest.raises(AgentInterrupted):
        await asyncio.wait_for(waiting, 5)


# ------------------------------------------------------------------ the real CLI


@pytest.fixture
async def real_legion(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> AsyncIterator[tuple[Legion, FakeMessagesApi]]:
    with FakeMessagesApi() as api:
        env = api.safe_cli_env(tmp_path / "cli")
        legion = await Legion(
            castra_dir, fake_cli, cli_path="", model=PINNED_MODEL, env=env
        ).start()
        try:
            yield legion, api
        finally:
            api.release()
            await legion.stop()


async def test_the_real_cli_stopped_at_once_and_while_thinking(
    real_legion: tuple[Legion, FakeMessagesApi],
) -> None:
    legion, api = real_legion
    manager = legion.manager
    # at once: its CLI is still starting when the stop comes
    slow = await legion.post("SLOW 60\nREPLY too late", ["vorenus"])
    turn = asyncio.create_task(manager.answer("vorenus", slow, ticket=manager.reserve("vorenus")))
    await asyncio.sleep(0)  # its turn has begun
    assert await manager.stop(["vorenus"]) == [Stopped("vorenus", running=True, queued=0)]
    outcome = await asyncio.wait_for(turn, 60)
    assert (outcome.kind, outcome.text) == ("interrupted", INTERRUPTED.format("vorenus"))
    assert not api.thinking(0)  # the model was never asked

    # while the model thinks
    slow = await legion.post("SLOW 60\nREPLY too late", ["vorenus"])
    turn = asyncio.create_task(manager.answer("vorenus", slow))
    assert await asyncio.to_thread(api.thinking, 60)
    assert await manager.stop(["vorenus"]) == [Stopped("vorenus", running=True, queued=0)]
    outcome = await asyncio.wait_for(turn, 30)  # well before the model's 60 s
    assert (outcome.kind, outcome.text) == ("interrupted", INTERRUPTED.format("vorenus"))

    api.release()
    replies = await legion.say(["vorenus"], "REPLY next")
    assert replies == {"vorenus": "next"}


# ------------------------------------------------------------------ through Telegram


async def test_a_message_and_stop_in_one_batch_stop_it_and_say_so(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    from tests.botbench import running_bot  # the fake Bot API and the real PTB Application

    async with running_bot(castra_dir, fake_cli) as bot:
        start = await bot.ask("@vorenus SLEEP 30\nREPLY too late")
        await bot.ask("/stop vorenus")  # the same getUpdates answer: its handler comes first
        stop = await bot.answer(start, lambda t: t.startswith("Stopping"), wait_s=30)
        assert stop.params["text"] == "Stopping vorenus (1 queued request dropped)."
        ended = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"), wait_s=30)
        assert ended.params["text"].endswith(NEVER_STARTED.format("vorenus"))
        after = await bot.ask("@vorenus REPLY at once")
        await bot.answer(after, lambda t: t.endswith("at once"), wait_s=30)
        assert not any("too late" in t for t in bot.answers())
        assert prompts_of(fake_cli, "vorenus")[-1].endswith("REPLY at once")
