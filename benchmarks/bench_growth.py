"""The same cost on the 400th message: CPU per message as one conversation grows.

One agent (a centurio) on the real bundled Claude CLI against the fake Messages API (in
a process of its own, keeping no request), the real ``SessionManager`` and praetorium:
Caesar's messages (~300 characters) answered one after another, each answer posted back
as the daemon does. Around the messages just before 40, 400 and 4,000 (``BENCH_SIZES``)
the CPU is read per message, split into Legio's own process (this one: the manager, the
praetorium, the history block) and its CLI children (``/proc``: live ones by their
threads, ended ones through this process's ``cutime``). Also read: the agent's transcript
file size, and how many sessions the conversation took.

Run twice by default: with ``max_transcript_kib = 0`` (no bound: the transcript grows
until the token ceiling) and with the default bound.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _procs import children, cpu_s
from _report import make_castra, table, update_section

from legio.config import load_config
from legio.memoria import MemoriaStore
from legio.sessions.manager import SessionManager
from legio.store.praetorium import Praetorium
from tests.fakes.messages_api import PINNED_MODEL

SIZES = [int(n) for n in os.environ.get("BENCH_SIZES", "40,400,4000").split(",")]
WINDOW = int(os.environ.get("BENCH_WINDOW", "10"))
BOUNDS = [int(b) for b in os.environ.get("BENCH_BOUNDS", "0,-1").split(",")]  # -1: default
FILLER = "the legion marches north along the river and builds a bridge " * 5
SERVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.fakes.messages_api import FakeMessagesApi
class Drop(list):
    def append(self, item): pass
with FakeMessagesApi() as api:
    api._server.requests = Drop()
    print(api.url, flush=True)
    sys.stdin.read()
"""


def clock_ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def waited_children_s() -> float:
    """CPU of this process's children that ended and were waited for."""
    fields = Path("/proc/self/stat").read_text().split(") ", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / clock_ticks()


def reading() -> tuple[float, float]:
    """(this process's CPU, its CLI children's CPU) in seconds."""
    me = os.getpid()
    kids = sum(cpu_s(p) for p in children(me))
    return cpu_s(me), kids + waited_children_s()


def transcript_kib(root: Path, session_id: str) -> float:
    found = list(root.glob(f"castra/state/claude/*/projects/*/{session_id}.jsonl"))
    return sum(p.stat().st_size for p in found) / 1024


async def converse(root: Path, url: str, bound: int) -> list[list[str]]:
    castra = make_castra(root, ["c1"])
    key = f"max_transcript_kib = {bound}\n" if bound >= 0 else ""
    (root / "legio.toml").write_text(
        f'model = "{PINNED_MODEL}"\n{key}session_idle_timeout_minutes = 600\n'
        '[claude]\ncli_path = ""\n'
    )
    config = load_config(root / "legio.toml")
    home = root / "cli"
    for sub in ("config", "home", "tmp"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "CLAUDE_CONFIG_DIR": str(home / "config"),
        "HOME": str(home / "home"),
        "TMPDIR": str(home / "tmp"),
        "NO_PROXY": "127.0.0.1,localhost",
        "IS_SANDBOX": "1",
    }
    praetorium = await Praetorium.open(castra / "praetorium.db")
    manager = SessionManager(config, praetorium, MemoriaStore(castra), env=env)
    rows = []
    sessions: set[str] = set()
    samples: dict[int, list[tuple[float, float, float]]] = {n: [] for n in SIZES}
    started = time.monotonic()
    first = reading()
    try:
        for i in range(1, max(SIZES) + 1):
            target = next((n for n in SIZES if n - WINDOW < i <= n), None)
            before = reading()
            t = time.monotonic()
            nuntius = await praetorium.post("caesar", f"REPLY {i} {FILLER}", ["c1"])
            outcome = await manager.answer("c1", nuntius)
            await praetorium.post("c1", outcome.text, ["caesar"], reply_to=nuntius.id)
            after = reading()
            session = manager.slot("c1").session
            if session is not None:
                sessions.add(session.session_id)
            if target is not None:
                samples[target].append(
                    (after[0] - before[0], after[1] - before[1], time.monotonic() - t)
                )
            if target == i:
                size = transcript_kib(root, session.session_id) if session else 0.0
                own = statistics.median(s[0] for s in samples[i]) * 1000
                cli = statistics.median(s[1] for s in samples[i]) * 1000
                wall = statistics.median(s[2] for s in samples[i]) * 1000
                now = reading()
                mean = (now[0] - first[0] + now[1] - first[1]) * 1000 / i
                rows.append(
                    [
                        f"{i:,}",
                        f"{own:.1f}",
                        f"{cli:.1f}",
                        f"{own + cli:.1f}",
                        f"{mean:.1f}",
                        f"{wall:.0f}",
                        f"{size:,.0f}",
                        str(len(sessions)),
                    ]
                )
                print(rows[-1], f"({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        await manager.shutdown()
        await praetorium.close()
    return rows


def main() -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(Path(__file__).parents[1])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    body = ""
    try:
        for bound in BOUNDS:
            root = Path(tempfile.mkdtemp(prefix="legio-bench-growth-"))
            try:
                rows = asyncio.run(converse(root, url, bound))
            finally:
                shutil.rmtree(root, ignore_errors=True)
            what = "no bound" if bound == 0 else ("the default bound" if bound < 0 else bound)
            base, base_mean = float(rows[0][3]), float(rows[0][4])
            ratios = ", ".join(
                f"{r[0]}: {float(r[3]) / base:.2f}× (mean so far {float(r[4]) / base_mean:.2f}×)"
                for r in rows[1:]
            )
            body += (
                f"With `max_transcript_kib` = {what}: per message, the median of the {WINDOW} "
                "messages before each size (a turn as usual), and the mean of all messages "
                "so far (rotations and their summaries included).\n\n"
                + table(
                    [
                        "message",
                        "Legio ms CPU",
                        "CLI ms CPU",
                        "tree ms CPU",
                        "mean so far",
                        "wall ms",
                        "transcript KiB",
                        "sessions so far",
                    ],
                    rows,
                )
                + f"\n\n- Against the first size: {ratios} (target ≤ 1.2× at 400).\n\n"
            )
    finally:
        server.communicate("")
    print(body)
    update_section(
        "bench_growth", "## CPU per message as a conversation grows (`bench_growth.py`)\n\n" + body
    )


if __name__ == "__main__":
    main()
