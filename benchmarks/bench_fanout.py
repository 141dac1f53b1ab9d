"""Fan-out: @mention 1, 2, 4, 8 centuriones at once, each answering after 1 s (fake CLI).

Wall time divided by the 1 s each answer takes: 1.0 is perfect parallelism. Measured
with cold sessions (the first message, which also starts each CLI) and warm ones.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _report import make_castra, table, update_section

from legio.app import LegioApp
from legio.config import load_config
from tests.fakes.cli_log import FAKE_CLI

NAMES = [f"c{i}" for i in range(8)]


async def run(root: Path) -> list[list[str]]:
    make_castra(root, NAMES)
    (root / "legio.toml").write_text(f'[claude]\ncli_path = "{FAKE_CLI}"\n')
    legatus = await LegioApp.open(load_config(root / "legio.toml"))
    rows = []
    try:
        for count in (1, 2, 4, 8):
            mentions = " ".join(f"@{n}" for n in NAMES[:count])
            cells = [str(count)]
            for label in ("cold", "warm"):
                if label == "cold":
                    for name in legatus.agents():  # every session closed: a cold start
                        await legatus.reset(name)
                started = time.perf_counter()
                replies = await legatus.handle_message(f"{mentions} report\nSLEEP 1")
                elapsed = time.perf_counter() - started
                assert len(replies) == count, replies
                cells.append(f"{elapsed:.2f} s ({elapsed / 1.0:.2f})")
            rows.append(cells)
    finally:
        await legatus.close()
    return rows


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="legio-bench-fanout-"))
    os.environ["FAKE_CLAUDE_LOG_DIR"] = str(root / "log")
    os.environ["FAKE_CLAUDE_STATE_DIR"] = str(root / "state")
    try:
        rows = asyncio.run(run(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    body = table(["centuriones", "cold: wall (÷ 1 s)", "warm: wall (÷ 1 s)"], rows)
    warm8 = float(rows[-1][2].split("(")[1].rstrip(")"))
    body += (
        f"\n\n- 8 centuriones at once, warm: **{warm8:.2f}** × the single answer time "
        "(target ≤ 1.2).\n"
    )
    print(body)
    update_section("bench_fanout", "## Fan-out (`bench_fanout.py`)\n\n" + body)


if __name__ == "__main__":
    main()
