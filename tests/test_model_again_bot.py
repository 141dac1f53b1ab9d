"""🔀 Try again on another model, and /retry keeping a request's model (real
python-telegram-bot on the fake Bot API, the agent on the fake CLI, real git): Try again
asks on which model (the same one, or each ``[models]`` name) and runs the request on it
for that one request, said in the answer's header and on the new card; "Same model" is the
model that turn was asked on; ``@vorenus:haiku …`` cut off by a restart runs on haiku
again at /retry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import Call, FakeBotApi
from tests.gitrepo import make_project
from tests.legion import processes_of
from tests.reliability.daemon import Daemon, until, write_daemon_config
from tests.test_models import models_answered, set_models
from tests.test_steer import TOOL
from tests.test_stop import hold_at
from tests.test_undo_bot import bash, buttons, card_after, position, tap

ASKED = "🔀 Try card"


async def again_on(bot: Running, card: Call, label: str) -> tuple[Call, Call, Call]:
    """🔀 Try again on ``card``, then ``label`` of the model question: what was said, the
    answer and the new card."""
    question = await tap(bot, card, "🔀 Try again", ASKED)
    said = await tap(bot, question, label, "🔀 vorenus tries card")
    answer = await bot.answer(position(bot, said), lambda t: t.startswith("⚔️ vorenus #app"))
    new = await bot.answer(position(bot, answer), lambda t: t.startswith("🗂 vorenus #app"))
    return said, answer, new


async def test_try_again_on_another_model_runs_that_request_on_it(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n'
    work = bash("echo one > one.py && git add one.py && git commit -qm one")
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        card = await card_after(bot, f"@vorenus #app add one\n{work}")
        assert str(card.params["text"]).startswith("🗂 vorenus #app · legio/vorenus/main\n")

        question = await tap(bot, card, "🔀 Try again", ASKED)
        assert str(question.params["text"]) == (
            "🔀 Try card 1's request again (vorenus #app) on which model?"
        )
        assert list(buttons(question)) == ["🔀 Same model", "opus", "sonnet", "haiku"]
        said = await tap(bot, question, "sonnet", "🔀 vorenus tries card 1's request again")
        assert "on legio/vorenus/try-2, on sonnet, from" in str(said.params["text"])
        asked_id = int(question.result["message_id"])
        assert bot.api.buttons(CAESAR, asked_id) == []  # one tap, one try

        answer = await bot.answer(position(bot, said), lambda t: t.startswith("⚔️ vorenus #app"))
        assert str(answer.params["text"]).startswith("⚔️ vorenus #app · sonnet")
        new = await bot.answer(position(bot, answer), lambda t: t.startswith("🗂 vorenus #app"))
        assert str(new.params["text"]).startswith("🗂 vorenus #app · legio/vorenus/try-2 · sonnet")
        assert set_models(fake_cli) == ["sonnet"]  # the live CLI, switched for this request
        assert models_answered(fake_cli)[-1] == "sonnet"
        assert "add one" in processes_of(fake_cli, "vorenus")[-1].raw_prompts[-1]

        # the agent's next request is on its own model again
        await bot.answer(await bot.ask("@vorenus #app REPLY after"), lambda t: t.endswith("after"))
        assert set_models(fake_cli) == ["sonnet", "opus"]


async def test_same_model_is_the_one_that_turn_was_asked_on(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n'
    work = bash("echo one >> one.py && git add one.py && git commit -qm one")
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        card = await card_after(bot, f"@vorenus:haiku #app add one\n{work}")
        assert "· haiku" in str(card.params["text"]).splitlines()[0]

        # a turn asked on haiku: the same model is haiku (said on the button)
        question = await tap(bot, card, "🔀 Try again", ASKED)
        assert "🔀 Same model (haiku)" in buttons(question)
        _, answer, second = await again_on(bot, card, "sonnet")
        assert str(answer.params["text"]).startswith("⚔️ vorenus #app · sonnet")

        # card 2's turn was asked on sonnet (its words name no model): Same model is sonnet
        said, answer, third = await again_on(bot, second, "🔀 Same model (sonnet)")
        assert "on legio/vorenus/try-3, on sonnet" in str(said.params["text"])
        assert str(answer.params["text"]).startswith("⚔️ vorenus #app · sonnet")
        assert "legio/vorenus/try-3 · sonnet" in str(third.params["text"])
        assert models_answered(fake_cli)[-1] == "sonnet"


async def test_retry_after_a_restart_runs_the_request_on_its_model_again(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    """``legio run`` killed mid-turn (a crash, a power cut), started again, then /retry."""
    async with FakeBotApi() as api:
        daemon = Daemon(write_daemon_config(castra_dir, api, str(fake_cli.path)), api, fake_cli)
        await daemon.start()
        try:
            api.add_message("@vorenus:haiku inspect the walls\nSLEEP_FIRST 30 cut\nREPLY ok")
            await until(
                lambda: any(p.prompts for p in processes_of(fake_cli, "vorenus")), what="its turn"
            )
            [cut] = processes_of(fake_cli, "vorenus")
            assert cut.option("--model") == "haiku"
            daemon.kill()

            start = len(api.calls)
            await daemon.start()
            notice = await api.wait_for_call(
                "sendMessage", lambda c: "Interrupted by a restart" in c.params["text"], start=start
            )
            assert "inspect the walls" in notice.params["text"]
            start = len(api.calls)
            api.add_message("/retry", user_id=CAESAR)
            answer = await api.wait_for_call(
                "sendMessage", lambda c: str(c.params["text"]).startswith("⚔️ vorenus"), start=start
            )
            text = str(answer.params["text"])
            assert text.startswith("⚔️ vorenus · haiku") and text.endswith("ok")
            last = processes_of(fake_cli, "vorenus")[-1]
            assert last is not cut and last.option("--model") == "haiku"  # started on haiku
            assert models_answered(fake_cli)[-1] == "haiku"
            assert await daemon.terminate() == 0
        finally:
            if daemon.process and daemon.process.poll() is None:
                daemon.kill()


async def test_try_again_is_priced_at_its_model_and_retry_keeps_it(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    """The day's budget fits a Try again on haiku where one on opus would not; the held
    one, /retry'd once the limit is raised, runs on opus."""
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n[budget]\ndaily_usd = 5\n'
    work = bash("echo one > one.py && git add one.py && git commit -qm one")
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        card = await card_after(bot, f"@vorenus #app add one\nUSAGE 2000 0 0 1000\n{work}")
        budget = bot.app.engine.sessions.budget
        assert budget is not None
        [row] = await bot.app.engine.praetorium.records.usage_since(budget.day_start())
        opus = (row.input_tokens * 5 + row.output_tokens * 25) / 1e6
        haiku = (row.input_tokens * 1 + row.output_tokens * 5) / 1e6
        bot.app.engine.config.budget.daily_usd = row.cost_usd + (haiku + opus) / 2

        question = await tap(bot, card, "🔀 Try again", ASKED)
        said = await tap(bot, question, "opus", "🔀 vorenus tries card 1's request again")
        held = await bot.answer(position(bot, said), lambda t: "/retry" in t)
        assert "daily_usd" in str(held.params["text"])
        assert "opus" not in models_answered(fake_cli)  # nothing ran on it

        _, answer, _ = await again_on(bot, card, "haiku")  # fits
        assert str(answer.params["text"]).startswith("⚔️ vorenus #app · haiku")

        bot.app.engine.config.budget.daily_usd = 100
        retried = await bot.answer(await bot.ask("/retry"), lambda t: t.startswith("⚔️ vorenus"))
        assert str(retried.params["text"]).startswith("⚔️ vorenus #app · opus")
        assert models_answered(fake_cli)[-1] == "opus"


