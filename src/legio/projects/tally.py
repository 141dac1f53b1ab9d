"""The test runner's own count, read from a check's output line by line.

``TallyReader.feed`` takes each line as it comes (colours stripped, only its start
read), ``result`` says what was found: ONE runner's final summary, the last summary
line the output held — pytest's (``3 failed, 209 passed in 38.1s``, with ``-q`` or
without), unittest's ``Ran 212 tests`` and ``OK`` / ``FAILED (failures=2, errors=1)``,
cargo's ``test result: ok. 5 passed; 1 failed; …`` (the last crate's), jest's ``Tests: 3
failed, 209 passed, 212 total`` and vitest's ``Tests  3 failed | 209 passed (212)``.
Never a sum across runners or lines: the check's own program prints these lines, so a
count is the project's word, shown only where the exit code agrees with it
(``legio.frontends.checkviews``). go test prints no summary of its own: its check shows
the exit code alone. Nothing found: None.

Every line is read in one pass of string methods (no pattern that backtracks: a line
built to make one, ``passed in 1s`` then hundreds of spaces, costs what any line does),
and at most ``READ`` characters of it.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

# colour codes and carriage returns; an OSC title ends at BEL, never scanning past the
# next escape (a line of unterminated ``ESC ]`` stays linear)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*\x07|\r")
READ = 400  # characters of a line looked at
# a line without one of these holds no count: not decoded, not read
HINT = re.compile(rb"passed|failed|error|skipped|no tests ran|Ran |OK|FAIL|Tests")

PYTEST_WORDS = {
    "passed": "passed",
    "failed": "failed",
    "error": "errors",
    "errors": "errors",
    "skipped": "skipped",
    "xfailed": "xfailed",
    "xpassed": "xpassed",
    "deselected": "deselected",
    "warning": "warnings",
    "warnings": "warnings",
    "rerun": "rerun",
}


@dataclass(frozen=True)
class Tally:
    """A runner's count: ``failed`` includes errors; ``total`` every test it counted
    (passed, failed, skipped…); ``unit`` is "tests"."""

    passed: int
    failed: int
    total: int
    skipped: int = 0
    unit: str = "tests"
    runner: str = ""


def _number(word: str) -> int | None:
    return int(word) if word.isascii() and word.isdigit() and len(word) <= 12 else None


def _seconds(word: str) -> bool:
    """``38.12s``: a time as pytest and unittest print it."""
    body = word[:-1]
    return word.endswith("s") and bool(body) and body.replace(".", "", 1).isdigit()


def _pairs(words: list[str]) -> dict[str, int]:
    """``3 failed, 209 passed`` as {word: number} (a word's trailing punctuation dropped;
    the same word twice: its last number)."""
    found: dict[str, int] = {}
    for number, word in itertools.pairwise(words):
        n = _number(number)
        if n is not None:
            found[word.rstrip(",;|")] = n
    return found


def pytest_summary(text: str) -> Tally | None:
    """pytest's last line: ``== 3 failed, 209 passed, 1 warning in 38.12s (0:00:38) ==``."""
    words = text.strip().strip("=").split()
    if words and words[-1].startswith("(") and words[-1].endswith(")"):
        if not words[-1][1:-1].replace(":", "").isdigit():
            return None
        words.pop()
    if len(words) < 3 or words[-2] != "in" or not _seconds(words[-1]):
        return None
    words = words[:-2]
    n: dict[str, int] = {}
    for word, count in _pairs(words).items():
        if word in PYTEST_WORDS:
            n[PYTEST_WORDS[word]] = count
    if not n and " ".join(words[-3:]) != "no tests ran":
        return None
    failed = n.get("failed", 0) + n.get("errors", 0)
    passed = n.get("passed", 0) + n.get("xpassed", 0)
    skipped = n.get("skipped", 0) + n.get("xfailed", 0)
    return Tally(passed, failed, passed + failed + skipped, skipped, runner="pytest")


