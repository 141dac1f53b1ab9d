"""The numbers in Caesar's commands: the digits 0-9 only, bounded, and a sentence naming
the command and what it takes for anything else (never "Something went wrong").

``str.isdigit`` accepts ``²`` (which ``int`` refuses: the command crashed) and ``１２`` or
``١٢`` (which ``int`` reads as 12: a grant or job Caesar never named was acted on)."""

from __future__ import annotations

import pytest

from legio.app import LegioApp
from legio.frontends.admin import Admin
from legio.frontends.console.asker import chosen
from legio.frontends.numbers import command_number, digits

SUPERSCRIPT, ARABIC_INDIC, FULLWIDTH = "²", "١٢", "１２"
ODD = [
    SUPERSCRIPT,
    ARABIC_INDIC,
    FULLWIDTH,
    "-3",
    "+3",
    "3.0",
    " 3 4",
    "1" * 13,  # past the twelve digits a number may have
    "9" * 5000,  # past what int() reads at all
    "३",  # Devanagari three
    "3\u200b",  # a zero-width space after it
]


@pytest.mark.parametrize("text", ODD)
def test_only_the_digits_0_to_9_make_a_number(text: str) -> None:
    assert digits(text) is None


def test_a_plain_number_is_read() -> None:
    assert digits("0") == 0
    assert digits("042") == 42
    assert digits("9" * 12) == 999_999_999_999
    assert digits("") is None
    assert digits("12345", max_digits=4) is None


def test_the_answer_names_the_command_and_what_it_takes() -> None:
    usage = "Use /cancel <n> with a job number from /jobs, e.g. /cancel 3."
    assert command_number("7", usage) == 7
    assert command_number("", usage) == usage
    assert command_number("soon", usage) == usage
    assert command_number("0", usage, lowest=1) == usage
    assert command_number("201", usage, highest=200) == usage
    said = command_number(SUPERSCRIPT, usage)
    assert said == f"{usage} '²' is not a number written with the digits 0-9."
    assert command_number("x" * 500, usage) == usage  # the words are not echoed back whole


@pytest.mark.parametrize("text", [*ODD, ""])
async def test_cancel_and_revoke_answer_odd_numbers_with_their_usage(
    app: LegioApp, text: str
) -> None:
    admin = Admin(app)
    [cancel] = await admin.run(f"/cancel {text}")
    assert cancel.startswith("Use /cancel <n> with a job number from /jobs, e.g. /cancel 3.")
    [revoke] = await admin.run(f"/revoke {text}")
    assert revoke.startswith("Use /revoke <id>, with an id from /approvals.")


@pytest.mark.parametrize("text", ODD)
async def test_retry_and_history_answer_odd_numbers_with_their_usage(
    app: LegioApp, text: str
) -> None:
    admin = Admin(app)
    [retry] = await admin.run(f"/retry {text}")
    assert retry.startswith("Use /retry to run every interrupted request again")
    [history] = await admin.run(f"/history {text}")
    assert history.startswith("/history takes a number from 1 to 200, e.g. /history 20.")


async def test_a_fullwidth_id_revokes_nothing(app: LegioApp) -> None:
    gate = app.engine.sessions.approvals
    assert gate is not None and gate.store is not None
    grant = await gate.store.add_grant("vorenus", "Bash(git push:*)")
    await gate.load()
    wide = chr(ord("０") + grant.id)  # the grant's number in fullwidth digits
    [answer] = await Admin(app).run(f"/revoke {wide}")
    assert answer.startswith("Use /revoke <id>")
    assert "written with the digits 0-9" in answer
    assert [g.id for g in await gate.store.grants()] == [grant.id]  # still granted


@pytest.mark.parametrize("text", [SUPERSCRIPT, FULLWIDTH[0], ARABIC_INDIC[0]])
def test_a_console_answer_in_other_digits_is_Caesars_own_words(text: str) -> None:
    assert chosen(text, ["yes", "no"]) == text
    assert chosen("1", ["yes", "no"]) == "yes"
    assert chosen("1,2", ["yes", "no"]) == "yes, no"
