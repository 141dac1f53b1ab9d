"""The test runners' own counts, read from sample outputs of each runner (as a check's
output would carry them: colours, several runs, noise around)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from legio.projects import checkoutput, tally
from legio.projects.checkoutput import TAIL_LINES, CheckOutput
from legio.projects.checks import READ_CHUNK
from legio.projects.tally import READ, Tally, TallyReader

sre_parse: Any = getattr(re, "_parser")  # noqa: B009 (the stdlib's own parser of patterns)
sre_constants: Any = getattr(re, "_constants")  # noqa: B009
POSSESSIVE = getattr(sre_constants, "POSSESSIVE_REPEAT", object())


def read(output: str) -> Tally | None:
    reader = TallyReader()
    for line in output.splitlines():
        reader.feed(line)
    return reader.result()


SAMPLES = [
    (
        "pytest",
        "collected 214 items\n\ntests/test_a.py ..F.s\n=================== FAILURES ====\n"
        "=========== 3 failed, 209 passed, 2 skipped, 1 warning in 38.12s ============\n",
        Tally(209, 3, 214, 2, "tests", "pytest"),
    ),
    (
        "pytest -q",
        "....\n3 failed, 209 passed in 1.20s\n",
        Tally(209, 3, 212, 0, "tests", "pytest"),
    ),
    (
        "pytest in colour, with errors and a long run",
        "\x1b[31m===== \x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m210 passed\x1b[0m, "
        "\x1b[31m\x1b[1m1 error\x1b[0m\x1b[31m in 3725.01s (1:02:05)\x1b[0m\x1b[31m =====\x1b[0m\n",
        Tally(210, 2, 212, 0, "tests", "pytest"),
    ),
    (
        "pytest, nothing",
        "===== no tests ran in 0.01s =====\n",
        Tally(0, 0, 0, 0, "tests", "pytest"),
    ),
    (
        "unittest",
        "..F.\n"
        + "-" * 70
        + "\nRan 212 tests in 1.234s\n\nFAILED (failures=2, errors=1, skipped=4)\n",
        Tally(205, 3, 212, 4, "tests", "unittest"),
    ),
    (
        "unittest ok",
        "Ran 5 tests in 0.001s\n\nOK (skipped=1)\n",
        Tally(4, 0, 5, 1, "tests", "unittest"),
    ),
    (
        "cargo test, two crates",
        "running 6 tests\ntest result: ok. 5 passed; 0 failed; 1 ignored; 0 measured; 0 filtered "
        "out; finished in 0.00s\n\ntest result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured;"
        " 0 filtered out; finished in 0.01s\n",
        Tally(3, 2, 5, 0, "tests", "cargo"),  # its last summary: never a sum of lines
    ),
    (
        "jest",
        "Test Suites: 1 failed, 4 passed, 5 total\nTests:       3 failed, 1 skipped, 208 passed, "
        "212 total\nSnapshots:   0 total\nTime:        4.2 s\n",
        Tally(208, 3, 212, 1, "tests", "jest"),
    ),
    (
        "vitest",
        " \x1b[2m Test Files \x1b[22m \x1b[1m\x1b[31m1 failed\x1b[39m\x1b[22m | 3 passed (4)\n"
        "      \x1b[2mTests \x1b[22m \x1b[1m\x1b[31m3 failed\x1b[39m\x1b[22m | \x1b[1m\x1b[32m209 "
        "passed\x1b[39m\x1b[22m\x1b[90m (212)\x1b[39m\n   Duration  1.20s\n",
        Tally(209, 3, 212, 0, "tests", "vitest"),
    ),
    ("vitest ok", "      Tests  212 passed (212)\n", Tally(212, 0, 212, 0, "tests", "vitest")),
    (
        "pytest and jest in one make test",
        "2 passed in 0.10s\nTests:       1 failed, 4 passed, 5 total\n",
        Tally(4, 1, 5, 0, "tests", "jest"),  # one runner's: the last summary line
    ),
]


@pytest.mark.parametrize(
    ("output", "expected"), [s[1:] for s in SAMPLES], ids=[s[0] for s in SAMPLES]
)
def test_each_runners_count_is_read(output: str, expected: Tally) -> None:
    assert read(output) == expected


@pytest.mark.parametrize(
    "output",
    [
        "",
        "make: Nothing to be done for 'test'.\n",
        "Ran the linter in 3s\n",  # not unittest's line
        "all good in 3.0s\n",  # a time, no count
        "Ran 3 tests in 0.1s\nsomething else\n",  # no OK / FAILED after it
        "x" * 100_000 + " 3 passed in 1.0s\n",  # the count past what is read of a line
        # go prints no summary of its own: its per-package and per-test lines are not summed
        "ok  \tgithub.com/x/a\t0.012s\n--- FAIL: TestB (0.00s)\nFAIL\tgithub.com/x/b\t0.020s\n",
        "=== RUN   TestA\n--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.00s)\nFAIL\n",
        "passed in 1s" + " " * 385 + "x\n",  # the hostile line: no count, and read in a step
    ],
)
def test_output_without_a_count_gives_none(output: str) -> None:
    assert read(output) is None


def test_a_flood_of_blank_lines_leaves_the_count_and_the_tail_right(tmp_path: Path) -> None:
    """The output as the daemon reads it (64 KB chunks): counts and the last lines found
    among megabytes of blank lines, unittest's ``OK`` after blank lines too."""
    blank = b"\n" * 3_000_000
    stream = (
        blank
        + b"Ran 7 tests in 0.5s\n"
        + blank
        + b"OK\n"
        + blank
        + b"\x1b[31m== 2 failed, 5 passed in 0.9s ==\x1b[0m\n"
        + b"x" * 100_000  # a long line across chunks
        + b"\nlast words\n"
        + b"\n" * 10
    )
    output = CheckOutput(tmp_path / "check.log", 1024 * 1024)
    for at in range(0, len(stream), READ_CHUNK):
        output.write(stream[at : at + READ_CHUNK])
    output.close()
    assert output.tally.result() == Tally(5, 2, 7, 0, "tests", "pytest")
    assert output.lines == stream.count(b"\n")
    lines = output.tail.split("\n")
    assert len(lines) == TAIL_LINES and lines[-11] == "last words"
    assert lines[-12].startswith("xxx") and lines[-12].endswith(" …")
    assert lines[-13] == "== 2 failed, 5 passed in 0.9s =="
    assert output.cut and (tmp_path / "check.log").stat().st_size < 1024 * 1024 + 1024


