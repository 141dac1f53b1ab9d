"""Overhead: one Caesar message end to end, against a bare python-telegram-bot echo bot.

The daemon (serve(): the real PTB Application) on the fake Bot API, agents on the fake
CLI answering at once; time from the update being queued to the answer's sendMessage.
In the same run: a bare PTB echo bot on the same fake server, and the parts of Legio's
path measured on their own (praetorium posts, history building, an SDK round trip).
History building is also timed on a large praetorium (BENCH_BIG nuntii, default 1M):
it must not grow with the database.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _report import ms_stats, table, update_section
from bench_praetorium import build, vocabulary
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient
from telegram import Update
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters

from legio.sessions.history import format_history_xml
from legio.store.praetorium import Praetorium
from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import FakeBotApi
from tests.fakes.cli_log import FAKE_CLI

RUNS = 60


async def round_trips(api: FakeBotApi, text: str, expect: str) -> list[float]:
    samples = []
    for i in range(RUNS):
        start = len(api.calls)
        t = time.perf_counter()
        api.add_message(f"{text} {i}", user_id=CAESAR)
        await api.wait_for_call(
            "sendMessage",
            lambda c, i=i: str(c.params["text"]).endswith(f"{expect} {i}"),
            start=start,
        )
        samples.append(time.perf_counter() - t)
    return samples


async def legio_path(root: Path) -> list[float]:
    castra = root / "castra"
    shutil.copytree(
        Path(__file__).parents[1] / "castra",
        castra,
        ignore=shutil.ignore_patterns("*.db*", "workspace"),
    )
    fake = FakeCli(FAKE_CLI, root / "log", root / "state")
    async with running_bot(castra, fake) as bot:
        await round_trips(bot.api, "warm up", "warm up")
        return await round_trips(bot.api, "hello", "hello")


async def echo_bot() -> list[float]:
    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None
        await update.effective_message.reply_text(str(update.effective_message.text))

    async with FakeBotApi() as api:
        app = ApplicationBuilder().token(api.token).base_url(api.base_url).build()
        app.add_handler(MessageHandler(filters.TEXT, echo))
        async with app:
            await app.start()
            assert app.updater is not None
            await app.updater.start_polling(poll_interval=0, timeout=1)
            await round_trips(api, "warm up", "warm up")
            samples = await round_trips(api, "hello", "hello")
            await app.updater.stop()
            await app.stop()
    return samples


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

    os.environ["FAKE_CLAUDE_STATE_DIR"] = str(root / "state")
    client = ClaudeSDKClient(ClaudeAgentOptions(cli_path=str(FAKE_CLI)))
    await client.connect()
    samples = []
    for i in range(RUNS):
        t = time.perf_counter()
        await client.query(f"REPLY ok {i}")
        async for _ in client.receive_response():
            pass
        samples.append(time.perf_counter() - t)
    await client.disconnect()
    out["SDK round trip (fake CLI)"] = ms_stats(samples)

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
        legio = ms_stats(asyncio.run(legio_path(root)))
        bare = ms_stats(asyncio.run(echo_bot()))
        components = asyncio.run(parts(root, big))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = [
        ["Legio: message → Legatus → answer", f"{legio[0]:.1f}", f"{legio[1]:.1f}"],
        ["bare PTB echo bot, same fake server", f"{bare[0]:.1f}", f"{bare[1]:.1f}"],
    ]
    rows += [[name, f"{m:.2f}", f"{p:.2f}"] for name, (m, p) in components.items()]
    known = (
        2 * components["praetorium: one post()"][0]
        + components["history: 50 nuntii, 10^2-row DB"][0]
    )
    known += components["SDK round trip (fake CLI)"][0]
    body = table(["path", "p50 ms", "p95 ms"], rows)
    body += (
        f"\n\n- Legio / bare bot (p50): **{legio[0] / bare[0]:.2f}**. "
        f"Of Legio's {legio[0]:.0f} ms: "
        f"praetorium (2 posts) + history + SDK round trip ≈ {known:.0f} ms; the rest "
        f"(≈ {legio[0] - known:.0f} ms) is Telegram polling and sending, the Legatus's "
        "bookkeeping and the status/typing machinery.\n"
    )
    print(body)
    update_section("bench_overhead", "## Overhead (`bench_overhead.py`)\n\n" + body)


if __name__ == "__main__":
    main()
