"""What reactions cost in Bot API calls: the same requests with ``[telegram] reactions``
on and off (serve() on the fake Bot API, agents on the fake CLI, drafts off so that
every run makes the same calls). Each request is one centurio's short answer; the
table counts, per request, the calls of each method the bot made (``getUpdates``,
the long poll, left out). Target: reactions add exactly two ``setMessageReaction`` calls
per request (👀, 👌) and nothing else, whatever the number of answers.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _report import make_castra, table, update_section

from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli
from tests.fakes.cli_log import FAKE_CLI

REQUESTS = 10
ASKS = {"one answer": "@vorenus REPLY salve", "two answers": "@vorenus @pullo REPLY salve"}


async def calls_per_request(root: Path, reactions: bool, text: str) -> Counter[str]:
    fake = FakeCli(FAKE_CLI, root / "log", root / "state")
    castra = make_castra(root, ["vorenus", "pullo"])
    setting = f"stream = false\nreactions = {'true' if reactions else 'false'}"
    counted: Counter[str] = Counter()
    async with running_bot(castra, fake, telegram=setting) as bot:
        answers = text.count("@")

        async def answered(total: int) -> None:
            for _ in range(3000):  # at most a minute
                if sum(t.endswith("salve") for t in bot.answers()) >= total:
                    return
                await asyncio.sleep(0.02)
            raise TimeoutError("the answers never came")

        bot.api.add_message(text, user_id=CAESAR)
        await answered(answers)  # the CLIs are running
        await asyncio.sleep(0.5)
        for i in range(REQUESTS):
            start = len(bot.api.calls)
            update = bot.api.add_message(text, user_id=CAESAR)
            message_id = int(update["message"]["message_id"])
            await answered(answers * (i + 2))
            if reactions:
                await bot.api.wait_for_call(
                    "setMessageReaction",
                    lambda c, m=message_id: (
                        int(c.params["message_id"]) == m
                        and bool(c.params.get("reaction"))
                        and c.params["reaction"][0]["emoji"] == "👌"
                    ),
                    start=start,
                )
            await asyncio.sleep(0.3)  # the last calls of this request have come
            counted.update(c.method for c in bot.api.calls[start:] if c.method != "getUpdates")
    return counted


async def main() -> None:
    rows = []
    for label, text in ASKS.items():
        with tempfile.TemporaryDirectory() as on_dir, tempfile.TemporaryDirectory() as off_dir:
            on = await calls_per_request(Path(on_dir), True, text)
            off = await calls_per_request(Path(off_dir), False, text)
        for method in sorted(set(on) | set(off)):
            extra = (on[method] - off[method]) / REQUESTS
            rows.append(
                [
                    label,
                    method,
                    f"{off[method] / REQUESTS:.1f}",
                    f"{on[method] / REQUESTS:.1f}",
                    f"{extra:+.1f}",
                ]
            )
    body = table(["request", "Bot API method", "reactions off", "reactions on", "added"], rows)
    print(body)
    update_section(
        "bench_reactions",
        "## Reactions (`bench_reactions.py`)\n\n"
        f"Bot API calls per request ({REQUESTS} requests each, drafts off):\n\n"
        + body
        + "\n\nTarget: the two marks (👀 when taken, 👌 when answered) and no other call, "
        "whatever the number of answers.",
    )


if __name__ == "__main__":
    asyncio.run(main())
