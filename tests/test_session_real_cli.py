"""High fidelity: the real bundled Claude CLI behind the SessionManager, on a fake Messages API."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from PIL import Image

from legio.request import PendingFile
from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi, latest_prompt
from tests.legion import Legion

RealCli = tuple[Legion, FakeMessagesApi]


@pytest.fixture
async def real_cli(castra_dir: Path, fake_cli: FakeCli, tmp_path: Path) -> AsyncIterator[RealCli]:
    """Agents on the real bundled CLI, which talks only to a fake Messages API."""
    with FakeMessagesApi() as api:
        env = api.safe_cli_env(tmp_path / "cli")
        legion = await Legion(
            castra_dir, fake_cli, cli_path="", model=PINNED_MODEL, env=env
        ).start()
        try:
            yield legion, api
        finally:
            await legion.stop()


async def test_memoria_tool_call_then_restart_and_resume(real_cli: RealCli) -> None:
    legion, api = real_cli
    call = {"title": "Eagle", "body": "The eagle is kept in the tent."}
    replies = await legion.say(
        ["vorenus"], f"CALL_TOOL mcp__memoria_vorenus__publish_actum {json.dumps(call)}"
    )
    assert replies["vorenus"].startswith("TOOL_RESULT: Published actum 'eagle'.")
    actum = legion.memoria.read_actum("eagle")
    assert (actum.author, actum.body) == ("vorenus", "The eagle is kept in the tent.")
    first_request = api.requests[0]
    tool_names = [t["name"] for t in first_request["tools"]]
    assert "mcp__memoria_vorenus__publish_actum" in tool_names  # not deferred
    assert "ToolSearch" not in tool_names
    assert {r["model"] for r in api.requests} == {PINNED_MODEL}

    checkpoint = await legion.praetorium.records.get_checkpoint("vorenus")
    assert checkpoint is not None
    await legion.restart()
    seen = len(api.requests)
    replies = await legion.say(["vorenus"], "REPLY resumed")
    assert replies == {"vorenus": "resumed"}
    after = api.requests[seen:]
    context = json.dumps(after[0]["messages"])
    assert "The eagle is kept in the tent." in context  # the resumed thread
    assert "context_notice" not in context
    again = await legion.praetorium.records.get_checkpoint("vorenus")
    assert again is not None
    assert again.session_id == checkpoint.session_id


async def test_the_real_cli_keeps_the_praetorium_from_agents(
    real_cli: RealCli, castra_dir: Path
) -> None:
    legion, api = real_cli
    await legion.post("a secret only the praetorium holds", ["legatus"])
    wal = castra_dir.resolve() / "praetorium.db-wal"
    assert wal.exists()
    replies = await legion.say(["vorenus"], f"CALL_TOOL Read {json.dumps({'file_path': str(wal)})}")
    answer = replies["vorenus"]
    # the CLI's deny rule answers first; the path guard's hook stands behind it
    assert "File is in a directory that is denied by your permission settings" in answer
    assert "a secret only the praetorium holds" not in answer
    db = castra_dir.resolve() / "praetorium.db"
    replies = await legion.say(["vorenus"], f"CALL_TOOL Read {json.dumps({'file_path': str(db)})}")
    assert "a secret only the praetorium holds" not in replies["vorenus"]
    sent_back = json.dumps(api.requests[-1]["messages"][-1])
    assert "tool_result" in sent_back


async def test_the_real_cli_overflow_is_compacted_and_retried_once(real_cli: RealCli) -> None:
    legion, api = real_cli
    await legion.say(["vorenus"], "REPLY the bridge code is 4711")
    # refused twice by the API: the CLI's own compaction and retry do not help,
    # so it reports "Prompt is too long"; Legio's compaction and retry then do
    replies = await legion.say(["vorenus"], "TOO_LONG 2\nREPLY made it")
    assert replies == {"vorenus": "made it"}
    record = await legion.praetorium.records.latest_compaction("vorenus")
    assert record is not None and record.reason == "overflow"
    asked = [r for r in api.requests if "<compaction_request>" in latest_prompt(r)]
    assert len(asked) == 1
    assert "TOO_LONG 2" in json.dumps(asked[0]["messages"])  # asked in the old session
    retried = json.dumps(api.requests[-1]["messages"])
    assert "<compaction_summary" in retried
    assert "context_notice" in retried

    report = await legion.manager.context_report("vorenus")
    assert report.session == "live"
    assert report.sdk_usage is not None  # the real CLI answers get_context_usage
    assert report.sdk_usage.max_tokens == 200_000
    assert report.sdk_usage.total_tokens > 0
    assert all(name.lower() != "free space" for name, _ in report.sdk_usage.categories)


async def test_the_real_cli_sends_an_attached_image_as_an_image_block(
    real_cli: RealCli, tmp_path: Path
) -> None:
    legion, api = real_cli
    buffer = io.BytesIO()
    Image.new("RGB", (24, 16), "green").save(buffer, format="PNG")
    shot = tmp_path / "shot.png"
    shot.write_bytes(buffer.getvalue())
    stored = legion.manager.files.add_copy(shot, "shot.png", "image/png")
    await legion.manager.attachments.stage(
        PendingFile(
            "local:1",
            "REPLY seen",
            "image",
            "image/png",
            "shot.png",
            stored.size,
            sha256=stored.sha256,
        )
    )
    nuntius = await legion.praetorium.post("caesar", "REPLY seen", ["vorenus"], origin="local:1")
    outcomes = await legion.manager.dispatch_many(["vorenus"], nuntius)
    assert outcomes["vorenus"].kind == "answer"  # (the CLI adds an "[Image: source: …]" text)
    content = api.requests[0]["messages"][-1]["content"]
    images = [b for b in content if b.get("type") == "image"]
    assert images == [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(buffer.getvalue()).decode(),
            },
        }
    ]
    texts = " ".join(b.get("text", "") for b in content if b.get("type") == "text")
    assert '<attachment kind="image" name="shot.png" path="' in texts


async def test_the_real_cli_transcript_past_the_bound_starts_a_fresh_session(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    """The bound is read from the transcript the real CLI writes in the agent's own config
    dir: past 1 KiB, the next message is summed up in the old session, then answered in a
    new one that starts from the summary."""
    with FakeMessagesApi() as api:
        env = api.safe_cli_env(tmp_path / "cli")
        legion = await Legion(
            castra_dir, fake_cli, cli_path="", model=PINNED_MODEL, env=env, max_transcript_kib=1
        ).start()
        try:
            await legion.say(["vorenus"], "REPLY the bridge code is 4711")
            first = legion.manager.slot("vorenus").session
            assert first is not None and first.transcript_bytes() > 1024  # found, and past it
            seen = len(api.requests)
            replies = await legion.say(["vorenus"], "REPLY rotated")
            assert replies == {"vorenus": "rotated"}
            asked = [latest_prompt(r) for r in api.requests[seen:]]
            assert "<compaction_request>" in asked[0]  # summed up in the old session first
            now = legion.manager.slot("vorenus").session
            assert now is not None and now.session_id != first.session_id
            assert "<compaction_summary" in json.dumps(api.requests[-1]["messages"])
        finally:
            await legion.stop()
