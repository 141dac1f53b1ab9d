"""The operations in Telegram (real python-telegram-bot on the fake Bot API): ``/export``
sends the conversation as a document; the morning digest arrives silently; a failed
automatic backup is said to Caesar."""

from __future__ import annotations

import json
from pathlib import Path

from tests.botbench import CAESAR, running_bot
from tests.conftest import FakeCli


async def test_export_sends_a_document(castra_dir: Path, fake_cli: FakeCli) -> None:
    async with running_bot(castra_dir, fake_cli) as bot:
        await bot.app.engine.praetorium.post(
            "caesar", "@vorenus <b>guard</b> the gate", ["vorenus"]
        )
        await bot.app.engine.praetorium.post("vorenus", "the gate is guarded", ["caesar"])
        await bot.app.engine.praetorium.post("caesar", "legatus only", ["legatus"])
        start = await bot.ask("/export json vorenus since 2020-01-01")
        words = await bot.answer(start, lambda t: t.startswith("Exported"))
        assert words.params["text"] == "Exported 2 messages (0.0 MB)."
        await bot.api.wait_for_call("sendDocument", start=start)
        [upload] = [u for u in bot.api.uploads if u.filename.endswith(".jsonl")]
        assert upload.filename.startswith("legio-vorenus-") and upload.chat_id == CAESAR
        records = [json.loads(line) for line in upload.content.decode().splitlines()]
        assert [r["text"] for r in records] == [
            "@vorenus <b>guard</b> the gate",
            "the gate is guarded",
        ]
        start = await bot.ask("/export html")
        await bot.api.wait_for_call("sendDocument", start=start)
        page = next(u for u in bot.api.uploads if u.filename.endswith(".html")).content.decode()
        assert "&lt;b&gt;guard&lt;/b&gt;" in page and "legatus only" in page
        call = await bot.answer(await bot.ask("/export pdf"))
        assert call.params["text"].startswith("/export does not know 'pdf'.")
        call = await bot.answer(await bot.ask("/export since yesterday"))
        assert "is not a date" in call.params["text"]


async def test_digest_is_silent_and_a_failed_backup_is_said(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the backups should go")
    extra = f'[backup]\ndir = "{blocked}"\n[digest]\nat = "08:00"\n'
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        await bot.app.engine.praetorium.post("caesar", "hello", ["legatus"])
        routine = bot.app.engine.routine
        start = len(bot.api.calls)
        assert await routine.backup_now() is None
        said = await bot.answer(start, lambda t: "automatic backup failed" in t)
        assert str(blocked) in said.params["text"]
        assert str(said.params.get("disable_notification")).lower() in ("none", "false")
        last = json.loads((castra_dir / "state" / "backups" / "last.json").read_text())
        assert last["ok"] is False and last["archive"] is None and str(blocked) in last["error"]
        start = len(bot.api.calls)
        await routine.digest_now()
        digest = await bot.answer(start, lambda t: t.startswith("☀️"))
        assert str(digest.params["disable_notification"]).lower() == "true"
        assert "Caesar: 1 request." in digest.params["text"]
        assert "FAILED" in digest.params["text"]
