"""The test runner's own count, read from a check's output line by line.

``TallyReader.feed`` takes each line as it comes (colours stripped, only its start
read), ``result`` says what was found: pytest's summary (``3 failed, 209 passed in
38.1s``, with ``-q`` or without), unittest's ``Ran 212 tests`` and ``OK`` /
``FAILED (failures=2, errors=1)``, go test's ``--- PASS``/``--- FAIL`` lines (with
``-v``; else its ``ok``/``FAIL`` lines per package), cargo's ``test result: ok. 5
passed; 1 failed; …`` (one per crate, summed), jest's ``Tests: 3 failed, 209 passed, 212
total`` and vitest's ``Tests  3 failed | 209 passed (212)``. A check that runs several
runners gets their counts summed (tests with tests; packages only when nothing counted
tests). Nothing found: None, and the card shows the exit code alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
READ = 400  # characters of a line looked at

PYTEST_TAIL = re.compile(r"(?:^|\s)(?:in [\d.]+s(?: \([\d:]+\))?)\s*=*\s*$")
PYTEST_WORD = re.compile(
    r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)\b"
)
UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*$")
UNITTEST_END = re.compile(r"^(OK|FAILED)\b(?: \((.*)\))?\s*$")
GO_TEST = re.compile(r"^--- (PASS|FAIL|SKIP): \S")
GO_PACKAGE = re.compile(r"^(ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\)|\[)")
CARGO = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored(?:; (\d+) measured)?"
)
JEST = re.compile(r"^Tests:\s+(.*\d+ total)\s*$")
VITEST = re.compile(r"^\s*Tests\s{2,}(.*\(\d+\))\s*$")
COUNT_WORD = re.compile(r"(\d+) (passed|failed|skipped|todo|total)\b")
# a line without one of these holds no count: not decoded, not read
HINT = re.compile(rb"passed|failed|error|skipped|no tests ran|Ran |OK|ok|FAIL|PASS|SKIP|Tests")


@dataclass(frozen=True)
class Tally:
    """A runner's count: ``failed`` includes errors; ``total`` every test it counted
    (passed, failed, skipped…); ``unit`` is "tests", or "packages" (go test without -v)."""

    passed: int
    failed: int
    total: int
    skipped: int = 0
    unit: str = "tests"
    runner: str = ""


@dataclass
class _Count:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    total: int = 0
    seen: bool = False
    verbose: bool = False  # go test -v: its passing tests are listed too

    def add(self, passed: int, failed: int, skipped: int = 0, total: int | None = None) -> None:
        self.passed += passed
        self.failed += failed
        self.skipped += skipped
        self.total += passed + failed + skipped if total is None else total
        self.seen = True


@dataclass
class TallyReader:
    """Feed it a check's output, line by line; ``result`` is the count found, or None."""

    counts: dict[str, _Count] = field(default_factory=dict)
    _ran: int | None = None  # unittest: "Ran N tests" waiting for its OK / FAILED line

    def _count(self, runner: str) -> _Count:
        return self.counts.setdefault(runner, _Count())

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
        if self._ran is not None and self._unittest_end(text):
            return
        ran = UNITTEST_RAN.match(text)
        if ran:
            self._ran = int(ran.group(1))
            return
        if self._cargo(text) or self._pytest(text) or self._go(text):
            return
        self._js(text)

    def _unittest_end(self, text: str) -> bool:
        if not text.strip():
            return False  # unittest leaves a blank line before OK / FAILED
        ran, self._ran = self._ran or 0, None
        end = UNITTEST_END.match(text)
        if not end:
            return False
        found = {k.strip(): int(v) for k, v in re.findall(r"(\w+)=(\d+)", end.group(2) or "")}
        failed = found.get("failures", 0) + found.get("errors", 0)
        failed += found.get("unexpected successes", 0)
        skipped = found.get("skipped", 0)
        passed = max(ran - failed - skipped, 0)
        self._count("unittest").add(passed, failed, skipped, total=ran)
        return True

    def _pytest(self, text: str) -> bool:
        if not PYTEST_TAIL.search(text):
            return False
        words = PYTEST_WORD.findall(text)
        if not words and "no tests ran" not in text:
            return False
        n: dict[str, int] = {}
        for number, word in words:
            key = {"error": "errors", "warning": "warnings"}.get(word, word)
            n[key] = n.get(key, 0) + int(number)
        failed = n.get("failed", 0) + n.get("errors", 0)
        passed = n.get("passed", 0) + n.get("xpassed", 0)
        skipped = n.get("skipped", 0) + n.get("xfailed", 0)
        self._count("pytest").add(passed, failed, skipped)
        return True

    def _cargo(self, text: str) -> bool:
        found = CARGO.match(text)
        if not found:
            return False
        passed, failed, ignored = (int(found.group(i)) for i in (1, 2, 3))
        self._count("cargo").add(passed, failed, ignored)
        return True

    def _go(self, text: str) -> bool:
        test = GO_TEST.match(text)
        if test:
            kind = test.group(1)
            self._count("go").add(kind == "PASS", kind == "FAIL", kind == "SKIP")
            if kind == "PASS":
                self._count("go").verbose = True
            return True
        package = GO_PACKAGE.match(text)
        if package:
            self._count("go packages").add(package.group(1) == "ok", package.group(1) == "FAIL")
            return True
        return False

    def _js(self, text: str) -> None:
        for runner, pattern in (("jest", JEST), ("vitest", VITEST)):
            found = pattern.match(text)
            if not found:
                continue
            n = {word: int(number) for number, word in COUNT_WORD.findall(found.group(1))}
            total_found = re.search(r"\((\d+)\)\s*$", found.group(1))
            total = n.get("total", int(total_found.group(1)) if total_found else None)
            skipped = n.get("skipped", 0) + n.get("todo", 0)
            self._count(runner).add(n.get("passed", 0), n.get("failed", 0), skipped, total)
            return

    def result(self) -> Tally | None:
        """The counts found, summed; None if no runner's count was seen."""
        go = self.counts.get("go")
        tests = {
            name: count
            for name, count in self.counts.items()
            if count.seen and name != "go packages" and (name != "go" or count.verbose)
        }
        unit = "tests"
        if not tests:
            packages = self.counts.get("go packages")
            if packages is None or not packages.seen:
                if go is None or not go.seen:
                    return None
                tests = {"go": go}  # only failing tests printed: better than nothing
            else:
                tests, unit = {"go": packages}, "packages"
        return Tally(
            passed=sum(c.passed for c in tests.values()),
            failed=sum(c.failed for c in tests.values()),
            total=sum(c.total for c in tests.values()),
            skipped=sum(c.skipped for c in tests.values()),
            unit=unit,
            runner="+".join(tests),
        )
