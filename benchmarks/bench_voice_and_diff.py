"""Voice notes and project diffs: how long Caesar waits, and what the daemon holds.

Voice: a 10 s and a 60 s OGG/Opus note (encoded with libopus, as Telegram's) transcribed
by the real faster-whisper path on the tiny random model the tests build (no download:
the figures show Legio's own cost — decoding, the worker thread, the lock — not a real
model's; `base` on a laptop CPU is roughly real time / 10). Diff: ``/diff``'s data for a
copy with 200 changed files and a 26 MB change (cut at 20 MB), through ``legio.projects.gitsafe``.
Each case in a fresh process; peak RSS from ``getrusage``.
Target: a 60 s note's overhead under 1 s; the 26 MB diff's peak RSS under 150 MB.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _report import machine, table, update_section

VOICE = """
import asyncio, json, os, resource, sys, time
from pathlib import Path
os.environ["HF_HUB_OFFLINE"] = "1"
from legio.media.voice import Transcriber
from tests.fixtures.whisper_tiny import build_tiny_model, encode_ogg_opus

async def main(folder, seconds):
    model = build_tiny_model(folder / "model")
    note = encode_ogg_opus(folder / "note.ogg", seconds)
    transcriber = Transcriber(str(model), folder / "models", max_seconds=3600)
    await transcriber.transcribe(note)  # the model loads once
    start = time.perf_counter()
    result = await transcriber.transcribe(note)
    elapsed = time.perf_counter() - start
    transcriber.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"s": elapsed, "peak": peak, "duration": result.duration_s,
                      "size": note.stat().st_size}))

asyncio.run(main(Path(sys.argv[1]), float(sys.argv[2])))
"""

DIFF = """
import asyncio, json, resource, sys, time
from pathlib import Path
from legio.castra import Castra
from legio.config import load_config
from legio.projects.copies import Projects
from legio.projects.overview import diff
from tests.gitrepo import git, make_project

async def main(folder, files, size):
    project = make_project(folder / "app")
    castra = folder / "castra"
    (castra / "centuriones" / "vorenus").mkdir(parents=True)
    toml = folder / "legio.toml"
    toml.write_text(f'castra = "{castra}"\\n[projects.app]\\npath = "{project}"\\n')
    config = load_config(toml)
    projects = Projects(config, Castra(config.castra))
    place = await projects.place("vorenus", "app")
    for n in range(files):
        (place.copy / f"module_{n}.py").write_text(f"value = {n}\\n" * 50)
    if size:  # in four files: one over core.bigFileThreshold (8 MB) would be binary
        for n in range(4):
            (place.copy / f"big_{n}.py").write_text(("x" * 99 + "\\n") * (size // 4))
    git(place.copy, "add", ".")
    git(place.copy, "commit", "-qm", "many files", caesar=False)
    start = time.perf_counter()
    report = await diff(projects, place)  # published, then read in the project
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    work = report.work
    print(json.dumps({"s": elapsed, "peak": peak, "files": work.file_count if work else 0,
                      "cut": bool(work and work.cut), "bytes": len(report.text)}))

asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
"""


def child(code: str, *args: str) -> dict[str, float]:
    root = str(Path(__file__).parents[1])
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, cwd=root
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    voice_rows, diff_rows = [], []
    for seconds in (10.0, 60.0):
        with tempfile.TemporaryDirectory() as tmp:
            r = child(VOICE, tmp, str(seconds))
        voice_rows.append(
            [f"{seconds:.0f} s note ({r['size'] / 1024:,.0f} KB)", f"{r['s'] * 1000:,.0f} ms",
             f"{r['peak']:,.0f} MB"]
        )  # fmt: skip
    for label, files, size in (("200 files committed", 200, 0), ("+ a 26 MB change", 200, 260_000)):
        with tempfile.TemporaryDirectory() as tmp:
            r = child(DIFF, tmp, str(files), str(size))
        cut = ", cut at 20 MB" if r["cut"] else ""
        diff_rows.append(
            [label, f"{r['s'] * 1000:,.0f} ms", f"{r['peak']:,.0f} MB",
             f"{r['files']:.0f} files, {r['bytes'] / 1e6:.1f} MB{cut}"]
        )  # fmt: skip
    body = (
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}. Targets: a 60 s note's overhead "
        "under 1 s; the 26 MB diff's peak RSS under 150 MB.\n\n"
        + table(["voice note (tiny model)", "transcribed in", "peak RSS"], voice_rows)
        + "\n\n"
        + table(["/diff of a copy", "made in", "peak RSS", "report"], diff_rows)
        + "\n"
    )
    print(body)
    update_section("bench_voice_and_diff", body)


if __name__ == "__main__":
    main()
