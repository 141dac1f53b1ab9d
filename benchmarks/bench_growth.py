"""The same cost on the 400th message: CPU per message as one conversation grows.

One agent (a centurio) on the real bundled Claude CLI against the fake Messages API (in
a process of its own, keeping no request), the real ``SessionManager`` and praetorium:
Caesar's messages (~300 characters) answered one after another, each answer posted back
as the daemon does. The CPU of each message is read, split into Legio's own process
(this one: the manager, the praetorium, the history block) and its CLI children
(``/proc``: live ones by their threads, ended ones through this process's ``cutime``).
Also read: the agent's transcript file size, and how many sessions the conversation took.

A shared machine's load moves CPU per message by ±20% within minutes, more than the
growth sought, so each size is measured **beside a fresh conversation**: the long one is
driven alone up to ``REF`` messages before the size (40 by default: 360 before the
400th), then a new conversation (its own castra, praetorium and CLI) starts, and the
two speak in turn, message for message, until the long one reaches the size and the
fresh one its ``REF``-th. The figure is the median over the last ``WINDOW`` messages of
each, and the ratio is the long conversation's against the fresh one's, both read under
the same load. (At the first size the two are the same length: their ratio shows the
bench's own noise.) The ratio against the long conversation's own first size, read
minutes apart, is printed too.

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
from dataclasses import dataclass, field
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
REF = SIZES[0]  # the fresh conversation's length, read beside each size
WINDOW = int(os.environ.get("BENCH_WINDOW", "20"))
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


def reading(own_first: bool) -> tuple[float, float]:
    """(this process's CPU, its CLI children's CPU) in seconds. Walking ``/proc`` for the
    children costs this process a few ms (more on a machine with many processes): read
    its own CPU after the walk before a message (``own_first=False``) and before it after
    the message, so that no walk counts as Legio's."""
    me = os.getpid()
    own = cpu_s(me) if own_first else 0.0
    kids = sum(cpu_s(p) for p in children(me)) + waited_children_s()
    return (own if own_first else cpu_s(me)), kids


def transcript_kib(root: Path, session_id: str) -> float:
    found = list(root.glob(f"castra/state/claude/*/projects/*/{session_id}.jsonl"))
    return sum(p.stat().st_size for p in found) / 1024


@dataclass
class Conversation:
    """One agent's conversation in a castra of its own: praetorium, manager, CLI."""

    root: Path
    manager: SessionManager
    praetorium: Praetorium
    said: int = 0
    spent: list[tuple[float, float, float]] = field(default_factory=list)  # own, CLI, wall
    sessions: set[str] = field(default_factory=set)

    @classmethod
    async def open(cls, root: Path, url: str, bound: int) -> Conversation:
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
        return cls(root, manager, praetorium)

    async def say(self) -> None:
        """Caesar's next message, its answer posted back; its CPU and wall time kept."""
        self.said += 1
        before = reading(own_first=False)
        t = time.monotonic()
        nuntius = await self.praetorium.post("caesar", f"REPLY {self.said} {FILLER}", ["c1"])
        outcome = await self.manager.answer("c1", nuntius)
        await self.praetorium.post("c1", outcome.text, ["caesar"], reply_to=nuntius.id)
        wall = time.monotonic() - t
        after = reading(own_first=True)
        self.spent.append((after[0] - before[0], after[1] - before[1], wall))
        session = self.manager.slot("c1").session
        if session is not None:
            self.sessions.add(session.session_id)

    def window(self) -> tuple[float, float, float, float]:
        """Medians of the last ``WINDOW`` messages: own, CLI, tree ms CPU, wall ms."""
        last = self.spent[-WINDOW:]
        own = statistics.median(s[0] for s in last) * 1000
        cli = statistics.median(s[1] for s in last) * 1000
        tree = statistics.median((s[0] + s[1]) for s in last) * 1000
        wall = statistics.median(s[2] for s in last) * 1000
        return own, cli, tree, wall

    def mean_ms(self) -> float:
        """The whole tree's CPU per message so far, rotations and summaries included."""
        return sum(s[0] + s[1] for s in self.spent) * 1000 / len(self.spent)

    def transcript(self) -> float:
        session = self.manager.slot("c1").session
        return transcript_kib(self.root, session.session_id) if session else 0.0

    async def close(self) -> None:
        await self.manager.shutdown()
        await self.praetorium.close()


async def converse(root: Path, url: str, bound: int) -> list[list[str]]:
    rows = []
    started = time.monotonic()
    long = await Conversation.open(root / "long", url, bound)
    try:
        for size in SIZES:
            while long.said < size - REF:
                await long.say()
            fresh = await Conversation.open(root / f"fresh-{size}", url, bound)
            try:
                while long.said < size:
                    await long.say()
                    await fresh.say()
                ref = fresh.window()[2]
            finally:
                await fresh.close()
                shutil.rmtree(fresh.root, ignore_errors=True)
            own, cli, tree, wall = long.window()
            rows.append(
                [
                    f"{size:,}",
                    f"{own:.1f}",
                    f"{cli:.1f}",
                    f"{tree:.1f}",
                    f"{long.mean_ms():.1f}",
                    f"{wall:.0f}",
                    f"{long.transcript():,.0f}",
                    str(len(long.sessions)),
                    f"{ref:.1f}",
                    f"{tree / ref:.2f}×",
                ]
            )
            print(rows[-1], f"({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        await long.close()
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
            apart = ", ".join(
                f"{r[0]}: {float(r[3]) / base:.2f}× (mean so far {float(r[4]) / base_mean:.2f}×)"
                for r in rows[1:]
            )
            body += (
                f"With `max_transcript_kib` = {what}: per message, the median of the {WINDOW} "
                f"messages before each size, beside messages {REF - WINDOW + 1}–{REF} of a fresh "
                "conversation (spoken in turn with them, under the same load); the mean of all "
                "messages so far (rotations and their summaries included).\n\n"
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
                        f"fresh {REF}th, tree ms",
                        "against it",
                    ],
                    rows,
                )
                + "\n\n- Against the fresh conversation beside it: "
                + ", ".join(f"{r[0]}: {r[9]}" for r in rows)
                + f" (target ≤ 1.2× at 400). Against this conversation's own {REF}th, "
                f"read minutes before: {apart}.\n\n"
            )
    finally:
        server.communicate("")
    print(body)
    update_section(
        "bench_growth", "## CPU per message as a conversation grows (`bench_growth.py`)\n\n" + body
    )


if __name__ == "__main__":
    main()
