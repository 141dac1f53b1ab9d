"""The test runners' own counts, read from sample outputs of each runner (as a check's
output would carry them: colours, several runs, noise around)."""

from __future__ import annotations

from pathlib import Path

import pytest

from legio.projects.checkoutput import TAIL_LINES, CheckOutput
from legio.projects.checks import READ_CHUNK
from legio.projects.tally import Tally, TallyReader


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
        "go test",
        "ok  \tgithub.com/x/a\t0.012s\n--- FAIL: TestB (0.00s)\nFAIL\tgithub.com/x/b\t0.020s\n"
        "ok  \tgithub.com/x/c\t(cached)\n?   \tgithub.com/x/d\t[no test files]\nFAIL\n",
        Tally(2, 1, 3, 0, "packages", "go"),
    ),
    (
        "go test -v",
        "=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n"
        "    --- PASS: TestB/sub (0.00s)\n"
        "--- FAIL: TestB (0.00s)\n--- SKIP: TestC (0.00s)\nFAIL\nFAIL\tx\t0.1s\n",
        Tally(1, 1, 3, 1, "tests", "go"),
    ),
    (
        "cargo test, two crates",
        "running 6 tests\ntest result: ok. 5 passed; 0 failed; 1 ignored; 0 measured; 0 filtered "
        "out; finished in 0.00s\n\ntest result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured;"
        " 0 filtered out; finished in 0.01s\n",
        Tally(8, 2, 11, 1, "tests", "cargo"),
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
        Tally(6, 1, 7, 0, "tests", "pytest+jest"),
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
    assert output.tally.result() == Tally(12, 2, 14, 0, "tests", "unittest+pytest")
    assert output.lines == stream.count(b"\n")
    lines = output.tail.split("\n")
    assert len(lines) == TAIL_LINES and lines[-11] == "last words"
    assert lines[-12].startswith("xxx") and lines[-12].endswith(" …")
    assert lines[-13] == "== 2 failed, 5 passed in 0.9s =="
    assert output.cut and (tmp_path / "check.log").stat().st_size < 1024 * 1024 + 1024
