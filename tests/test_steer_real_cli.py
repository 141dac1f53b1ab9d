"""A steer through the real bundled Claude CLI on the fake Messages API: both shapes of
the CLI's fact (PROTOCOLS.md "A message sent while a turn runs") and a stop in the middle.

- folded: the message is written while a tool call waits for Caesar's approval; the
  CLI gives it to the model with that tool's result, and one result answers both;
- its own turn: the message is written while the model "thinks" on a reply with no tool
  call; the CLI answers it as the next turn, with its own result.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.app import LegioApp, Stopped
from legio.config import load_config
from legio.request import Decision
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.test_approvals_real_cli import ScriptedCaesar, with_bash
from tests.test_steer import Seen, ask, joined_of

CONFIG = f'model = "{PINNED_MODEL}"\n[approvals]\nask = ["Bash(touch:*)"]\ntimeout = 10\n'


def steered(body: dict[str, object]) -> bool:
    """Whether a model request carries an added message (the CLI's reminder)."""
    return "The user sent a new message while you were working" in json.dumps(body)


@pytest.fixture
async def real(
    castra_dir: Path, tmp_path: Path
) -> AsyncIterator[tuple[LegioApp, FakeMessagesApi, ScriptedCaesar]]:
    caesar = ScriptedCaesar()
    with_bash(castra_dir)
    path = castra_dir.parent / "legio.toml"
    path.write_text(CONFIG + '[claude]\ncli_path = ""\n')
    with FakeMessagesApi() as api:
        app = await LegioApp.open(load_config(path), env=api.safe_cli_env(tmp_path / "cli"))
        app.engine.sessions.steerer.hold_s = 0
        try:
            yield app, api, caesar
        finally:
            api.release()
            await app.close()


async def asked(caesar: ScriptedCaesar) -> None:
    for _ in range(6000):  # a bound for a broken test, not a timing: 60 s
        if caesar.requests:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no approval was asked")


def touch(name: str) -> str:
    return f"CALL_TOOL Bash {json.dumps({'command': f'touch {name}'})}"


async def test_folded_into_the_next_tool_result_and_answered_by_the_turn(
    real: tuple[LegioApp, FakeMessagesApi, ScriptedCaesar],
) -> None:
    app, api, caesar = real
    gate = asyncio.Event()
    caesar.decisions = [Decision("once")]

    async def approve(request: object) -> Decision:  # waits until the steer is written
        caesar.requests.append(request)  # type: ignore[arg-type]
        await gate.wait()
        return Decision("once")

    caesar.approve = approve  # type: ignore[method-assign]
    first, second = Seen(), Seen()
    first.watch = first.watch.__class__(
        on_reply=first.watch.on_reply, on_joined=first.watch.on_joined, asking=caesar
    )
    running = ask(app, f"@vorenus {touch('a.txt')}", first)
    await asked(caesar)
    added = ask(app, "@vorenus and then say which road", second)
    joined = await joined_of(app)
    gate.set()
    [answer] = await asyncio.wait_for(running, 60)
    assert answer.kind == "answer" and answer.text.startswith("TOOL_RESULT")
    assert await asyncio.wait_for(added, 60) == []  # the turn's answer is its answer
    carried = [body for body in api.requests if steered(body)]
    assert len(carried) == 1 and "and then say which road" in json.dumps(carried[0])
    assert second.added[0].seq == joined.nuntius.seq
    assert await app.engine.praetorium.repliers(joined.nuntius.id) == {"vorenus"}
    before = len(api.requests)
    third = Seen()
    [after] = await asyncio.wait_for(ask(app, "@vorenus REPLY next", third), 60)
    assert after.text == "next"
    query = api.requests[before]["messages"][-1]  # Legio's next query: no history of it
    assert "REPLY next" in json.dumps(query) and "which road" not in json.dumps(query)


async def test_its_own_next_turn_when_no_tool_result_comes(
    real: tuple[LegioApp, FakeMessagesApi, ScriptedCaesar],
) -> None:
    app, api, _ = real
    first, second = Seen(), Seen()
    running = ask(app, "@vorenus SLOW 60\nREPLY first answer", first)
    assert await asyncio.to_thread(api.thinking, 60)
    added = ask(app, "@vorenus REPLY second answer", second)
    await joined_of(app)
    api.release()
    assert [r.text for r in await asyncio.wait_for(running, 60)] == ["first answer"]
    assert [r.text for r in await asyncio.wait_for(added, 60)] == ["second answer"]
    assert not any(steered(body) for body in api.requests)


async def test_a_stop_in_the_middle_ends_the_turn_and_the_added_message(
    real: tuple[LegioApp, FakeMessagesApi, ScriptedCaesar],
) -> None:
    app, api, _ = real
    first, second = Seen(), Seen()
    running = ask(app, "@vorenus SLOW 60\nREPLY too late", first)
    assert await asyncio.to_thread(api.thinking, 60)
    added = ask(app, "@vorenus REPLY never", second)
    await joined_of(app)
    assert await app.stop(["vorenus"]) == [Stopped("vorenus", running=True, queued=0)]
    [answer] = await asyncio.wait_for(running, 30)  # well before the model's 60 s
    [steer] = await asyncio.wait_for(added, 30)
    assert (answer.kind, steer.kind) == ("interrupted", "interrupted")
    api.release()
    third = Seen()
    [after] = await asyncio.wait_for(ask(app, "@vorenus REPLY next", third), 60)
    assert after.text == "next"
    assert await app.engine.legatus.unanswered() == []
