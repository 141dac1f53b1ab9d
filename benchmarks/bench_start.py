"""A lighter start: Legio's own process at idle, and what each optional import would add.

Each figure comes from a fresh interpreter (``python -c``), its resident memory read
from ``/proc/self/status`` and its import time from ``time.perf_counter``:

- **the start, step by step**: the interpreter, python-telegram-bot, the other libraries
  Legio loads at start, Legio's own modules, then the engine opened (praetorium, memoria,
  sessions) and the Telegram application built: what ``legio run`` holds before the
  first message;
- **the floor**: the interpreter, python-telegram-bot and the Claude Agent SDK (what any
  bot of this kind pays; Legio imports the SDK when its first CLI starts);
- **imported when first needed**: each heavy module loaded on top of that start, as
  the first request that needs it does (the SDK with the first CLI, a drawn diff, a
  voice note, a Bash approval), with its import's wall and CPU time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _report import table, update_section

SRC = Path(__file__).parents[1] / "src"
PROBE = r"""
import asyncio, json, sys, time
from pathlib import Path
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
steps = []
def step(name, run):
    t = time.perf_counter()
    run()
    steps.append((name, rss(), (time.perf_counter() - t) * 1000))
step("python", lambda: None)
step("python-telegram-bot (telegram.ext)", lambda: __import__("telegram.ext"))
THIRD = ["aiosqlite", "lxml.etree", "yaml", "frontmatter", "cronsim", "telegramify_markdown",
         "tenacity", "gidgethub.httpx", "tomli_w"]
step("other libraries at start", lambda: [__import__(m) for m in THIRD])
def legio():
    import legio.cli, legio.app, legio.frontends.telegram.bot
step("Legio's modules", legio)
def opened():
    from legio.app import LegioApp
    from legio.config import load_config
    from legio.frontends.telegram.bot import LegioBot
    from legio.frontends.telegram.serving import build_application
    async def main():
        config = load_config(Path(sys.argv[1]))
        app = await LegioApp.open(config)
        async def factory():
            return app
        build_application(config, "1:TOKEN", LegioBot(config, factory))
        await asyncio.sleep(0.5)
        steps.append(("engine opened, application built", rss(), 0.0))
        extra = sys.argv[2]
        if extra:
            t, cpu = time.perf_counter(), time.process_time()
            exec(extra)
            ms = (time.perf_counter() - t) * 1000
            steps.append(("extra", rss(), ms, (time.process_time() - cpu) * 1000))
        await app.close()
    asyncio.run(main())
opened()
print(json.dumps(steps))
"""
FLOOR = r"""
import json
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
import telegram.ext, claude_agent_sdk
print(json.dumps(rss()))
"""
SDK = "the Claude Agent SDK with mcp (the first CLI: `sessions.opening.load_sdk`)"
LATER = [
    (SDK, "import claude_agent_sdk"),
    (
        "drawn diffs (Pillow, Pygments: legio.review)",
        "import legio.review.rendering, legio.review.page",
    ),
    ("voice notes: PyAV (legio.media.voice)", "import av"),
    ("voice notes: faster-whisper (CTranslate2, onnxruntime)", "import faster_whisper"),
    ("the shell grammar (tree-sitter-bash)", "from legio.shell.reader import _parser; _parser()"),
    ("pictures from Caesar (Pillow)", "from PIL import Image"),
]


def run(config: Path, code: str, extra: str = "") -> str:
    """The last line ``code`` prints, run in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", code, str(config), extra],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "HOME": str(config.parent)},
    )
    if done.returncode:
        raise RuntimeError(done.stderr)
    return done.stdout.splitlines()[-1]


def probe(config: Path, extra: str = "") -> list[tuple[Any, ...]]:
    """Each step's (name, RSS MiB, ms[, CPU ms])."""
    return [tuple(s) for s in json.loads(run(config, PROBE, extra))]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="legio-bench-start-") as tmp:
        config = Path(tmp) / "legio.toml"
        shutil.copytree(SRC / "legio" / "default_castra", Path(tmp) / "castra")
        config.write_text('[claude]\ncli_path = "/bin/true"\n[telegram]\ncaesar_ids = [1]\n')
        runs = [probe(config) for _ in range(3)]
        floors = sorted(float(run(config, FLOOR)) for _ in range(3))
        later = [(name, [probe(config, code) for _ in range(3)]) for name, code in LATER]
    steps = runs[0]
    rows = []
    before = 0.0
    for i, (name, _, _) in enumerate(steps):
        mib = sorted(r[i][1] for r in runs)[1]
        ms = sorted(r[i][2] for r in runs)[1]
        rows.append([name, f"+{mib - before:.1f}", f"{mib:.1f}", f"{ms:.0f}"])
        before = mib
    start = before
    floor = floors[1]

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    body = table(["step", "MiB added", "RSS MiB", "ms"], rows)
    body += (
        f"\n\n- Legio holds **{start:.0f} MiB** before the first message (target ≤ 90 MiB); "
        f"the floor (interpreter, python-telegram-bot and the SDK) is {floor:.0f} MiB.\n\n"
        "Imported when first needed (each on top of that start, in a fresh process; "
        "median of 3):\n\n"
    )
    body += table(
        ["what", "MiB it would add at start", "import ms", "import CPU ms"],
        [
            [
                name,
                f"+{median([s[-1][1] - s[-2][1] for s in runs3]):.1f}",
                f"{median([s[-1][2] for s in runs3]):.0f}",
                f"{median([s[-1][3] for s in runs3]):.0f}",
            ]
            for name, runs3 in later
        ],
    )
    print(body)
    update_section("bench_start", "## A lighter start (`bench_start.py`)\n\n" + body)


if __name__ == "__main__":
    main()