def test_a_cargo_line_and_a_pytest_line_are_never_summed() -> None:
    """Issue 44: a cargo summary and a pytest summary made "1 failed of 5,001"; the count
    is one runner's last summary line, nothing added to it."""
    output = (
        "test result: ok. 5000 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n"
        "1 failed in 0.10s\n"
    )
    assert read(output) == Tally(0, 1, 1, 0, "tests", "pytest")
    assert read("3 passed in 0.1s\n3 passed in 0.1s\n") == Tally(3, 0, 3, 0, "tests", "pytest")


def _unbounded_in_sequence(items: Any, nested: bool = False) -> Iterator[str]:
    """Where a parsed pattern can backtrack more than linearly: two unbounded repeats in
    one sequence, or one inside another."""
    found = 0
    for op, arg in items:
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, POSSESSIVE):
            _low, high, sub = arg
            if high == sre_constants.MAXREPEAT and op != POSSESSIVE:
                found += 1
                if nested:
                    yield "a repeat inside a repeat"
                yield from _unbounded_in_sequence(sub, True)
            else:
                yield from _unbounded_in_sequence(sub, nested)
        elif op == sre_constants.BRANCH:
            for branch in arg[1]:
                yield from _unbounded_in_sequence(branch, nested)
        elif op == sre_constants.SUBPATTERN:
            yield from _unbounded_in_sequence(arg[-1], nested)
    if found > 1:
        yield "two repeats in a row"


def test_the_reader_has_no_pattern_that_backtracks() -> None:
    """Issue 44: ``passed in 1s`` + 385 spaces + ``x`` made the pytest pattern backtrack
    (``\\s*=*\\s*$``: quadratic in the line, on the daemon's loop). Every pattern the
    count reader and the output reader use has at most one unbounded repeat per sequence,
    none nested: each is linear in its input."""
    patterns = [
        value
        for module in (tally, checkoutput)
        for value in vars(module).values()
        if isinstance(value, re.Pattern)
    ]
    assert patterns
    for pattern in patterns:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
        assert list(_unbounded_in_sequence(parsed.data)) == [], pattern.pattern


def test_hostile_lines_are_read_once_each(tmp_path: Path) -> None:
    """The output as the daemon reads it: hostile lines cost one read each (bounded at
    ``READ`` characters) and give no count; the real summary after them is still found."""
    hostile = ("passed in 1s" + " " * 385 + "x\n").encode() * 2000
    output = CheckOutput(tmp_path / "check.log", 1024 * 1024)
    fed: list[int] = []
    feed = output.tally.feed
    output.tally.feed = lambda line: (fed.append(len(line)), feed(line))[1]  # type: ignore[method-assign]
    stream = hostile + b"4 passed in 0.2s\n"
    for at in range(0, len(stream), READ_CHUNK):
        output.write(stream[at : at + READ_CHUNK])
    output.close()
    assert output.tally.result() == Tally(4, 0, 4, 0, "tests", "pytest")
    assert len(fed) == 2001 and max(fed) <= 2 * READ
