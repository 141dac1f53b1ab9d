"""Export: the conversation as Caesar saw it, in Markdown, HTML and JSON Lines, streamed
in bounded memory (a generated history, its peak measured with tracemalloc)."""

from __future__ import annotations

import html
import json
import sqlite3
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from legio.operations.export import ExportSpec, export_history
from legio.store.praetorium import Praetorium

MADE = datetime(2026, 11, 25, 8, tzinfo=UTC)
START = datetime(2026, 10, 1, tzinfo=UTC)


async def generated(path: Path, count: int) -> Path:
    """A praetorium of ``count`` nuntii: Caesar and the Legatus, every 10th to vorenus."""
    async with await Praetorium.open(path):
        pass
    db = sqlite3.connect(path)
    with db:
        db.executemany(
            "INSERT INTO nuntii (id, sender, text, audience, timestamp, project) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                (
                    uuid.uuid4().hex,
                    "caesar" if i % 2 == 0 else ("vorenus" if i % 10 == 1 else "legatus"),
                    f"message {i} " + "lorem ipsum dolor " * 8,
                    json.dumps(
                        ["vorenus"] if i % 10 == 0 else ["caesar"] if i % 2 else ["legatus"]
                    ),
                    (START + timedelta(seconds=30 * i)).isoformat(),
                    "app" if i % 7 == 0 else None,
                )
                for i in range(count)
            ),
        )
    db.close()
    return path


async def test_markdown_html_json_show_who_when_files_projects(tmp_path: Path) -> None:
    async with await Praetorium.open(tmp_path / "p.db") as p:
        ask = await p.post("caesar", "@vorenus fix <the> gate & wall", ["vorenus"], project="app")
        answer = await p.post(
            "vorenus",
            "Done: **fixed** <script>x</script>",
            ["caesar"],
            reply_to=ask.id,
            project="app",
        )
        await p.post("caesar", "to the legatus", ["legatus"])
        await p.connection.execute(
            "INSERT INTO attachments (nuntius_seq, direction, kind, mime_type, name, size, "
            "sha256, created_at) VALUES (?, 'out', 'document', 'text/plain', 'gate.diff', "
            "2048, 'ab', '2026-11-25')",
            (answer.seq,),
        )
    rome = ZoneInfo("Europe/Rome")
    md = export_history(tmp_path / "p.db", tmp_path / "a.md", ExportSpec("md", zone=rome), MADE)
    text = md.path.read_text()
    assert md.nuntii == 3
    local = ask.timestamp.astimezone(rome)
    assert f"**#{ask.seq} · {local:%Y-%m-%d %H:%M} · caesar → vorenus** · #app" in text
    assert f"reply to #{ask.seq}" in text
    assert "📎 gate.diff (document, 2.0 KB, sent by the agent)" in text
    page = export_history(
        tmp_path / "p.db", tmp_path / "a.html", ExportSpec("html", agent="vorenus"), MADE
    )
    body = page.path.read_text()
    assert page.nuntii == 2  # the Legatus's message is not vorenus's conversation
    assert "<script>x</script>" not in body and html.escape("<script>x</script>") in body
    assert "fix &lt;the&gt; gate &amp; wall" in body
    assert body.startswith("<!doctype html>") and body.rstrip().endswith("</html>")
    assert "http" not in body  # self-contained: nothing fetched
    lines = export_history(tmp_path / "p.db", tmp_path / "a.jsonl", ExportSpec("json"), MADE)
    records = [json.loads(line) for line in lines.path.read_text().splitlines()]
    assert [r["seq"] for r in records] == [ask.seq, answer.seq, ask.seq + 2]
    assert records[1]["files"] == [
        {"name": "gate.diff", "kind": "document", "size": 2048, "direction": "out"}
    ]
    assert records[1]["reply_to"] == ask.seq and records[1]["project"] == "app"


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
async def test_export_streams_in_bounded_memory(tmp_path: Path, fmt: str) -> None:
    small = await generated(tmp_path / "small.db", 2_000)
    large = await generated(tmp_path / "large.db", 30_000)
    peaks = {}
    for name, path in (("small", small), ("large", large)):
        tracemalloc.start()
        try:
            result = export_history(path, tmp_path / f"{name}.{fmt}", ExportSpec(fmt), MADE)  # type: ignore[arg-type]
            peaks[name] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.nuntii == (2_000 if name == "small" else 30_000)
    # fifteen times the history, not twenty times the memory: batches, not the whole
    assert peaks["large"] < 8 * 1024 * 1024, peaks
    assert peaks["large"] < 2 * peaks["small"] + 1024 * 1024, peaks
    assert result.size > 30_000 * 100


async def test_since_and_agent_filter_by_index(tmp_path: Path) -> None:
    path = await generated(tmp_path / "p.db", 2_500)
    since = START + timedelta(seconds=30 * 2_000)
    result = export_history(
        path, tmp_path / "v.jsonl", ExportSpec("json", agent="vorenus", since=since), MADE
    )
    seqs = [json.loads(line)["seq"] for line in result.path.read_text().splitlines()]
    # seq i+1 holds message i: to vorenus every i % 10 == 0, from vorenus i % 10 == 1
    expected = [i + 1 for i in range(2_000, 2_500) if i % 10 in (0, 1)]
    assert seqs == expected
