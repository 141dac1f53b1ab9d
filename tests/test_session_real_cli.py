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
