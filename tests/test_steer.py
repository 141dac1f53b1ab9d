"""A message to a working agent joins its running turn (a steer), through the real SDK
on the fake CLI: folded into the turn at its next tool result, or its own next turn when
there is none; answered once either way, recorded as a nuntius of that turn, never given
to the agent again; ⏭ and /queue keep the old queueing; a stop ends both.

Each window is driven by construction (the fake CLI's ``pause`` hold point), not by sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.app import LegioApp, Stopped
from legio.request import Added, Callbacks, Reply, Request
from legio.sessions.steering import Joined
from tests.conftest import FakeCli
from tests.legion import fake_cli_config, history_ids, processes_of
from tests.test_stop import Hold, hold_at

TOOL = "CALL_TOOL memoria_vorenus list_acta {}"


class Seen:
    """One request's watch: its replies and its ➕ mark."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.added: list[Added] = []
        self.watch = Callbacks(on_reply=self._reply, on_joined=self._joined)

    async def _reply(self, reply: Reply) -> None:
        self.replies.append(reply)

    async def _joined(self, added: Added) -> None:
        self.added.append(added)


@pytest.fixture
async def app(
    castra_dir: Path, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[tuple[LegioApp, Hold]]:
    hold = hold_at(monkeypatch, tmp_path, "pause")
    opened = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    opened.engine.sessions.steerer.hold_s = 0  # ⏭ is tested apart
    try:
        yield opened, hold
    finally:
        await opened.close()


def ask(app: LegioApp, text: str, seen: Seen, **more: object) -> asyncio.Task[list[Reply]]:
    return asyncio.create_task(app.handle_message(Request(text, **more), seen.watch))  # type: ignore[arg-type]


async def joined_of(app: LegioApp, name: str = "vorenus") -> Joined:
    """The message added to ``name``'s running turn, once written to its CLI."""
    for _ in range(6000):  # a bound for a broken test, not a timing: 60 s
        errand = app.engine.sessions.errands.running(name)
        joined = errand.joined[0] if errand is not None and errand.joined else None
        if joined is not None and joined.state == "written" and joined.uid:
            return joined
        await asyncio.sleep(0.01)
    raise AssertionError("nothing joined the turn")


async def test_a_message_folded_into_the_running_turn_is_answered_by_it_once(
    app: tuple[LegioApp, Hold], fake_cli: FakeCli
) -> None:
    legio, hold = app
    first, second = Seen(), Seen()
    running = ask(legio, f"@vorenus PAUSE\n{TOOL}", first)
    await hold.reached("pause")
    added = ask(legio, "@vorenus REPLY steered: use the Via Appia", second)
    steer = (await joined_of(legio)).nuntius
    hold.go("pause")
    [answer] = await running
    assert answer.text == "steered: use the Via Appia"  # the agent acted on it in its turn
    assert await added == []  # answered by the turn's answer: said once
    [mark] = second.added
    assert mark.agent == "vorenus" and not mark.after()  # too late for ⏭: it has it
    [process] = processes_of(fake_cli, "vorenus")
    assert process.folded == ["@vorenus REPLY steered: use the Via Appia"]
    assert len(process.prompts) == 1 and len(process.result_times) == 1

    assert mark.seq == steer.seq
    assert await legio.engine.praetorium.repliers(steer.id) == {"vorenus"}
    assert await legio.engine.legatus.unanswered() == []
    third = Seen()
    await ask(legio, "@vorenus REPLY next", third)
    later = processes_of(fake_cli, "vorenus")[-1].prompts[-1]
    assert steer.id not in history_ids(later)  # never given to it again


async def test_a_message_the_turn_cannot_fold_is_its_own_next_answer(
    app: tuple[LegioApp, Hold], fake_cli: FakeCli
) -> None:
    legio, hold = app
    first, second = Seen(), Seen()
    running = ask(legio, "@vorenus PAUSE\nREPLY first answer", first)
    await hold.reached("pause")
    added = ask(legio, "@vorenus REPLY second answer", second)
    await joined_of(legio)
    hold.go("pause")
    assert [r.text for r in await running] == ["first answer"]
    assert [r.text for r in await added] == ["second answer"]
    assert len(second.added) == 1
    [process] = processes_of(fake_cli, "vorenus")  # the same CLI, one query each
    assert len(process.prompts) == 2 and process.folded == []
    assert await legio.engine.legatus.unanswered() == []


async def test_a_stop_in_the_middle_ends_the_turn_and_the_added_message(
    app: tuple[LegioApp, Hold], fake_cli: FakeCli
) -> None:
    legio, hold = app
    first, second = Seen(), Seen()
    running = ask(legio, f"@vorenus PAUSE\n{TOOL}\nSLEEP 60", first)
    await hold.reached("pause")
    added = ask(legio, "@vorenus REPLY never", second)
    await joined_of(legio)
    hold.go("pause")
    for _ in range(6000):  # folded: the CLI sleeps in the same turn
        if processes_of(fake_cli, "vorenus")[0].folded:
            break
        await asyncio.sleep(0.01)
    assert await legio.stop(["vorenus"]) == [Stopped("vorenus", running=True, queued=0)]
    [answer] = await asyncio.wait_for(running, 30)
    assert answer.kind == "interrupted"
    [steered] = await asyncio.wait_for(added, 30)
    assert steered.kind == "interrupted"  # ended with it, said once
    assert await legio.engine.legatus.unanswered() == []
    third = Seen()
    assert [r.text for r in await ask(legio, "@vorenus REPLY after", third)] == ["after"]


async def test_after_this_turn_and_queue_keep_the_old_queueing(
    app: tuple[LegioApp, Hold], fake_cli: FakeCli
) -> None:
    legio, hold = app
    legio.engine.sessions.steerer.hold_s = 3600  # ⏭ comes first
    first, second, third = Seen(), Seen(), Seen()
    running = ask(legio, f"@vorenus PAUSE\n{TOOL}", first)
    await hold.reached("pause")
    added = ask(legio, "@vorenus REPLY later one", second)
    for _ in range(6000):  # a bound for a broken test, not a timing: 60 s
        if second.added:
            break
        await asyncio.sleep(0.01)
    assert second.added[0].after()  # ⏭: back in line
    assert not second.added[0].after()
    queued = ask(legio, "@vorenus REPLY later two", third, queue=True)  # /queue
    hold.go("pause")
    [answer] = await running
    assert answer.text.startswith("TOOL_RESULT")
    assert [r.text for r in await added] == ["later one"]
    assert [r.text for r in await queued] == ["later two"]
    assert third.added == []
    [process] = processes_of(fake_cli, "vorenus")
    assert process.folded == [] and len(process.prompts) == 3
