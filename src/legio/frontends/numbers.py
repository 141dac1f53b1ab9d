"""The numbers in Caesar's commands, answers and buttons: the digits 0-9 only, bounded.

``str.isdigit`` says yes to ``²``, ``١٢`` (Arabic-Indic) and ``１２`` (fullwidth); ``int``
refuses the first (a command crashed with "Something went wrong") and reads the others as
12 (a job or grant Caesar never wrote was acted on). ``digits`` reads 1 to ``MAX_DIGITS``
of 0-9 and nothing else, so ``int`` never sees a string it refuses or a huge one.
``command_number`` is the one parser of a command's number: the value, or the command's
own usage sentence (naming it and what it takes), with a word on digits other than 0-9.
"""

from __future__ import annotations

MAX_DIGITS = 12  # ids and counts: far past any row Legio will have
SHOWN = 20  # characters of a bad argument echoed back


def digits(text: str, max_digits: int = MAX_DIGITS) -> int | None:
    """``text`` as a number when it is 1 to ``max_digits`` of the digits 0-9 alone."""
    if 0 < len(text) <= max_digits and all("0" <= c <= "9" for c in text):
        return int(text)
    return None


def command_number(
    args: str, usage: str, *, lowest: int = 0, highest: int | None = None
) -> int | str:
    """A command's number from its argument, in ``lowest``..``highest``; else ``usage``
    (the sentence naming the command and what it takes), saying so when the argument
    holds digits other than 0-9."""
    value = digits(args)
    if value is not None and value >= lowest and (highest is None or value <= highest):
        return value
    if any(c.isdigit() and not "0" <= c <= "9" for c in args[:SHOWN]):
        return f"{usage} {args[:SHOWN]!r} is not a number written with the digits 0-9."
    return usage
