"""Near nothing when idle: four agents, their CLIs reaped, and the first answer after.

The real daemon (``python -m legio run``) with the real bundled Claude CLI against the
fake Messages API, on the fake Bot API; four agents (the Legatus and three centuriones),
``session_idle_timeout_minutes`` short (``IDLE_MIN``) so that the reaper comes within the
run. Beside it, the floor: a bare python-telegram-bot with the Claude Agent SDK
(``_floor_bot.py``: a CLI started per message, none kept), on its own fake server.

Measured, for the whole process tree (the daemon and every descendant; CPU from
``/proc/<pid>/task/*/schedstat``, in ms per second of wall time):

- **at start**: the daemon alone, no CLI yet (memory, idle CPU);
- **four agents live**: after a few messages each (memory, idle CPU: what a live CLI
  costs while nobody writes);
- **four agents reaped**: after the idle timeout (memory, idle CPU, CLI processes left);
- **the first answer after idle** (its CLI started again with ``--resume``) against a
  warm one, and whether the resumed agent still had the earlier conversation;
- **the first answer after start**: it also pays the Claude Agent SDK's import (Legio
  loads it with the first CLI), against the first answer of each later agent.
"""

from __future__ import annotations

import asyncio
import json
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
from _procs import children, rss_mib, spent, tree, tree_cpus, tree_rss
from _report import make_castra, table, update_section

from tests.fakes.bot_api import Call, FakeBotApi
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.reliability.daemon import CAESAR, Daemon, write_daemon_config

IDLE_MIN = float(os.environ.get("BENCH_IDLE_MIN", "0.25"))  # the reaper after 15 s
IDLE_S = float(os.environ.get("BENCH_IDLE_S", "20"))  # each idle CPU reading
WARM = int(os.environ.get("BENCH_WARM", "4"))  # warm messages per agent
AGENTS = ["legatus", "c1", "c2", "c3"]
FLOOR = Path(__file__).parent / "_floor_bot.py"


def addressed(agent: str, text: str) -> str:
    return text if agent == "legatus" else f"@{agent} {text}"


CPU: list[float] = []  # the whole tree's CPU seconds of each answer ``ask`` waited for


async def ask(api: FakeBotApi, text: str, expect: str, pid: int | None = None) -> float:
    """Seconds from the message queued on the server to its answer arriving there (and,
    given the daemon's ``pid``, its tree's CPU for it in ``CPU``)."""
    before = tree_cpus(pid) if pid else {}
    start = len(api.calls)
    t = time.monotonic()
    api.add_message(text, user_id=CAESAR)

    def answer(call: Call) -> bool:
        said = str(call.params.get("text", ""))
        return expect in said and not said.startswith("⏳")

    call = await api.wait_for_call("sendMessage", answer, start=start, timeout=120)
    if pid:
        await asyncio.sleep(0.2)  # its CLI's end of turn
        CPU.append(spent(before, tree_cpus(pid)))
    return call.at - t


async def idle_cpu(pid: int, seconds: float = IDLE_S) -> float:
    """ms of CPU per second of wall time, the whole tree, while nothing is asked."""
    before, t = tree_cpus(pid), time.monotonic()
    await asyncio.sleep(seconds)
    return spent(before, tree_cpus(pid)) * 1000 / (time.monotonic() - t)


def clis(pid: int) -> int:
    """The daemon's CLI processes (its children; a CLI's own helpers are not counted)."""
    return len(children(pid))


