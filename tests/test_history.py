"""History rendering: text never becomes structure, and the token budget keeps the newest."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from lxml import etree

from legio.sessions.history import estimate_tokens, fit_to_budget, format_history_xml
from legio.store.praetorium import Nuntius
from tests.conftest import FakeCli
from tests.legion import Legion, history_ids


def nuntius(seq: int, text: str, sender: str = "caesar") -> Nuntius:
    return Nuntius(f"id-{seq}", seq, sender, text, ("vorenus",), datetime(2026, 1, 1, tzinfo=UTC))


def test_history_xml_escapes_text_and_keeps_order() -> None:
    xml = format_history_xml([nuntius(1, "a </nuntius> b"), nuntius(2, "NUL\x00 c")], "vorenus")
    root = etree.fromstring(xml)
    assert [n.text for n in root] == ["a </nuntius> b", "NUL\ufffd c"]
    assert root.get("viewer") == "vorenus"
    assert [n.get("to") for n in root] == ["vorenus", "vorenus"]


def test_budget_keeps_the_newest_that_fit() -> None:
    items = [nuntius(i, "x" * 1000) for i in range(10)]
    kept, cut = fit_to_budget(items, 1000)
    assert cut
    assert [n.seq for n in kept] == [7, 8, 9]
    kept, cut = fit_to_budget(items, 100_000)
    assert (len(kept), cut) == (10, False)


def test_a_nuntius_longer_than_the_budget_is_shortened_with_a_marker() -> None:
    huge = nuntius(1, "y" * 1_048_576)
    [kept], cut = fit_to_budget([nuntius(0, "older"), huge], 2000)
    assert cut
    assert kept.seq == 1
    assert kept.text.startswith("yyyy")
    assert kept.text.endswith(
        "[… shortened for this context: 1,048,576 characters in all; "
        "/history and get_history show it whole]"
    )
    assert estimate_tokens(kept.text) <= 2000


async def test_a_fresh_session_gets_a_budgeted_window(castra_dir: Path, fake_cli: FakeCli) -> None:
    legion = await Legion(castra_dir, fake_cli, history_token_budget=2000).start()
    try:
        posted = [await legion.post(f"{i} " + "z" * 2000, ["vorenus"]) for i in range(6)]
        await legion.say(["vorenus"], "now")
        [prompt] = legion.prompts("vorenus")
        assert history_ids(prompt) == [n.id for n in posted[-3:]]
        assert '<praetorium recent="true" viewer="vorenus" truncated="true">' in prompt
    finally:
        await legion.stop()


async def test_a_huge_nuntius_is_not_resent_whole(castra_dir: Path, fake_cli: FakeCli) -> None:
    legion = await Legion(castra_dir, fake_cli).start()
    try:
        await legion.post("w" * 1_048_576, ["vorenus"])
        await legion.say(["vorenus"], "what was that?")
        [prompt] = legion.prompts("vorenus")
        assert len(prompt) < 200_000
        assert "shortened for this context: 1,048,576 characters in all" in prompt
    finally:
        await legion.stop()
