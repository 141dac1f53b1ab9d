"""The spend budget and /usage: counted from the turn records, held turns, /retry, warnings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from legio.app import LegioApp
from legio.config import load_config
from legio.frontends.admin import Admin
from legio.limits.budget import Budget
from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.legion import Told, fake_cli_config

BIG = "USAGE 1000000 0 0\nREPLY that was expensive"  # about $3 on the fake CLI's prices


@pytest.fixture
async def budgeted(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[LegioApp]:
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli, "[budget]\ndaily_usd = 2"))
    yield app
    await app.close()


async def test_over_budget_the_turn_waits_for_a_raise_and_retry(budgeted: LegioApp) -> None:
    app = budgeted
    told: list[str] = []

    async def notify(text: str) -> None:
        told.append(text)

    await app.attach(Told(notify))
    [reply] = await app.handle_message(f"@vorenus {BIG}")
    assert "that was expensive" in reply.text
    spent = sum(t.cost_usd for t in (await app.engine.praetorium.records.usage_totals()).values())
    assert spent > 2

    [held] = await app.handle_message("@vorenus REPLY salve")
    assert held.kind == "held"
    assert held.text.startswith(f"💰 Today's budget is spent: the legion has used ${spent:,.2f}")
    assert "of its $2.00 a day" in held.text
    assert "raise [budget] daily_usd in legio.toml and send /retry" in held.text
    history = await app.history(10)
    assert not any(n.sender == "vorenus" and "budget" in n.text for n in history)  # not posted

    page = "\n".join(await Admin(app).run("/usage"))
    assert f"vorenus · default model: ${spent:,.2f} (1 turn," in page
    assert f"total: ${spent:,.2f}" in page
    assert "Daily budget: $2.00" in page

    app.engine.config.budget.daily_usd = spent / 0.9  # raised: 90 % used, one warning
    [answer] = await app.retry()
    assert answer.text.endswith("salve")
    await app.handle_message("@vorenus REPLY again")
    assert len(told) == 1 and "(90%)" in told[0]


async def test_an_agents_own_daily_limit(castra_dir: Path, fake_cli: FakeCli) -> None:
    prompt = castra_dir / "centuriones" / "pullo" / "prompt.md"
    prompt.write_text(prompt.read_text().replace("---\n", "---\ndaily_usd: 1\n", 1))
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli))
    try:
        await app.handle_message(f"@pullo {BIG}")
        replies = await app.handle_message("@pullo @vorenus REPLY next")
        kinds = {r.agent: r.kind for r in replies}
        assert kinds == {"pullo": "held", "vorenus": "answer"}
        held = next(r for r in replies if r.agent == "pullo")
        assert "pullo's budget for today is spent" in held.text
        assert "daily_usd in pullo's prompt frontmatter" in held.text
    finally:
        await app.close()


async def test_days_begin_at_midnight_in_the_owners_zone(app: LegioApp) -> None:
    clock = datetime(2026, 3, 1, 3, 30, tzinfo=UTC)
    budget = Budget(
        app.engine.config,
        app.engine.praetorium,
        zone=ZoneInfo("America/New_York"),
        clock=lambda: clock,
    )
    start = budget.day_start()
    assert start.isoformat() == "2026-02-28T00:00:00-05:00"


async def test_the_real_cli_turn_cut_by_per_turn_usd(castra_dir: Path, tmp_path: Path) -> None:
    """The real bundled CLI prices a huge usage report; its backstop ends the turn, Legio
    says why, reconnects, and /usage adds up the turn records."""
    with FakeMessagesApi() as api:
        path = castra_dir.parent / "legio.toml"
        path.write_text(
            f'model = "{PINNED_MODEL}"\n[claude]\ncli_path = ""\n[budget]\nper_turn_usd = 0.5\n'
        )
        app = await LegioApp.open(load_config(path), env=api.safe_cli_env(tmp_path / "cli"))
        try:
            [cut] = await app.handle_message("@vorenus USAGE 1000000\nREPLY big")
            assert "stopped: this turn reached [budget] per_turn_usd ($0.50)" in cut.text
            [next_one] = await app.handle_message("@vorenus REPLY next")
            assert next_one.text.endswith("next")
            totals = await app.engine.praetorium.records.usage_totals()
            spent = totals["vorenus"].cost_usd
            assert spent > 3
            page = "\n".join(await Admin(app).run("/usage"))
            assert f"vorenus · {PINNED_MODEL}: ${spent:,.2f} (2 turns" in page
        finally:
            await app.close()


async def test_turns_still_running_count_so_parallel_turns_at_the_limit_cannot_all_start(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    """``@all`` a few cents under the daily limit: the first turn sets aside what a turn
    of its agent costs (vorenus's are expensive), so the second is held, not run past it."""
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli, "[budget]\ndaily_usd = 100"))
    try:
        await app.handle_message(f"@vorenus {BIG}")
        spent = sum(
            t.cost_usd for t in (await app.engine.praetorium.records.usage_totals()).values()
        )
        app.engine.config.budget.daily_usd = spent + 0.08  # room for one small turn, not two
        replies = await app.handle_message("@all SLEEP 0.3\nREPLY both?")
        kinds = sorted(r.kind for r in replies)
        assert kinds == ["answer", "held"], [(r.agent, r.kind, r.text) for r in replies]
        held = next(r for r in replies if r.kind == "held")
        assert "set aside for the turns running now" in held.text
        budget = app.engine.sessions.budget
        assert budget is not None and budget.reserved() == 0  # released when they ended
    finally:
        await app.close()


async def test_a_reservation_is_released_however_the_turn_ends(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli, "[budget]\ndaily_usd = 50"))
    try:
        budget = app.engine.sessions.budget
        assert budget is not None
        [failed] = await app.handle_message("@vorenus ERROR overloaded")
        assert failed.kind != "answer"
        assert budget.reserved() == 0
        turn = asyncio.create_task(app.handle_message("@pullo SLEEP 30"))
        for _ in range(200):
            if budget.reserved("pullo"):
                break
            await asyncio.sleep(0.02)
        assert budget.reserved("pullo") == pytest.approx(0.05)  # no history: the floor
        # /stop, once its turn is under way (its CLI may still be starting: it holds anyway)
        assert [s.agent for s in await app.stop(["pullo"])] == ["pullo"]
        await asyncio.wait_for(turn, 30)
        assert budget.reserved() == 0
        for _ in range(20):  # many turns: nothing piles up
            await app.handle_message("@vorenus REPLY ok")
        assert budget.reserved() == 0
    finally:
        await app.close()


async def test_per_turn_usd_caps_a_runaway_turn_by_default_and_0_means_no_cap(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    assert load_config(None).budget.per_turn_usd == 5.0
    for extra, cap in (("", "5.0"), ("[budget]\nper_turn_usd = 0", None)):
        app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli, extra))
        try:
            await app.handle_message("@vorenus REPLY hi")
        finally:
            await app.close()
        argv = fake_cli.processes()[-1].argv
        given = argv[argv.index("--max-budget-usd") + 1] if "--max-budget-usd" in argv else None
        assert given == cap, argv
