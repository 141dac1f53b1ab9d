"""Model and effort per request and per session: ``@vorenus:opus``, ``/model``, ``/effort``
(legio.sessions.choices), through the real SDK on the fake CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from legio.app import LegioApp
from legio.errors import LegioError
from legio.frontends.admin import Admin
from tests.conftest import FakeCli
from tests.legion import fake_cli_config, rendered


def set_models(fake_cli: FakeCli) -> list[str | None]:
    """Every set_model control request the agents' CLIs received, in order."""
    return [
        m["request"].get("model")
        for p in fake_cli.processes()
        for m in p.received
        if m.get("type") == "control_request" and m["request"].get("subtype") == "set_model"
    ]


def models_answered(fake_cli: FakeCli) -> list[str]:
    """The model each of the fake CLI's answers said it was written by."""
    return [
        m["message"]["model"]
        for p in fake_cli.processes()
        for m in p.sent
        if m.get("type") == "assistant"
    ]


async def turn_rows(app: LegioApp) -> list[Any]:
    db = app.engine.praetorium.connection
    async with db.execute("SELECT model, cost_usd, output_tokens FROM turns ORDER BY id") as c:
        return list(await c.fetchall())


async def test_one_request_runs_on_its_model_then_the_agent_goes_back(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli, 'model = "sonnet"'))
    try:
        [first] = await app.handle_message("@vorenus\nUSAGE 1000 0 0 1000\nREPLY one")
        [second] = await app.handle_message("@vorenus:opus\nUSAGE 1000 0 0 1000\nREPLY two")
        [third] = await app.handle_message("@vorenus\nUSAGE 1000 0 0 1000\nREPLY three")
        assert [first.text, second.text, third.text] == ["one", "two", "three"]
        [process] = fake_cli.processes()  # one CLI: switched by control requests
        assert process.option("--model") == "sonnet"
        assert set_models(fake_cli) == ["opus", "sonnet"]  # for one turn, then back
        assert models_answered(fake_cli) == ["sonnet", "opus", "sonnet"]
        assert "⚔️ vorenus · opus" in rendered(app, second)  # the answer's header says so
        assert "⚔️ vorenus · sonnet" in rendered(app, third)
        # spent at each model's price (the CLI's own count), recorded under that model
        rows = await turn_rows(app)
        assert [r["model"] for r in rows] == ["sonnet", "opus", "sonnet"]
        assert rows[1]["cost_usd"] > rows[0]["cost_usd"] * 1.5
        page = "\n".join(await Admin(app).run("/usage"))
        assert "vorenus · opus" in page and "vorenus · sonnet" in page
        status = "\n".join(await Admin(app).run("/status"))
        assert "model: sonnet" in status  # its live CLI's, back from opus
    finally:
        await app.close()


async def test_back_from_a_one_request_model_names_the_default_explicitly(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    """No model configured: the CLI's own default. Coming back from @pullo:haiku must set
    one explicitly (set_model(None) would not restore it: PROTOCOLS.md)."""
    await app.handle_message("@pullo:haiku REPLY quick")
    await app.handle_message("@pullo REPLY thorough")
    [process] = fake_cli.processes()
    assert process.option("--model") == "haiku"
    assert set_models(fake_cli) == ["opus"]


async def test_the_legatus_too_and_unknown_names_are_refused_with_the_list(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    [reply] = await app.handle_message("@legatus:haiku\nREPLY brief")
    assert reply.agent == "legatus" and reply.text == "brief"
    assert [p.option("--model") for p in fake_cli.processes()] == ["haiku"]

    [refused] = await app.handle_message("@vorenus:gpt5 REPLY hi")
    assert refused.kind == "notice"
    assert "No model named 'gpt5'. Known models: opus, sonnet, haiku" in refused.text
    assert len(fake_cli.processes()) == 1  # nothing ran
    [page] = await Admin(app).run("/model vorenus gpt5")
    assert page.startswith("No model named 'gpt5'. Known models: opus, sonnet, haiku")
    [page] = await Admin(app).run("/effort vorenus extreme")
    assert "low|medium|high|default" in page


async def test_model_and_effort_for_a_session_survive_a_restart(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    config = fake_cli_config(castra_dir, fake_cli)
    app = await LegioApp.open(config)
    try:
        [said] = await Admin(app).run("/model vorenus haiku")
        assert said.startswith("vorenus's model is now haiku")
        await app.handle_message("@vorenus REPLY one")
        [said] = await Admin(app).run("/effort vorenus low")
        assert said.startswith("vorenus's effort is now low")
        await app.handle_message("@vorenus REPLY two")  # its CLI restarts, same session
        first, second = fake_cli.processes()
        assert first.option("--effort") is None and second.option("--effort") == "low"
        assert second.resumed and second.session_id == first.session_id
    finally:
        await app.close()
    app = await LegioApp.open(config)  # a restart: the choices stay
    try:
        status = "\n".join(await Admin(app).run("/status"))
        assert "model: haiku · effort low" in status
        await app.handle_message("@vorenus REPLY three")
        last = fake_cli.processes()[-1]
        assert (last.option("--model"), last.option("--effort")) == ("haiku", "low")
        [said] = await Admin(app).run("/model vorenus default")
        assert said == "vorenus is back on its default model."
        await app.handle_message("@vorenus REPLY four")
        assert set_models(fake_cli)[-1] == "opus"  # set explicitly, not left on haiku
    finally:
        await app.close()


async def test_would_this_fit_is_priced_at_the_requests_model(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    """A cheap model still fits under the day's limit where an expensive one would not."""
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli, "[budget]\ndaily_usd = 5"))
    try:
        await app.handle_message("@vorenus\nUSAGE 2000 0 0 1000\nREPLY first")
        budget = app.engine.sessions.budget
        assert budget is not None
        [row] = await app.engine.praetorium.records.usage_since(budget.day_start())
        per_turn_in, per_turn_out = row.input_tokens, row.output_tokens
        opus = (per_turn_in * 5 + per_turn_out * 25) / 1e6
        haiku = (per_turn_in * 1 + per_turn_out * 5) / 1e6
        assert haiku < opus < 0.05  # both under the floor a turn is otherwise reckoned at
        app.engine.config.budget.daily_usd = row.cost_usd + (haiku + opus) / 2
        [held] = await app.handle_message("@vorenus:opus\nREPLY big")
        assert held.kind == "held"
        [fits] = await app.handle_message("@vorenus:haiku\nREPLY small")
        assert (fits.kind, fits.text) == ("answer", "small")
    finally:
        await app.close()


async def test_a_models_table_replaces_the_defaults(castra_dir: Path, fake_cli: FakeCli) -> None:
    table = '[models.fast]\nid = "claude-haiku-4-5"\ninput_usd = 1\noutput_usd = 5\n'
    app = await LegioApp.open(fake_cli_config(castra_dir, fake_cli, table))
    try:
        [reply] = await app.handle_message("@vorenus:fast\nREPLY quick")
        assert reply.text == "quick" and reply.model == "fast"
        assert fake_cli.processes()[0].option("--model") == "claude-haiku-4-5"
        [refused] = await app.handle_message("@vorenus:opus\nREPLY deep")
        assert "Known models: fast " in refused.text
    finally:
        await app.close()


def test_a_model_name_must_be_a_short_word(castra_dir: Path, fake_cli: FakeCli) -> None:
    bad = '[models."two words"]\nid = "x"\ninput_usd = 1\noutput_usd = 1\n'
    with pytest.raises(LegioError, match="model names are short words"):
        fake_cli_config(castra_dir, fake_cli, bad)
