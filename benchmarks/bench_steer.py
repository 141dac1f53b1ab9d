"""How soon a steer reaches the running turn: the real bundled CLI on the fake Messages API.

A turn's tool call waits for Caesar's approval; Caesar sends a second message (it joins the
turn); the approval is given the moment the message is written to the CLI. Measured, per
run: Caesar's message → written to the CLI (Legio's path: routing, the ⏭ hold, the
checkpoint, the write), and → the model request that carries it (the CLI folding it into
the tool's result). Run: ``PYTHONPATH=src python benchmarks/bench_steer.py [runs] [hold_s]``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from legio.request import ApprovalRequest, Decision
from tests.conftest import CASTRA_TEMPLATE


def make_castra(root: Path) -> Path:
    """A copy of the default castra's prompt files (as the tests' ``castra_dir``)."""
    target = root / "castra"
    for prompt in CASTRA_TEMPLATE.rglob("prompt.md"):
        dest = target / prompt.relative_to(CASTRA_TEMPLATE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(prompt, dest)
    return target


async def main(runs: int, hold_s: float) -> None:
    from legio.app import LegioApp
    from legio.config import load_config
    from tests.fakes.messages_api import FakeMessagesApi
    from tests.test_approvals_real_cli import with_bash
    from tests.test_steer import Seen, ask, joined_of
    from tests.test_steer_real_cli import CONFIG, steered, touch

    written, carried = [], []
    with tempfile.TemporaryDirectory() as tmp, FakeMessagesApi() as api:
        castra = make_castra(Path(tmp))
        with_bash(castra)
        path = castra.parent / "legio.toml"
        path.write_text(CONFIG + '[claude]\ncli_path = ""\n')
        app = await LegioApp.open(load_config(path), env=api.safe_cli_env(Path(tmp) / "cli"))
        app.engine.sessions.steerer.hold_s = hold_s
        gate: asyncio.Event = asyncio.Event()

        class Caesar:
            async def approve(self, request: ApprovalRequest) -> Decision:
                asking.set()
                await gate.wait()
                return Decision("once")

            async def answer(self, request: object) -> None:
                return None

        try:
            for n in range(runs):
                gate, asking = asyncio.Event(), asyncio.Event()
                first, second = Seen(), Seen()
                first.watch = first.watch.__class__(on_reply=first.watch.on_reply, asking=Caesar())
                running = ask(app, f"@vorenus {touch(f'f{n}.txt')}", first)
                await asking.wait()
                t0 = time.perf_counter()
                added = ask(app, f"@vorenus steer {n}", second)
                await joined_of(app)
                t1 = time.perf_counter()
                gate.set()
                await running
                await added
                [at] = [
                    t
                    for b, t in zip(api.requests, api.times, strict=True)
                    if steered(b) and f"steer {n}" in json.dumps(b["messages"][-1])
                ]
                carried.append(at - t0)
                written.append(t1 - t0)
        finally:
            await app.close()
    for name, values in (("written to the CLI", written), ("model request carries it", carried)):
        ms = sorted(v * 1000 for v in values)
        print(f"{name}: median {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms ({runs} runs)")


if __name__ == "__main__":
    asyncio.run(
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else 10,
            float(sys.argv[2]) if len(sys.argv) > 2 else 0.0,
        )
    )