def unittest_ran(text: str) -> int | None:
    """unittest's ``Ran 212 tests in 1.234s``: its number, else None."""
    words = text.split()
    if len(words) != 5 or not text.startswith("Ran ") or words[2] not in ("test", "tests"):
        return None
    return _number(words[1]) if words[3] == "in" and _seconds(words[4]) else None


def unittest_end(text: str, ran: int) -> Tally | None:
    """unittest's ``OK`` / ``FAILED (failures=2, errors=1, skipped=4)`` after ``Ran``."""
    line = text.rstrip()
    word, _, rest = line.partition(" ")
    if word not in ("OK", "FAILED") or (rest and not (rest[:1] == "(" and rest[-1:] == ")")):
        return None
    found: dict[str, int] = {}
    for item in rest[1:-1].split(","):
        key, _, value = item.partition("=")
        number = _number(value.strip())
        if number is not None:
            found[key.strip()] = number
    failed = found.get("failures", 0) + found.get("errors", 0)
    failed += found.get("unexpected successes", 0)
    skipped = found.get("skipped", 0)
    passed = max(ran - failed - skipped, 0)
    return Tally(passed, failed, ran, skipped, runner="unittest")


def cargo_summary(text: str) -> Tally | None:
    """cargo's ``test result: ok. 5 passed; 1 failed; 1 ignored; 0 measured; …``."""
    for start in ("test result: ok. ", "test result: FAILED. "):
        if text.startswith(start):
            n = _pairs(text[len(start) :].split())
            if not {"passed", "failed", "ignored"} <= n.keys():
                return None
            passed, failed, ignored = n["passed"], n["failed"], n["ignored"]
            return Tally(passed, failed, passed + failed + ignored, ignored, runner="cargo")
    return None


def js_summary(text: str) -> Tally | None:
    """jest's ``Tests:       3 failed, 1 skipped, 208 passed, 212 total``; vitest's
    ``      Tests  3 failed | 209 passed (212)``."""
    line = text.strip()
    if text.startswith("Tests:") and line.endswith(" total"):
        runner, n = "jest", _pairs(line[6:].split())
        total = n.get("total")
    elif line.startswith("Tests") and line[5:7].isspace() and line.endswith(")"):
        runner, words = "vitest", line[5:].split()
        last = words.pop() if words else ""
        total = _number(last[1:-1]) if last.startswith("(") else None
        n = _pairs(words)
    else:
        return None
    if total is None or not n.keys() & {"passed", "failed", "skipped", "todo"}:
        return None
    skipped = n.get("skipped", 0) + n.get("todo", 0)
    return Tally(n.get("passed", 0), n.get("failed", 0), total, skipped, runner=runner)


class TallyReader:
    """Feed it a check's output, line by line; ``result`` is the last summary found."""

    def __init__(self) -> None:
        self.last: Tally | None = None
        self._ran: int | None = None  # unittest: "Ran N tests" waiting for OK / FAILED

    @property
    def waiting(self) -> bool:
        """Whether unittest's ``Ran N tests`` waits for its ``OK`` / ``FAILED`` line: the
        next line that is not blank must be fed, whatever it holds."""
        return self._ran is not None

    def wants(self, raw: bytes) -> bool:
        """Whether a line (as bytes) may matter: it may hold a count, or it may be the
        ``OK`` / ``FAILED`` line unittest's ``Ran N tests`` waits for."""
        return self._ran is not None or HINT.search(raw, 0, READ * 2) is not None

    def feed(self, line: str) -> None:
        """Read one line of output (its first ``READ`` characters, colours stripped)."""
        text = ANSI.sub("", line[: READ * 2])[:READ].rstrip("\n")
        if self._ran is not None:
            if not text.strip():
                return  # unittest leaves a blank line before OK / FAILED
            waited, self._ran = self._ran, None
            found = unittest_end(text, waited)
            if found is not None:
                self.last = found
                return
        ran = unittest_ran(text)
        if ran is not None:
            self._ran = ran
            return
        found = cargo_summary(text) or pytest_summary(text) or js_summary(text)
        if found is not None:
            self.last = found

    def result(self) -> Tally | None:
        """The last runner's final summary, or None if no summary line was seen."""
        return self.last
