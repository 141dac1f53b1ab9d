"""Overhead: Caesar's message end to end, against a bare python-telegram-bot echo bot.

The daemon (serve(): the real PTB Application with its ``AIORateLimiter``) on the fake
Bot API, agents on the fake CLI answering at once. Two figures, each beside a bare PTB
echo bot with the same ``AIORateLimiter`` on the same fake server:

- **latency**: messages spaced ``GAP_S`` apart, so no rate limit applies; time from the
  update being queued on the fake server to the answer's ``sendMessage`` arriving there;
  compared with bare echo + one SDK round trip with the fake CLI (the composition);
- **throughput**: ``BURST`` messages queued at once; answers per second until the last.

The latency runs also record Legio's own timestamps per stage (``legio.timing``): the
measured breakdown. Then, on their own: praetorium posts, history building, and history
on a large praetorium (BENCH_BIG nuntii, default 1M): it must not grow with the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _report import ms_stats, table, update_section
from bench_praetorium import build, vocabulary
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient
from telegram import Update
from telegram.ext import AIORateLimiter, ApplicationBuilder, ContextTypes, MessageHandler, filters

from legio import timing
from legio.sessions.history import format_history_xml
from legio.store.praetorium import Praetorium
from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import FakeBotApi
from tests.fakes.cli_log import FAKE_CLI

RUNS = int(os.environ.get("BENCH_RUNS", "60"))
GAP_S = 0.2  # between spaced messages: 2 Bot API calls per 0.2 s is far below 30/s
BURST = int(os.environ.get("BENCH_BURST", "150"))
STAGES = [
    "update received",
    "nuntius posted",
    "query sent",
    "first token",
    "answer posted",
    "sendMessage returned",
]


async def round_trips(api: FakeBotApi, text: str, runs: int = RUNS) -> list[tuple[float, float]]:
    """(queued, answered) times, on the fake server's clock, of ``runs`` spaced messages."""
    out = []
    for i in range(runs):
        start = len(api.calls)
        t = time.monotonic()
        api.add_message(f"{text} {i}", user_id=CAESAR)
        call = await api.wait_for_call(
            "sendMessage",
            lambda c, i=i: str(c.params["text"]).endswith(f"{text} {i}"),
            start=start,
            completed=False,
        )
        out.append((t, call.at))
        await asyncio.sleep(GAP_S)
    return out


async def burst(api: FakeBotApi, text: str, n: int = BURST) -> float:
    """Answers per second for ``n`` messages queued at once."""
    start = len(api.calls)
    t = time.monotonic()
    for i in range(n):
        api.add_message(f"{text} {i}", user_id=CAESAR)
    while True:
        done = [c for c in api.calls[start:] if c.method == "sendMessage" and c.status == 200]
        if len(done) >= n:
            return n / (max(c.at for c in done) - t)
        await asyncio.sleep(0.01)


Handler = Callable[[Update, ContextTypes.DEFAULT_TYPE], Awaitable[None]]


def copy_castra(root: Path) -> Path:
    castra = root / "castra"
    shutil.copytree(
        Path(__file__).parents[1] / "castra",
        castra,
        ignore=shutil.ignore_patterns("*.db*", "workspace"),
    )
    return castra


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.effective_message is not None
    await update.effective_message.reply_text(str(update.effective_message.text))


@contextlib.asynccontextmanager
async def echo_bot(handler: Handler = echo) -> AsyncIterator[FakeBotApi]:
    """A bare PTB bot with the same ``AIORateLimiter``, on a fake server of its own:
    ``handler`` answers each text (an echo unless told otherwise)."""
    async with FakeBotApi() as api:
        app = (
            ApplicationBuilder()
            .token(api.token)
            .base_url(api.base_url)
            .rate_limiter(AIORateLimiter(max_retries=5))
            .build()
        )
        app.add_handler(MessageHandler(filters.TEXT, handler))
        async with app:
            await app.start()
            assert app.updater is not None
            await app.updater.start_polling(poll_interval=0, timeout=1)
            try:
                yield api
            finally:
                await app.updater.stop()
                await app.stop()


async def sdk_round_trip(client: ClaudeSDKClient, i: int) -> float:
    t = time.monotonic()
    await client.query(f"REPLY ok {i}")
    async for _ in client.receive_response():
        pass
    return time.monotonic() - t


async def measure(root: Path) -> Measured:
    """Legio, the bare bot and the SDK round trip in turn, message by message, so that
    the load of a shared machine weighs on the three alike; then the two bursts."""
    fake = FakeCli(FAKE_CLI, root / "log", root / "state")
    m = Measured()
    async with contextlib.AsyncExitStack() as stack:
        # like for like with the bare bot's one call: no 👀/👌 marks (two calls a request,
        # measured apart by bench_reactions.py)
        quiet = "reactions = false"
        legio = await stack.enter_async_context(
            running_bot(copy_castra(root), fake, telegram=quiet)
        )
        bare = await stack.enter_async_context(echo_bot())
        client = ClaudeSDKClient(
            ClaudeAgentOptions(cli_path=str(FAKE_CLI), include_partial_messages=True)
        )
        await client.connect()
        stack.push_async_callback(client.disconnect)
        await round_trips(legio.api, "warm up", 5)
        await round_trips(bare, "warm up", 5)
        for i in range(5):
            await sdk_round_trip(client, i)
        for i in range(RUNS):
            timing.install(m.traces.append)
            try:
                m.legio += await round_trips(legio.api, f"hello {i} x", 1)
            finally:
                timing.install(None)
            m.bare += await round_trips(bare, f"hello {i} x", 1)
            m.sdk.append(await sdk_round_trip(client, i))
            await asyncio.sleep(GAP_S)
        m.legio_rate = await burst(legio.api, "burst")
        m.bare_rate = await burst(bare, "burst")
    return m


