"""Memory: RSS of the daemon and its Claude CLI children with 0, 1, 4, 8 live sessions.

Real bundled Claude CLI against the fake Messages API (nothing leaves 127.0.0.1), the
real SessionManager. After the sessions are reaped as idle, the total must return to
the baseline. Reports MiB per live session.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _procs import rss_mib, tree
from _report import make_castra, table, update_section

from legio.config import load_config
from legio.memoria import MemoriaStore
from legio.sessions.manager import SessionManager
from legio.store.praetorium import Praetorium
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi

NAMES = [f"c{i}" for i in range(8)]


def descendants(pid: int) -> list[int]:
    return tree(pid)[1:]


def measure() -> tuple[float, float, int]:
    me = os.getpid()
    kids = descendants(me)
    return rss_mib(me), sum(rss_mib(k) for k in kids), len(kids)


async def run(root: Path) -> list[list[str]]:
    castra = make_castra(root, NAMES)
    (root / "legio.toml").write_text(f'model = "{PINNED_MODEL}"\n[claude]\ncli_path = ""\n')
    config = load_config(root / "legio.toml")
    rows = []
    with FakeMessagesApi() as api:
        praetorium = await Praetorium.open(castra / "praetorium.db")
        manager = SessionManager(
            config, praetorium, MemoriaStore(castra), env=api.safe_cli_env(root / "cli")
        )
        try:
            daemon, kids, count = measure()
            baseline = daemon + kids
            rows.append(["0", f"{daemon:.0f}", f"{kids:.0f} ({count})", f"{baseline:.0f}", "—"])
            live = 0
            for target in (1, 4, 8):
                while live < target:
                    nuntius = await praetorium.post("caesar", "REPLY hi", [NAMES[live]])
                    await manager.answer(NAMES[live], nuntius)
                    live += 1
                await asyncio.sleep(1)
                daemon, kids, count = measure()
                per = (daemon + kids - baseline) / target
                rows.append(
                    [
                        str(target),
                        f"{daemon:.0f}",
                        f"{kids:.0f} ({count})",
                        f"{daemon + kids:.0f}",
                        f"{per:.0f}",
                    ]
                )
            manager.reaper.idle_timeout_s = 0
            await manager.reap_idle()
            await asyncio.sleep(1)
            daemon, kids, count = measure()
            rows.append(
                [
                    "after reaping",
                    f"{daemon:.0f}",
                    f"{kids:.0f} ({count})",
                    f"{daemon + kids:.0f}",
                    "—",
                ]
            )
        finally:
            await manager.shutdown()
            await praetorium.close()
    return rows


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="legio-bench-memory-"))
    try:
        rows = asyncio.run(run(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    body = table(
        [
            "live sessions",
            "daemon MiB",
            "CLI children MiB (processes)",
            "total MiB",
            "MiB per session",
        ],
        rows,
    )
    baseline, after = float(rows[0][3]), float(rows[-1][3])
    body += (
        f"\n\n- Each live session costs about **{rows[3][4]} MiB** (the real CLI). "
        "After idle reaping "
        f"the total is {after:.0f} MiB against a baseline of {baseline:.0f} MiB "
        f"({'back to baseline' if after <= baseline * 1.1 + 20 else 'NOT back to baseline'}).\n"
    )
    print(body)
    update_section("bench_memory", "## Memory (`bench_memory.py`)\n\n" + body)


if __name__ == "__main__":
    main()
