"""High fidelity: the real bundled Claude CLI behind the SessionManager, on a fake Messages API."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.legion import Legion


async def test_memoria_tool_call_then_restart_and_resume(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    with FakeMessagesApi() as api:
        legion = await Legion(
            castra_dir,
            fake_cli,
            cli_path="",
            model=PINNED_MODEL,
            env=api.safe_cli_env(tmp_path / "cli"),
        ).start()
        try:
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

            checkpoint = await legion.praetorium.get_checkpoint("vorenus")
            assert checkpoint is not None
            await legion.restart()
            seen = len(api.requests)
            replies = await legion.say(["vorenus"], "REPLY resumed")
            assert replies == {"vorenus": "resumed"}
            after = api.requests[seen:]
            context = json.dumps(after[0]["messages"])
            assert "The eagle is kept in the tent." in context  # the resumed thread
            assert "context_notice" not in context
            again = await legion.praetorium.get_checkpoint("vorenus")
            assert again is not None
            assert again.session_id == checkpoint.session_id
        finally:
            await legion.stop()


async def test_the_real_cli_obeys_the_path_guard(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    with FakeMessagesApi() as api:
        env = api.safe_cli_env(tmp_path / "cli")
        legion = await Legion(
            castra_dir, fake_cli, cli_path="", model=PINNED_MODEL, env=env
        ).start()
        try:
            await legion.post("a secret only the praetorium holds", ["legatus"])
            wal = castra_dir.resolve() / "praetorium.db-wal"
            assert wal.exists()
            replies = await legion.say(
                ["vorenus"], f"CALL_TOOL Read {json.dumps({'file_path': str(wal)})}"
            )
            answer = replies["vorenus"]
            assert (
                "Legio's policy: the praetorium (Legio's message store) is not for agents" in answer
            )
            assert "a secret only the praetorium holds" not in answer
            db = castra_dir.resolve() / "praetorium.db"
            replies = await legion.say(
                ["vorenus"], f"CALL_TOOL Read {json.dumps({'file_path': str(db)})}"
            )
            assert "a secret only the praetorium holds" not in replies["vorenus"]
            sent_back = json.dumps(api.requests[-1]["messages"][-1])
            assert "tool_result" in sent_back
        finally:
            await legion.stop()