@dataclass
class Measured:
    legio: list[tuple[float, float]] = field(default_factory=list)
    bare: list[tuple[float, float]] = field(default_factory=list)
    sdk: list[float] = field(default_factory=list)
    traces: list[timing.Trace] = field(default_factory=list)
    legio_rate: float = 0.0
    bare_rate: float = 0.0


def breakdown(samples: list[tuple[float, float]], traces: list[timing.Trace]) -> list[list[str]]:
    """Median time of each stage after the previous one (and from the update's queueing)."""
    steps: dict[str, list[float]] = {}
    stages = STAGES[:-1]  # the answer arrives at the server before sendMessage returns
    names = ["queued on the fake server", *stages, "sendMessage arrived at the server"]
    for (queued, arrived), trace in zip(samples, traces, strict=False):
        points = [queued, *(trace.first(s) for s in stages), arrived]
        if any(p is None for p in points):
            continue
        times = [p for p in points if p is not None]
        for name, before, after in zip(names[1:], times, times[1:], strict=False):
            steps.setdefault(name, []).append(after - before)
    rows = []
    total = 0.0
    for name in names[1:]:
        if name in steps:
            median = statistics.median(steps[name]) * 1000
            total += median
            rows.append([name, f"{median:.2f}", f"{total:.2f}"])
    return rows


async def parts(root: Path, big: int) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    store = await Praetorium.open(root / "parts.db")
    for i in range(200):
        await store.post("caesar", f"message {i} " * 10, ["vorenus"])
    samples = []
    for i in range(RUNS):
        t = time.perf_counter()
        await store.post("caesar", f"post {i}", ["vorenus"])
        samples.append(time.perf_counter() - t)
    out["praetorium: one post()"] = ms_stats(samples)

    async def history(db: Praetorium, viewer: str) -> float:
        t = time.perf_counter()
        format_history_xml(await db.get_visible_nuntii(viewer, 50), viewer)
        return time.perf_counter() - t

    out["history: 50 nuntii, 10^2-row DB"] = ms_stats(
        [await history(store, "vorenus") for _ in range(RUNS)]
    )
    await store.close()

    path = root / "big.db"
    t = time.perf_counter()
    await asyncio.to_thread(build, path, big, vocabulary(random.Random(7)))
    print(f"built {big:,} nuntii in {time.perf_counter() - t:.0f} s", flush=True)
    big_store = await Praetorium.open(path)
    out[f"history: 50 nuntii, {big:,}-row DB (rare viewer)"] = ms_stats(
        [await history(big_store, "c19") for _ in range(RUNS)]
    )
    await big_store.close()
    return out


def main() -> None:
    big = int(os.environ.get("BENCH_BIG", "1000000"))
    root = Path(tempfile.mkdtemp(prefix="legio-bench-overhead-"))
    os.environ["FAKE_CLAUDE_LOG_DIR"] = str(root / "log")
    os.environ["FAKE_CLAUDE_STATE_DIR"] = str(root / "state")
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    try:
        m = asyncio.run(measure(root))
        components = asyncio.run(parts(root, big))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    legio = ms_stats([b - a for a, b in m.legio])
    bare = ms_stats([b - a for a, b in m.bare])
    sdk = ms_stats(m.sdk)
    ratios = [
        (lb - la) / ((bb - ba) + s)
        for (la, lb), (ba, bb), s in zip(m.legio, m.bare, m.sdk, strict=True)
    ]
    rows = [
        ["Legio: message → Legatus → answer", f"{legio[0]:.1f}", f"{legio[1]:.1f}"],
        ["bare PTB echo bot (same AIORateLimiter)", f"{bare[0]:.1f}", f"{bare[1]:.1f}"],
        ["SDK round trip (fake CLI, partial messages)", f"{sdk[0]:.1f}", f"{sdk[1]:.1f}"],
    ]
    rows += [[name, f"{p50:.2f}", f"{p95:.2f}"] for name, (p50, p95) in components.items()]
    body = (
        f"Latency: {RUNS} rounds, each one message to Legio, one to the bare bot and one SDK "
        f"round trip, {GAP_S * 1000:.0f} ms apart (no rate limit applies); from the update "
        "queued on the fake server to the answer's sendMessage arriving there.\n\n"
        + table(["path", "p50 ms", "p95 ms"], rows)
    )
    body += (
        f"\n\n- Legio / (bare PTB echo + one SDK round trip), p50: "
        f"{legio[0]:.1f} / ({bare[0]:.1f} + {sdk[0]:.1f}) = "
        f"**{legio[0] / (bare[0] + sdk[0]):.2f}×**; median of the per-round ratios "
        f"**{statistics.median(ratios):.2f}×** (target ≤ 1.5).\n"
    )
    body += "\nWhere Legio's time goes (medians of its own timestamps, `legio.timing`):\n\n"
    body += table(
        ["stage reached", "ms after the previous", "ms after queueing"],
        breakdown(m.legio, m.traces),
    )
    body += (
        f"\n\nThroughput: {BURST} messages queued at once, answers per second until the "
        "last one (both bots with `AIORateLimiter`, 30 requests/s).\n\n"
    )
    body += table(
        ["bot", "messages/s"],
        [
            ["Legio (one agent: its turns run one after another)", f"{m.legio_rate:.1f}"],
            ["bare PTB echo bot", f"{m.bare_rate:.1f}"],
        ],
    )
    print(body)
    update_section("bench_overhead", "## Overhead (`bench_overhead.py`)\n\n" + body)


if __name__ == "__main__":
    main()
