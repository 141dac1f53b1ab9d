"""Praetorium benchmark: query latency against database size, and post throughput.

Builds databases of 10k, 100k and 1M nuntii over 20 centuriones with skewed
audiences (``c19`` takes part in ~1% of nuntii, ``c00`` in ~25%), then times
``get_visible_nuntii(viewer, 50)`` for the common and the rare viewer,
``get_history(50)``, ``search()``, and ``post()``; beside them, on the same data and
in the same process, the seed's approach (fetch ``limit*5`` newest rows, filter the
audience in Python) and how many of the 50 rows it actually returns for the rare
viewer. Prints a table and writes it into docs/performance.md. No pass/fail.

``BENCH_SIZES=10000,100000`` picks other sizes.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiosqlite

sys.path.insert(0, str(Path(__file__).parent))
from _report import ms_stats, table, update_section

from legio.store.praetorium import Praetorium

CENTURIONES = [f"c{i:02d}" for i in range(20)]
COMMON, RARE = "c00", "c19"
RUNS = 200
SYLLABLES = ["ca", "es", "ar", "le", "ga", "tus", "vo", "re", "nus", "pul", "lo", "ma", "xi", "mus"]


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def audience_for(rng: random.Random) -> tuple[str, list[str]]:
    """(sender, audience) with the skew described above."""
    r = rng.random()
    if r < 0.005:
        return "caesar", ["all"]
    if r < 0.01:
        return "caesar", [RARE]
    if r < 0.015:
        return RARE, ["caesar"]
    if r < 0.25:
        return "caesar", ["legatus"]
    if r < 0.40:
        return "legatus", ["caesar"]
    if r < 0.55:
        return "caesar", [COMMON] + ([rng.choice(CENTURIONES[1:19])] if rng.random() < 0.3 else [])
    if r < 0.65:
        return COMMON, ["caesar"]
    name = rng.choice(CENTURIONES[1:19])
    return (name, ["caesar"]) if rng.random() < 0.4 else ("caesar", [name])


def build(path: Path, size: int, words: list[str]) -> None:
    """Bulk-load ``size`` nuntii into a praetorium created by Praetorium.open (same schema)."""
    asyncio.run(_create(path))
    rng = random.Random(size)
    weights = [1 / (i + 1) for i in range(len(words))]  # Zipf-like word frequencies
    start = datetime(2026, 1, 1, tzinfo=UTC)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    batch = []
    for i in range(size):
        sender, audience = audience_for(rng)
        text = " ".join(rng.choices(words, weights, k=rng.randint(8, 40)))
        stamp = (start + timedelta(seconds=i)).isoformat()
        batch.append((str(uuid.uuid4()), sender, text, json.dumps(audience), stamp))
        if len(batch) == 10_000:
            db.executemany(
                "INSERT INTO nuntii (id, sender, text, audience, timestamp) VALUES (?, ?, ?, ?, ?)",
                batch,
            )
            batch.clear()
    if batch:
        db.executemany(
            "INSERT INTO nuntii (id, sender, text, audience, timestamp) VALUES (?, ?, ?, ?, ?)",
            batch,
        )
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.close()


async def _create(path: Path) -> None:
    await (await Praetorium.open(path)).close()


async def timed(fn, runs: int = RUNS) -> tuple[list[float], object]:  # type: ignore[no-untyped-def]
    samples, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = await fn()
        samples.append(time.perf_counter() - t)
    return samples, result


async def seed_visible(db: aiosqlite.Connection, viewer: str, limit: int) -> list[tuple]:  # type: ignore[type-arg]
    """The seed's get_visible_nuntii: over-fetch limit*5 newest rows, filter in Python."""
    rows = await db.execute_fetchall(
        "SELECT id, sender, text, audience, timestamp, reply_to FROM nuntii "
        "ORDER BY timestamp DESC LIMIT ?",
        (limit * 5,),
    )
    visible = []
    for row in rows:
        audience = json.loads(row[3])
        if viewer in audience or audience == ["all"]:
            visible.append(row)
            if len(visible) == limit:
                break
    return list(reversed(visible))


