"""Operations benchmark: a backup of a 1-million-message praetorium while messages keep
flowing, and an export of that history.

- The praetorium is bulk-loaded like ``bench_praetorium`` (cached in
  ``/tmp/legio-bench-operations/`` for the next run: ~1-2 minutes to build once).
- A writer posts nuntii through the real ``Praetorium`` every ``PACE_S`` (a steady
  flow), first alone (the baseline), then while ``make_backup`` writes the archive in a
  thread; each post's latency is recorded: p50 / p99, and the added latency.
- The same with the praetorium copied in steps of ``STEP_PAGES`` pages (the stepped
  backup SQLite offers), to show why Legio copies it in one WAL snapshot: every write by
  the daemon's connection restarts a stepped copy (counted), which then never finishes.
- Export of the whole history in each format in a fresh process: time, and peak memory
  (``VmHWM``) above that process's baseline after opening (imports and connection).

Prints a table and writes it into docs/performance.md. No pass/fail.
``BENCH_OPS_SIZE=100000`` picks another size.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _report import table, update_section
from bench_praetorium import build, vocabulary

from legio.config import load_config
from legio.operations.backup import BackupError, make_backup
from legio.store.migrations import MIGRATIONS
from legio.store.praetorium import Praetorium

SIZE = int(os.environ.get("BENCH_OPS_SIZE", "1000000"))
CACHE = Path("/tmp/legio-bench-operations")
PACE_S = 0.01  # a message every 10 ms while measuring
BASELINE_POSTS = 500
STEP_PAGES = 1024
STEPPED_LIMIT_S = 30.0


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def cached_praetorium() -> Path:
    """The bulk-loaded praetorium, built once per size and schema."""
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"p{SIZE}-schema{len(MIGRATIONS)}.db"
    if not path.exists():
        t = time.perf_counter()
        part = path.with_suffix(".part")
        part.unlink(missing_ok=True)
        build(part, SIZE, vocabulary(random.Random(7)))
        part.rename(path)
        print(f"built {SIZE:,} nuntii in {time.perf_counter() - t:.0f} s", flush=True)
    return path


async def flow(store: Praetorium, until: asyncio.Event | None, count: int) -> list[float]:
    """Post a message every PACE_S until ``until`` is set (or ``count`` posts)."""
    samples: list[float] = []
    while (until is not None and not until.is_set()) or (until is None and len(samples) < count):
        t = time.perf_counter()
        await store.post("caesar", f"flowing {len(samples)}", ["legatus"])
        samples.append(time.perf_counter() - t)
        await asyncio.sleep(PACE_S)
    return samples


async def backup_under_flow(root: Path) -> dict[str, object]:
    config = load_config(root / "legio.toml")
    store = await Praetorium.open(root / "castra" / "praetorium.db")
    try:
        alone = await flow(store, None, BASELINE_POSTS)
        done = asyncio.Event()
        writer = asyncio.create_task(flow(store, done, 0))
        t = time.perf_counter()
        result = await asyncio.to_thread(make_backup, config, root / "backups")
        seconds = time.perf_counter() - t
        done.set()
        during = await writer

        restarts = [0]
        last_remaining = [None]

        def progress(status: int, remaining: int, total: int) -> None:
            if last_remaining[0] is not None and remaining > last_remaining[0]:
                restarts[0] += 1
            last_remaining[0] = remaining
            if time.perf_counter() - started > STEPPED_LIMIT_S:
                raise TimeoutError

        done = asyncio.Event()
        writer = asyncio.create_task(flow(store, done, 0))
        started = time.perf_counter()
        stepped = root / "stepped.db"
        try:
            await asyncio.to_thread(_stepped, root, stepped, progress)
            stepped_result = f"finished in {time.perf_counter() - started:.1f} s"
        except (BackupError, TimeoutError):
            stepped_result = f"not finished after {STEPPED_LIMIT_S:.0f} s"
        done.set()
        stepped_posts = await writer
    finally:
        await store.close()
    return {
        "alone": alone,
        "during": during,
        "seconds": seconds,
        "archive": result.size,
        "db": (root / "castra" / "praetorium.db").stat().st_size,
        "stepped": f"{stepped_result}, {restarts[0]} restarts ({len(stepped_posts)} posts)",
    }


def _stepped(root: Path, target: Path, progress: object) -> None:
    import sqlite3

    src = sqlite3.connect(root / "castra" / "praetorium.db")
    dst = sqlite3.connect(target)
    try:
        src.backup(dst, pages=STEP_PAGES, progress=progress)  # type: ignore[arg-type]
    except Exception as e:
        raise BackupError(str(e)) from e
    finally:
        dst.close()
        src.close()


EXPORT_CHILD = """
import sys, time, tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from legio.operations.export import ExportSpec, export_history, open_reader
def rss(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
open_reader(Path(sys.argv[1])).close()
base = rss("VmRSS:")
if len(sys.argv) > 4:
    tracemalloc.start()
t = time.perf_counter()
r = export_history(Path(sys.argv[1]), Path(sys.argv[2]), ExportSpec(sys.argv[3]), datetime.now(UTC))
took = time.perf_counter() - t
peak = tracemalloc.get_traced_memory()[1] if len(sys.argv) > 4 else rss("VmHWM:") - base
print(took, peak, r.nuntii, r.size)
"""


def export_run(db: Path, out: Path, fmt: str, *trace: str) -> tuple[float, int, int, int]:
    line = subprocess.run(
        [sys.executable, "-c", EXPORT_CHILD, str(db), str(out), fmt, *trace],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    out.unlink(missing_ok=True)
    return float(line[0]), int(line[1]), int(line[2]), int(line[3])


def main() -> None:
    source = cached_praetorium()
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        root = Path(tmp)
        (root / "castra" / "legatus").mkdir(parents=True)
        (root / "castra" / "legatus" / "prompt.md").write_text("# Legatus\n")
        (root / "legio.toml").write_text('castra = "castra"\n')
        shutil.copyfile(source, root / "castra" / "praetorium.db")
        figures = asyncio.run(backup_under_flow(root))
        exports = {
            fmt: export_run(root / "castra" / "praetorium.db", root / f"out.{fmt}", fmt)
            for fmt in ("md", "html", "json")
        }
        traced = export_run(root / "castra" / "praetorium.db", root / "out.md", "md", "trace")
    alone, during = figures["alone"], figures["during"]
    assert isinstance(alone, list) and isinstance(during, list)
    backup_rows = [
        [
            "post() alone, a message every 10 ms",
            f"{pct(alone, 0.5):.2f}",
            f"{pct(alone, 0.99):.2f}",
            str(len(alone)),
        ],
        [
            "post() during the backup",
            f"{pct(during, 0.5):.2f}",
            f"{pct(during, 0.99):.2f}",
            str(len(during)),
        ],
    ]
    backup = table(["writes", "p50 ms", "p99 ms", "posts"], backup_rows)
    added = pct(during, 0.99) - pct(alone, 0.99)
    export_rows = [
        [fmt, f"{s:.1f}", f"{peak / 1e6:.1f}", f"{n:,}", f"{size / 1e6:.0f}"]
        for fmt, (s, peak, n, size) in exports.items()
    ]
    export = table(
        ["format", "seconds", "peak MB above baseline", "nuntii", "file MB"], export_rows
    )
    body = (
        f"{SIZE:,} nuntii; the praetorium file {int(figures['db']) / 1e6:.0f} MB "  # type: ignore[call-overload]
        f"(FTS and participants included).\n\n"
        f"Backup (`make_backup`, one WAL snapshot by the online backup API, then tar.gz "
        f"level 3): **{float(figures['seconds']):.1f} s**, archive "  # type: ignore[arg-type]
        f"{int(figures['archive']) / 1e6:.0f} MB. Writes meanwhile:\n\n{backup}\n\n"  # type: ignore[call-overload]
        f"- Added latency at p99: **{added:+.2f} ms** (target < 20 ms).\n"
        f"- The same copy in steps of {STEP_PAGES} pages while the writer posts: "
        f"{figures['stepped']}: each write by another connection restarts a stepped "
        "copy, which is why Legio copies in one snapshot (in WAL mode a reader never "
        "blocks the writer).\n\n"
        f"Export of the whole history (a fresh process; peak = `VmHWM` − `VmRSS` after "
        f"imports and opening):\n\n{export}\n\n"
        f"- The same Markdown export under `tracemalloc` (every Python allocation "
        f"traced, as the test does): peak **{traced[1] / 1e6:.1f} MB**, in "
        f"{traced[0]:.1f} s (tracing slows it).\n"
        "- Target: peak memory under 100 MB above the baseline, whatever the history's size.\n"
    )
    print()
    print(body)
    update_section("bench_operations", "## Operations (`bench_operations.py`)\n\n" + body)


if __name__ == "__main__":
    main()
