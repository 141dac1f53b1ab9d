"""The first sign: from Caesar's message to the typing action that says Legio took it.

The daemon (serve(): the real PTB Application with its ``AIORateLimiter``) on the fake
Bot API, agents on the fake CLI; beside it, the floor: a bare python-telegram-bot with
the same ``AIORateLimiter`` whose handler sends the typing action first thing (what
the peer does). Messages ``GAP_S`` apart (no rate limit applies); time from the update
being queued on the fake server (a long poll is waiting, so it is delivered at once) to
the ``sendChatAction`` arriving there. Also counted: the Bot API calls a quick answer
costs (the sign and its ``sendMessage``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _report import ms_stats, table, update_section
from bench_overhead import copy_castra, echo_bot
from telegram import Update
from telegram.constants import ChatAction
from telegram.ext import ContextTypes

from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import FakeBotApi
from tests.fakes.cli_log import FAKE_CLI

RUNS = int(os.environ.get("BENCH_RUNS", "40"))
GAP_S = 0.3


async def signs(api: FakeBotApi, text: str, runs: int) -> tuple[list[float], list[list[str]]]:
    """Per message: seconds from queued to the typing action, and the calls it cost."""
    out, costs = [], []
    for i in range(runs):
        start = len(api.calls)
        t = time.monotonic()
        api.add_message(f"REPLY {text} {i}", user_id=CAESAR)
        sign = await api.wait_for_call("sendChatAction", start=start, completed=False)
        out.append(sign.at - t)
        await api.wait_for_call(
            "sendMessage", lambda c, i=i: str(c.params["text"]).endswith(f" {i}"), start=start
        )
        await asyncio.sleep(GAP_S)
        costs.append([c.method for c in api.calls[start:] if c.method != "getUpdates"])
    return out, costs


async def typing_echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A bare PTB bot's answer: the typing action first, then an echo."""
    message = update.effective_message
    assert message is not None
    await context.bot.send_chat_action(message.chat_id, ChatAction.TYPING)
    await message.reply_text(str(message.text).removeprefix("REPLY "))


def typing_bot() -> contextlib.AbstractAsyncContextManager[FakeBotApi]:
    """A bare PTB bot (same ``AIORateLimiter``): the typing action first, then an echo."""
    return echo_bot(typing_echo)


async def measure(root: Path) -> tuple[list[float], list[float], list[list[str]]]:
    fake = FakeCli(FAKE_CLI, root / "log", root / "state")
    legio: list[float] = []
    bare: list[float] = []
    costs: list[list[str]] = []
    async with running_bot(copy_castra(root), fake) as bot, typing_bot() as floor:
        await signs(bot.api, "warm up", 3)
        await signs(floor, "warm up", 3)
        for i in range(RUNS):  # in turn, so the machine's load weighs on both alike
            got, cost = await signs(bot.api, f"hello {i}", 1)
            legio += got
            costs += cost
            bare += (await signs(floor, f"hello {i}", 1))[0]
    return legio, bare, costs


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="legio-bench-sign-"))
    os.environ["FAKE_CLAUDE_LOG_DIR"] = str(root / "log")
    os.environ["FAKE_CLAUDE_STATE_DIR"] = str(root / "state")
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    try:
        legio, bare, costs = asyncio.run(measure(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lp50, lp95 = ms_stats(legio)
    bp50, bp95 = ms_stats(bare)
    usual = max(set(map(tuple, costs)), key=lambda c: costs.count(list(c)))
    body = (
        f"{RUNS} messages {GAP_S * 1000:.0f} ms apart, each answered at once by the fake "
        "model; from the update queued on the fake Bot API (a long poll waiting) to the "
        "typing action arriving there.\n\n"
        + table(
            ["bot", "first sign p50 ms", "p95 ms"],
            [
                ["Legio (sign at admission)", f"{lp50:.1f}", f"{lp95:.1f}"],
                ["bare PTB, typing first (the floor)", f"{bp50:.1f}", f"{bp95:.1f}"],
            ],
        )
        + f"\n\n- Target: ≤ 10 ms. A quick answer costs Legio {len(usual)} Bot API calls "
        f"({', '.join(usual)}) in {costs.count(list(usual))} of {len(costs)} messages.\n"
    )
    print(body)
    update_section("bench_first_sign", "## First sign (`bench_first_sign.py`)\n\n" + body)


if __name__ == "__main__":
    main()
