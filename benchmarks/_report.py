"""Shared by the benchmarks: timing statistics, tables, and docs/performance.md sections."""

from __future__ import annotations

import os
import platform
import re
import statistics
from datetime import UTC, datetime
from pathlib import Path

PERFORMANCE_MD = Path(__file__).parents[1] / "docs" / "performance.md"


def ms_stats(samples: list[float]) -> tuple[float, float]:
    """Median and 95th percentile, in milliseconds, of durations in seconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (also readable as plain text)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def machine() -> str:
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{python}, {os.cpu_count()} cores, {platform.machine()}"


def update_section(name: str, body: str) -> None:
    """Replace (or add) the section between ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    block = f"{start}\n_Measured {stamp} on {machine()} by `make bench`._\n\n{body}\n{end}"
    text = (
        PERFORMANCE_MD.read_text(encoding="utf-8") if PERFORMANCE_MD.exists() else "# Performance\n"
    )
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    PERFORMANCE_MD.write_text(text, encoding="utf-8")


def make_castra(root: Path, names: list[str]) -> Path:
    """A throwaway castra with a plain Legatus and the named centuriones."""
    castra = root / "castra"
    (castra / "legatus").mkdir(parents=True)
    (castra / "legatus" / "prompt.md").write_text("# Legatus\n")
    for name in names:
        (castra / "centuriones" / name).mkdir(parents=True)
        (castra / "centuriones" / name / "prompt.md").write_text(f"# {name}\n")
    return castra
