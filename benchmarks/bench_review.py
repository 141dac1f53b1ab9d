"""Diffs drawn for a phone (``legio.review``): time and peak memory of drawing every
picture of a 40-file, 3,000-line change, the time to its first picture, and how fast a
50 MB generated file and a 10,000-file change degrade to words, each in a fresh process.

The change is real git output: 40 of Legio's own modules committed, then three blocks of
each rewritten (12 lines out, 13 in: 75 changed lines a file). Targets: every picture in
under 2 s on these 2 cores, under 150 MB peak memory above a process that has imported
the renderer (the daemon's baseline has it loaded), the first picture long before the last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _report import machine, table, update_section

ROOT = Path(__file__).parents[1]

# VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's (kept across exec)
HWM = """
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""
CHILD = (
    HWM
    + """
import json, sys, time
from pathlib import Path
from legio.review.rendering import render
diff = Path(sys.argv[1]).read_bytes()
limits = json.loads(sys.argv[2])
before = hwm()
start = time.perf_counter()
rendering = render(diff, **limits)
planned = time.perf_counter() - start
first = None
count = size = 0
for picture in rendering.pictures():
    if first is None:
        first = time.perf_counter() - start
    count += 1
    size += len(picture.png)
elapsed = time.perf_counter() - start
peak = hwm()
print(json.dumps({"s": elapsed, "plan": planned, "first": first, "count": count,
                  "bytes": size, "before": before, "peak": peak, "words": len(rendering.words)}))
"""
)


def git(repo: Path, *args: str) -> bytes:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.invalid",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.invalid",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, check=True, env=env
    ).stdout


def forty_files(folder: Path) -> tuple[bytes, int]:
    """A 40-file change of 75 lines each, as ``git diff -M`` prints it."""
    repo = folder / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    sources = sorted(p for p in (ROOT / "src" / "legio").rglob("*.py") if p.stat().st_size > 9000)
    sources = sources[:40]
    for i, source in enumerate(sources):
        (repo / f"m{i:02}_{source.name}").write_text(source.read_text())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for path in repo.glob("*.py"):
        lines = path.read_text().splitlines(keepends=True)
        for start in (40, 120, 200):
            new = [
                f"    value_{start}_{k} = compute({k}, name='x{k}')  # changed\n" for k in range(13)
            ]
            lines[start : start + 12] = new
        path.write_text("".join(lines))
    diff = git(repo, "diff", "-M", "--no-ext-diff", "--no-textconv")
    changed = sum(
        1
        for line in diff.splitlines()
        if line[:1] in (b"+", b"-") and not line.startswith((b"+++", b"---"))
    )
    return diff, changed


def fifty_mb() -> bytes:
    line = b"+" + b'    "integrity": "sha512-' + b"x" * 70 + b'",\n'
    lines = 50 * 1024 * 1024 // len(line)
    head = b"diff --git a/package-lock.json b/package-lock.json\nnew file mode 100644\n"
    head += b"--- /dev/null\n+++ b/package-lock.json\n"
    return head + f"@@ -0,0 +1,{lines} @@\n".encode() + line * lines


def ten_thousand() -> bytes:
    parts = []
    for i in range(10_000):
        path = f"pkg/sub{i % 50}/module_{i}.py"
        parts.append(
            f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n"
            f"+++ b/{path}\n@@ -1,3 +1,3 @@\n import os\n-x = {i}\n+x = {i + 1}\n y = 2\n"
        )
    return "".join(parts).encode()


def baseline() -> float:
    """Peak RSS of a process that has imported the renderer and drawn one tiny diff."""
    code = HWM + (
        "from legio.review.rendering import render\n"
        "d = b'diff --git a/x.py b/x.py\\n--- a/x.py\\n+++ b/x.py\\n@@ -1 +1 @@\\n-a\\n+b\\n'\n"
        "list(render(d).pictures())\n"
        "print(hwm())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    return float(done.stdout)


def run(path: Path, limits: dict[str, int]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), json.dumps(limits)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = baseline()
        diff, changed = forty_files(folder)
        cases = [
            (f"40 files, {changed:,} changed lines", diff, {"max_pictures": 400}),
            ("50 MB generated file (package-lock.json)", fifty_mb(), {}),
            ("10,000 files", ten_thousand(), {}),
        ]
        for label, data, limits in cases:
            path = folder / "case.diff"
            path.write_bytes(data)
            runs = [run(path, limits) for _ in range(3)]
            best = min(runs, key=lambda r: r["s"])
            peak = max(r["peak"] for r in runs) - base
            first = f"{best['first'] * 1000:,.0f} ms" if best["first"] is not None else "—"
            rows.append(
                [
                    label,
                    f"{len(data) / 1024 / 1024:,.1f} MB",
                    f"{int(best['count'])} ({best['bytes'] / 1024 / 1024:,.1f} MB)",
                    f"{best['plan'] * 1000:,.0f} ms",
                    first,
                    f"{best['s'] * 1000:,.0f} ms",
                    f"{peak:,.0f} MB",
                    f"{int(best['words'])}",
                ]
            )
    headers = ["change", "diff", "pictures", "planned", "first", "all", "peak +", "words"]
    body = (
        f"Best of three runs, each in a fresh process, on {machine()}; 'peak +' is the "
        f"highest peak RSS of the three above a process that imported the renderer and "
        f"drew one tiny diff ({base:,.0f} MB), the diff's own bytes included. "
        "'planned' is reading, ordering and laying out every file; "
        "'first' the first picture drawn; 'all' every picture. Targets: all pictures of "
        "the 40-file change under 2 s, under 150 MB above the baseline; the 50 MB file "
        "and the 10,000 files said in words at once.\n\n"
        f"{table(headers, rows)}\n"
    )
    print(body)
    update_section("bench_review", body)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"({time.perf_counter() - start:.0f} s)")