async def test_a_message_naming_a_model_waits_for_its_own_turn_on_it(
    castra_dir: Path, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``@vorenus:haiku …`` to a working vorenus does not join its turn (which runs on its
    own model): it waits, then runs on haiku."""
    hold = hold_at(monkeypatch, tmp_path, "pause")
    async with running_bot(castra_dir, fake_cli) as bot:
        bot.app.engine.sessions.steerer.hold_s = 0
        start = await bot.ask(f"@vorenus PAUSE\n{TOOL}")
        await hold.reached("pause")
        second = await bot.ask("@vorenus:haiku REPLY on its own")
        errands = bot.app.engine.sessions.errands
        for _ in range(6000):  # a bound for a broken test, not a timing: 60 s
            running = errands.running("vorenus")
            if errands.waiting("vorenus") or (running is not None and running.joined):
                break
            await asyncio.sleep(0.01)
        hold.go("pause")
        first = await bot.answer(start, lambda t: "TOOL_RESULT" in t)
        assert str(first.params["text"]).startswith("⚔️ vorenus —")  # its own model
        answer = await bot.answer(second, lambda t: t.endswith("on its own"))
        assert str(answer.params["text"]).startswith("⚔️ vorenus · haiku")
        assert "➕ added to vorenus's turn" not in bot.api.sent_texts(CAESAR)
        [process] = processes_of(fake_cli, "vorenus")
        assert process.folded == [] and models_answered(fake_cli)[-1] == "haiku"