async def floor(root: Path, model: FakeMessagesApi) -> dict[str, float]:
    async with FakeBotApi() as api:
        env = {**os.environ, **model.safe_cli_env(root / "floor-cli"), "IS_SANDBOX": "1"}
        process = subprocess.Popen(  # noqa: ASYNC220 (started once, not awaited)
            [sys.executable, str(FLOOR), api.base_url, api.token, "", PINNED_MODEL],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await api.wait_for_call("getUpdates", timeout=60, completed=False)
            await asyncio.sleep(2)
            out = {"start rss": tree_rss(process.pid), "start cpu": await idle_cpu(process.pid)}
            latencies = [await ask(api, f"REPLY floor {i}", f"floor {i}") for i in range(WARM)]
            await asyncio.sleep(2)
            out["answer"] = statistics.median(latencies)
            out["idle rss"] = tree_rss(process.pid)
            out["idle cpu"] = await idle_cpu(process.pid)
            out["idle clis"] = clis(process.pid)
            return out
        finally:
            process.terminate()
            process.wait(timeout=30)


async def legio(root: Path, model: FakeMessagesApi) -> dict[str, float]:
    castra = make_castra(root, AGENTS[1:])
    out: dict[str, float] = {}
    async with FakeBotApi() as api:
        config = write_daemon_config(
            castra,
            api,
            "",
            extra=f'model = "{PINNED_MODEL}"\nsession_idle_timeout_minutes = {IDLE_MIN}',
        )
        daemon = Daemon(config, api, None, env=model.safe_cli_env(root / "cli"))
        await daemon.start()
        assert daemon.process is not None
        pid = daemon.process.pid
        try:
            await asyncio.sleep(2)
            out["start rss"] = rss_mib(pid)
            out["start cpu"] = await idle_cpu(pid)
            cold, warm = [], []
            warm_cpu = []
            for agent in AGENTS:
                cold.append(await ask(api, addressed(agent, f"REPLY the word is {agent}"), agent))
            for i in range(WARM):  # in turn: all four are live at the end
                for agent in AGENTS:
                    text = addressed(agent, f"REPLY warm {i}")
                    warm.append(await ask(api, text, f"warm {i}", pid))
                    warm_cpu.append(CPU[-1])
            out["first"] = cold[0]  # the SDK imported, then the CLI started
            out["cold"] = statistics.median(cold[1:])
            out["warm"] = statistics.median(warm)
            out["warm cpu"] = statistics.median(warm_cpu)
            await asyncio.sleep(1)
            out["live rss"] = tree_rss(pid)
            out["live daemon rss"] = rss_mib(pid)
            out["live clis"] = clis(pid)
            out["live processes"] = len(tree(pid)) - 1
            out["live cpu"] = await idle_cpu(pid, min(IDLE_S, IDLE_MIN * 60 * 0.6))
            deadline = time.monotonic() + IDLE_MIN * 60 * 2 + 60
            while clis(pid) and time.monotonic() < deadline:  # noqa: ASYNC110 (polls /proc)
                await asyncio.sleep(0.5)
            await asyncio.sleep(1)
            out["reaped rss"] = tree_rss(pid)
            out["reaped daemon rss"] = rss_mib(pid)
            out["reaped clis"] = clis(pid)
            out["reaped processes"] = len(tree(pid)) - 1
            out["reaped cpu"] = await idle_cpu(pid)
            seen = len(model.requests)
            resumed = []
            resumed_cpu = []
            for agent in AGENTS:
                text = addressed(agent, "REPLY after idle")
                resumed.append(await ask(api, text, "after idle", pid))
                resumed_cpu.append(CPU[-1])
            out["resumed"] = statistics.median(resumed)
            out["resumed cpu"] = statistics.median(resumed_cpu)
            carried = [json.dumps(r["messages"]) for r in model.requests[seen:]]
            out["remembered"] = sum(
                any(f"the word is {agent}" in c for c in carried) for agent in AGENTS
            )
            out["history again"] = sum("context_notice" in c for c in carried)
        finally:
            await daemon.terminate()
    return out


async def measure(root: Path) -> tuple[dict[str, float], dict[str, float]]:
    with FakeMessagesApi() as model:
        base = await floor(root, model)
        ours = await legio(root, model)
    return ours, base


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="legio-bench-idle-"))
    try:
        ours, base = asyncio.run(measure(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per_cli = (ours["live rss"] - ours["live daemon rss"]) / max(1, ours["live clis"])
    cli_cpu = (ours["live cpu"] - ours["reaped cpu"]) / max(1, ours["live clis"])
    break_even = (ours["resumed cpu"] - ours["warm cpu"]) * 1000 / max(cli_cpu, 0.01) / 60
    rows = [
        [
            "at start (no CLI)",
            f"{ours['start rss']:.0f}",
            f"{ours['start cpu']:.2f}",
            f"{base['start rss']:.0f}",
            f"{base['start cpu']:.2f}",
        ],
        [
            f"four agents live ({ours['live clis']:.0f} CLIs)",
            f"{ours['live rss']:.0f}",
            f"{ours['live cpu']:.2f}",
            "—",
            "—",
        ],
        [
            f"four agents idle past the timeout ({ours['reaped clis']:.0f} CLIs)",
            f"{ours['reaped rss']:.0f}",
            f"{ours['reaped cpu']:.2f}",
            f"{base['idle rss']:.0f}",
            f"{base['idle cpu']:.2f}",
        ],
    ]
    body = (
        f"Real daemon, real bundled CLI, fake Messages API and Bot API; "
        f"`session_idle_timeout_minutes = {IDLE_MIN}`; idle CPU over {IDLE_S:.0f} s. "
        "Whole process tree.\n\n"
        + table(
            ["state", "Legio MiB", "Legio idle CPU ms/s", "floor MiB", "floor idle CPU ms/s"],
            rows,
        )
        + "\n\n"
        + table(
            ["answer (median, ms)", "Legio", "floor (a CLI per message)"],
            [
                ["warm (its CLI live)", f"{ours['warm'] * 1000:.0f}", "—"],
                [
                    "first after start (SDK imported, CLI started)",
                    f"{ours['first'] * 1000:.0f}",
                    "—",
                ],
                ["first of each later agent (CLI started)", f"{ours['cold'] * 1000:.0f}", "—"],
                ["first after idle (CLI resumed)", f"{ours['resumed'] * 1000:.0f}", "—"],
                ["every message", "—", f"{base['answer'] * 1000:.0f}"],
            ],
        )
        + f"\n\n- A live CLI costs about **{per_cli:.0f} MiB** and **{cli_cpu:.1f} ms/s** idle. "
        f"A resumed answer costs the tree {ours['resumed cpu'] * 1000:.0f} ms of CPU against "
        f"{ours['warm cpu'] * 1000:.0f} ms warm: keeping a CLI live costs as much CPU as "
        f"one resume after **{break_even:.1f} min**. "
        f"Reaped: {ours['reaped processes']:.0f} processes left under the daemon. "
        f"After idle, the first answer costs **+{(ours['resumed'] - ours['warm']) * 1000:.0f}"
        "ms** over a warm one (target ≤ 1,000 ms); "
        f"{ours['remembered']:.0f} of 4 resumed agents had their earlier conversation "
        f"(and {ours['history again']:.0f} were given history again). Legio's own process: "
        f"{ours['start rss']:.0f} MiB at start, {ours['live daemon rss']:.0f} MiB with four "
        f"agents live, {ours['reaped daemon rss']:.0f} MiB after "
        f"{len(AGENTS) * (WARM + 1)} messages and the reaper. The first answer after start "
        f"took {(ours['first'] - ours['cold']) * 1000:+.0f} ms over a later agent's first.\n"
    )
    print(body)
    update_section("bench_idle", "## Idle (`bench_idle.py`)\n\n" + body)


if __name__ == "__main__":
    main()
