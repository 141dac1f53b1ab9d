"""Idle agents hold no CLI; a request starts its agent's CLI at once, while it is stored.

The reaper ends an idle agent's CLI process (its session resumed on the next request,
remembering, and given nothing twice). ``prewarm`` starts the CLI of each agent a
request addresses as soon as it is routed, so the CLI comes up while the nuntius is
stored; a CLI started so is dropped when the conversation moved on meanwhile.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from legio.app import LegioApp
from legio.sessions.client import AgentSession
from legio.sessions.spec import AgentSpec
from tests.conftest import FakeCli
from tests.legion import Legion, fake_cli_config, history_ids, processes_of
from tests.reliability.daemon import alive


async def until_reaped(legion: Legion, name: str) -> None:
    legion.manager.start()
    for _ in range(200):
        if not legion.manager.status([name])[0].live:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name}'s session was never reaped")


async def test_a_reaped_agent_has_no_cli_process_and_its_next_answer_remembers(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    legion = await Legion(
        castra_dir, fake_cli, session_idle_timeout_minutes=0.0005, reap_interval_s=0.05
    ).start()
    try:
        await legion.say(["vorenus"], "the password is swordfish")
        [first] = legion.processes("vorenus")
        assert alive(first.pid)
        await until_reaped(legion, "vorenus")
        for _ in range(100):  # the CLI process itself is gone, not only the client
            if not alive(first.pid):
                break
            await asyncio.sleep(0.05)
        assert not alive(first.pid)

        await legion.say(["pullo"], "meanwhile, for pullo only")
        legion.manager.prewarm(["vorenus"])  # as the Legatus does while it stores the message
        await legion.say(["vorenus"], "what is the password?")
        first, resumed = legion.processes("vorenus")
        assert resumed.resumed and resumed.session_id == first.session_id  # it remembers
        assert resumed.prompts == ["what is the password?"]  # nothing again, nothing else
    finally:
        await legion.stop()


async def test_the_cli_starts_while_the_message_is_still_being_stored(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    try:
        await app.handle_message("@vorenus REPLY first")
        await app.engine.sessions.slot("vorenus").close("idle")  # as the reaper does
        started = len(processes_of(fake_cli, "vorenus"))
        storing, release = asyncio.Event(), asyncio.Event()
        post = app.engine.praetorium.post

        async def slow_post(*args: Any, **kwargs: Any) -> Any:
            storing.set()
            await release.wait()
            return await post(*args, **kwargs)

        app.engine.praetorium.post = slow_post  # type: ignore[method-assign]
        answer = asyncio.create_task(app.handle_message("@vorenus REPLY second"))
        await asyncio.wait_for(storing.wait(), 30)
        for _ in range(400):  # the nuntius is not stored yet: its CLI comes up meanwhile
            if len(processes_of(fake_cli, "vorenus")) > started:
                break
            await asyncio.sleep(0.05)
        ahead = processes_of(fake_cli, "vorenus")[started:]
        assert len(ahead) == 1 and ahead[0].resumed and not ahead[0].prompts  # connected only
        release.set()
        [reply] = await asyncio.wait_for(answer, 60)
        assert reply.text.endswith("second")
        [used] = processes_of(fake_cli, "vorenus")[started:]  # that CLI answered: no other
        assert used.prompts == ["@vorenus REPLY second"]
    finally:
        await app.close()


async def test_a_cli_started_ahead_is_dropped_when_the_conversation_moved_on(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    legion = await Legion(castra_dir, fake_cli).start()
    try:
        await legion.say(["vorenus"], "one")
        await legion.manager.slot("vorenus").close("idle")
        opening, release = asyncio.Event(), asyncio.Event()
        manager = legion.manager
        real_open = manager._open

        async def held_open(spec: AgentSpec, resume: str | None) -> AgentSession:
            session = await real_open(spec, resume)
            opening.set()
            await release.wait()
            return session

        manager._open = held_open  # type: ignore[method-assign]
        manager.prewarm(["vorenus"])
        await asyncio.wait_for(opening.wait(), 30)
        assert await manager.reset("vorenus")  # the conversation moves on meanwhile
        manager._open = real_open  # type: ignore[method-assign]
        release.set()
        await manager.slot("vorenus").warmed()
        assert manager.slot("vorenus").session is None  # not kept: it resumed the old one
        warmed = legion.processes("vorenus")[-1]
        for _ in range(100):
            if not alive(warmed.pid):
                break
            await asyncio.sleep(0.05)
        assert not alive(warmed.pid)

        await legion.say(["vorenus"], "two")
        fresh = legion.processes("vorenus")[-1]
        assert not fresh.resumed and fresh.session_id != warmed.session_id
        assert history_ids(fresh.prompts[0])  # a fresh session: its history, once
    finally:
        await legion.stop()
