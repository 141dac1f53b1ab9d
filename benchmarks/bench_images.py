"""Pictures: time and peak memory of checking a picture on arrival and preparing it for
the model, for an ``@all`` of three agents, in a fresh process per case.

Cases: the 370 KB single-colour 9400×9400 PNG that once cost ~2 GB (now refused as a
picture from its header, delivered as a file), a 7000×7000 PNG (49 MP, just under the
limit: decoded once, downscaled), and a 12000×4000 JPEG (drafted while decoded).
Target: peak RSS of the 9400×9400 case under 300 MB.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _report import machine, table, update_section

CHILD = """
import asyncio, json, resource, sys, time
from pathlib import Path
from legio.media.images import check_image
from legio.sessions.delivery import Pictures
from legio.store.files import FileStore

async def main(path):
    pictures = Pictures(FileStore(path.parent))
    start = time.perf_counter()
    check_image(path, path.name)
    results = await asyncio.gather(
        *(pictures.source(path, path.name) for _ in range(3)), return_exceptions=True
    )
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    shown = sum(1 for r in results if isinstance(r, dict))
    print(json.dumps({"s": elapsed, "peak": peak, "shown": shown, "made": pictures.made}))

asyncio.run(main(Path(sys.argv[1])))
"""


def make(folder: Path) -> list[tuple[str, Path]]:
    from PIL import Image

    from tests.pictures import solid_png

    jpeg = folder / "wide.jpg"
    Image.new("RGB", (12000, 4000), (20, 90, 160)).save(jpeg, quality=90)
    return [
        ("9400×9400 PNG, one colour", solid_png(folder / "huge.png", 9400, 9400)),
        ("7000×7000 PNG, one colour", solid_png(folder / "big.png", 7000, 7000)),
        ("12000×4000 JPEG", jpeg),
    ]


def baseline() -> float:
    code = "import resource, legio.media.images, PIL.Image; "
    code += "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True).stdout)


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = make(Path(tmp))
        base = baseline()
        for label, path in cases:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True
            )
            r = json.loads(done.stdout)
            rows.append(
                [
                    label,
                    f"{path.stat().st_size / 1024:,.0f} KB",
                    f"{r['s'] * 1000:,.0f} ms",
                    f"{r['peak']:,.0f} MB",
                    f"{r['shown']}/3 as a picture, prepared {r['made']}×",
                ]
            )
    text = table(["picture (to @all of 3)", "file", "check + prepare", "peak RSS", "model"], rows)
    body = (
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; a process with Pillow and "
        f"Legio imported peaks at {base:,.0f} MB. Target: the 9400×9400 case under 300 MB.\n\n"
        f"{text}\n"
    )
    print(body)
    update_section("bench_images", body)


if __name__ == "__main__":
    asyncio.run(asyncio.sleep(0))
    main()
