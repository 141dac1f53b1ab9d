"""Time to first visible text: a fake model that streams its answer at a fixed rate.

The fake CLI waits ``FIRST_S`` after the query (the model's first token), then streams
``TOKENS`` words at ``RATE`` words a second (500 ms, then 50/s for 10 s). Per front-end,
from Caesar's message:

- Telegram (serve() on the fake Bot API): the first call that shows Caesar something
  (a draft, a chat action, a status message), the first draft holding answer text, and
  the final ``sendMessage``, as they arrive at the fake server;
- console (``run_console`` on a pipe): the first output, the first answer word, and the
  whole answer, as they are written.

The model's first token is Legio's own ``first token`` timestamp (``legio.timing``).
Targets: something visible within 100 ms; first text within first token + 300 ms.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _report import table, update_section

from legio import timing
from legio.app import LegioApp
from legio.frontends.console.terminal import run_console
from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import Call
from tests.fakes.cli_log import FAKE_CLI
from tests.legion import fake_cli_config

FIRST_S = 0.5
RATE = 50
TOKENS = int(os.environ.get("BENCH_TOKENS", "500"))  # 10 s at 50/s
WORDS = " ".join(f"w{i:03d}" for i in range(1, TOKENS + 1))
PROMPT = f"STREAM {TOKENS} {FIRST_S}/{1 / RATE} {WORDS}"  # one line: the console's too
LAST = WORDS.rsplit(" ", 1)[-1]
SHOWN = {"sendMessageDraft", "sendChatAction", "sendMessage"}

Row = dict[str, float]


def copy_castra(root: Path) -> Path:
    castra = root / "castra"
    shutil.copytree(
        Path(__file__).parents[1] / "castra",
        castra,
        ignore=shutil.ignore_patterns("*.db*", "workspace"),
    )
    return castra


async def telegram(root: Path) -> Row:
    fake = FakeCli(FAKE_CLI, root / "tlog", root / "state")
    traces: list[timing.Trace] = []
    async with running_bot(copy_castra(root / "t"), fake) as bot:
        await bot.answer(await bot.ask("REPLY warm"))  # the Legatus's CLI is running
        await asyncio.sleep(1)  # as Caesar would, before the next message
        timing.install(traces.append)
        start = len(bot.api.calls)
        t0 = time.monotonic()
        bot.api.add_message(PROMPT, user_id=CAESAR)

        def arrived(method: str, text: str | None = None) -> asyncio.Future[Call]:
            return asyncio.ensure_future(
                bot.api.wait_for_call(
                    method,
                    lambda c: text is None or text in str(c.params.get("text", "")),
                    start=start,
                    timeout=60,
                    completed=False,
                )
            )

        final = await arrived("sendMessage", LAST)
        timing.install(None)
        calls = bot.api.calls[start:]
        shown = min(c.at for c in calls if c.method in SHOWN)
        text = min(
            c.at for c in calls if c.method == "sendMessageDraft" and "w001" in str(c.params)
        )
        drafts = len([c for c in calls if c.method == "sendMessageDraft"])
    first_token = traces[0].first("first token") if traces else None
    return {
        "visible": shown - t0,
        "first token": (first_token - t0) if first_token else float("nan"),
        "first text": text - t0,
        "final": final.at - t0,
        "drafts": drafts,
    }


class Recorded(io.StringIO):
    """An output that remembers when each piece was written."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[float, str]] = []
        self.changed = asyncio.Event()

    def write(self, text: str) -> int:
        self.writes.append((time.monotonic(), text))
        self.changed.set()
        return super().write(text)

    async def wait_for(self, text: str, start: int = 0) -> None:
        while text not in "".join(w for _, w in self.writes[start:]):
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 60)


async def console(root: Path) -> Row:
    fake = FakeCli(FAKE_CLI, root / "clog", root / "state")
    config = fake_cli_config(copy_castra(root / "c"), fake)
    read_fd, write_fd = os.pipe()
    stdin = os.fdopen(read_fd, "r")
    out = Recorded()
    traces: list[timing.Trace] = []
    task = asyncio.create_task(run_console(lambda: LegioApp.open(config), stdin=stdin, out=out))
    os.write(write_fd, b"REPLY warm\n")
    await out.wait_for("warm")
    await asyncio.sleep(1)
    timing.install(traces.append)
    mark = len(out.writes)
    t0 = time.monotonic()
    os.write(write_fd, PROMPT.encode() + b"\n")
    await out.wait_for(LAST, mark)
    timing.install(None)
    os.close(write_fd)
    await asyncio.wait_for(task, 30)
    writes = out.writes[mark:]
    first_token = traces[0].first("first token") if traces else None
    return {
        "visible": writes[0][0] - t0,
        "first token": (first_token - t0) if first_token else float("nan"),
        "first text": next(t for t, w in writes if "w001" in w) - t0,
        "final": next(t for t, w in writes if LAST in w) - t0,
        "drafts": 0,
    }


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="legio-bench-first-text-"))
    os.environ["FAKE_CLAUDE_STATE_DIR"] = str(root / "state")
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    try:
        os.environ["FAKE_CLAUDE_LOG_DIR"] = str(root / "tlog")
        tg = asyncio.run(telegram(root))
        os.environ["FAKE_CLAUDE_LOG_DIR"] = str(root / "clog")
        co = asyncio.run(console(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def ms(value: float) -> str:
        return f"{value * 1000:.0f}"

    rows = [
        [
            name,
            ms(r["visible"]),
            ms(r["first token"]),
            ms(r["first text"]),
            f"{(r['first text'] - r['first token']) * 1000:+.0f}",
            ms(r["final"]),
            f"{r['drafts']:.0f}" if name == "Telegram" else "—",
        ]
        for name, r in (("Telegram", tg), ("console", co))
    ]
    body = (
        f"A fake model: first token {FIRST_S * 1000:.0f} ms after the query, then {TOKENS} "
        f"words at {RATE}/s (~{TOKENS / RATE:.0f} s). Times in ms from Caesar's message.\n\n"
        + table(
            [
                "front-end",
                "something visible",
                "model's first token",
                "first text visible",
                "text − token",
                "final message",
                "drafts sent",
            ],
            rows,
        )
        + "\n\n- Targets: something visible ≤ 100 ms; first text ≤ first token + 300 ms. "
        "Before streaming, the first text was the final message.\n"
    )
    print(body)
    update_section("bench_first_text", "## Time to first text (`bench_first_text.py`)\n\n" + body)


if __name__ == "__main__":
    main()