async def measure(path: Path, search_word: str) -> dict[str, object]:
    out: dict[str, object] = {}
    store = await Praetorium.open(path)
    seed_db = await aiosqlite.connect(path)
    try:
        for label, viewer in (("visible common", COMMON), ("visible rare", RARE)):
            samples, result = await timed(lambda v=viewer: store.get_visible_nuntii(v, 50))
            out[label] = (ms_stats(samples), len(result))  # type: ignore[arg-type]
        samples, result = await timed(lambda: store.get_history(50))
        out["history"] = (ms_stats(samples), len(result))  # type: ignore[arg-type]
        samples, result = await timed(lambda: store.search(search_word, "caesar", 10), runs=50)
        out["search (caesar)"] = (ms_stats(samples), len(result))  # type: ignore[arg-type]
        samples, result = await timed(lambda: store.search(search_word, RARE, 10), runs=50)
        out["search (rare viewer)"] = (ms_stats(samples), len(result))  # type: ignore[arg-type]
        for label, viewer in (("seed visible common", COMMON), ("seed visible rare", RARE)):
            samples, result = await timed(lambda v=viewer: seed_visible(seed_db, v, 50))
            out[label] = (ms_stats(samples), len(result))  # type: ignore[arg-type]
    finally:
        await seed_db.close()
        await store.close()
    return out


async def post_throughput(path: Path, synchronous: str, n: int = 2000) -> tuple[float, float]:
    store = await Praetorium.open(path, synchronous=synchronous)
    try:
        t = time.perf_counter()
        for i in range(n):
            await store.post("caesar", f"sequential post {i}", ["legatus"])
        sequential = n / (time.perf_counter() - t)

        async def writer(k: int) -> None:
            for i in range(n // 10):
                await store.post("caesar", f"writer {k} post {i}", [COMMON])

        t = time.perf_counter()
        await asyncio.gather(*(writer(k) for k in range(10)))
        concurrent = n / (time.perf_counter() - t)
    finally:
        await store.close()
    return sequential, concurrent


def main() -> None:
    sizes = [int(s) for s in os.environ.get("BENCH_SIZES", "10000,100000,1000000").split(",")]
    words = vocabulary(random.Random(7))
    search_word = words[40]
    results: dict[int, dict[str, object]] = {}
    throughput: dict[int, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            path = Path(tmp) / f"p{size}.db"
            t = time.perf_counter()
            build(path, size, words)
            print(f"built {size:>9,} nuntii in {time.perf_counter() - t:5.1f} s", flush=True)
            results[size] = asyncio.run(measure(path, search_word))
            throughput[size] = {
                mode: asyncio.run(post_throughput(path, mode)) for mode in ("FULL", "NORMAL")
            }
            path.unlink()

    queries = list(next(iter(results.values())))
    headers = ["query", *(f"{s:,}: median / p95 ms (rows)" for s in sizes)]
    rows = []
    for q in queries:
        cells = [q]
        for s in sizes:
            (median, p95), count = results[s][q]  # type: ignore[misc]
            cells.append(f"{median:.3f} / {p95:.3f} ({count})")
        rows.append(cells)
    latency = table(headers, rows)
    post_rows = [
        [
            f"post(), synchronous={mode}",
            *(
                f"{throughput[s][mode][0]:,.0f} seq / {throughput[s][mode][1]:,.0f} conc"
                for s in sizes
            ),
        ]
        for mode in ("FULL", "NORMAL")
    ]
    posts = table(["nuntii/s", *(f"{s:,}" for s in sizes)], post_rows)
    first, last = sizes[0], sizes[-1]
    rare_ratio = results[last]["visible rare"][0][0] / results[first]["visible rare"][0][0]  # type: ignore[index]
    seed_rare = results[last]["seed visible rare"][1]  # type: ignore[index]
    legio_rare = results[last]["visible rare"][1]  # type: ignore[index]
    summary = (
        f"- `get_visible_nuntii` for the rare viewer, {last:,} vs {first:,} nuntii: "
        f"median latency ratio **{rare_ratio:.2f}** (target ≤ 3).\n"
        f"- Rows the rare viewer gets: Legio {legio_rare} of 50; "
        f"the seed's over-fetch returns **{seed_rare}** of 50 at {last:,}.\n"
        "- post(): `seq` = one awaited post at a time (each its own transaction); `conc` = 10 "
        "concurrent writers, group-committed into multi-row INSERTs (target ≥ 2,000/s)."
    )
    body = f"{latency}\n\n{posts}\n\n{summary}\n"
    print()
    print(body)
    update_section("bench_praetorium", "## Praetorium (`bench_praetorium.py`)\n\n" + body)


if __name__ == "__main__":
    main()
