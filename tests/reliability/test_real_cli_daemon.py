"""High fidelity: the real daemon process, the real bundled Claude CLI (fake Messages API),
the fake Bot API: a conversation, a memoria tool call, SIGTERM, restart, resumed context."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from tests.fakes.bot_api import Call, FakeBotApi
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.reliability.daemon import Daemon, write_daemon_config


async def ask(api: FakeBotApi, text: str, expect: str) -> str:
    start = len(api.calls)
    api.add_message(text)

    def answer(call: Call) -> bool:  # not the status message, which may preview the answer
        text = str(call.params["text"])
        return expect in text and not text.startswith("⏳")

    call = await api.wait_for_call("sendMessage", answer, start=start, timeout=60)
    return str(call.params["text"])


async def test_real_cli_behind_the_daemon_survives_a_restart(
    castra_dir: Path, tmp_path: Path
) -> None:
    with FakeMessagesApi() as model:
        async with FakeBotApi() as api:
            config = write_daemon_config(castra_dir, api, "", extra=f'model = "{PINNED_MODEL}"')
            daemon = Daemon(config, api, None, env=model.safe_cli_env(tmp_path / "cli"))
            await daemon.start()
            try:
                answer = await ask(api, "REPLY Ave, Caesar", "Ave")
                assert answer == "Ave, Caesar"
                call = {"title": "Bridge", "body": "The bridge over the Rhine is done."}
                answer = await ask(
                    api,
                    f"@vorenus CALL_TOOL mcp__memoria_vorenus__publish_actum {json.dumps(call)}",
                    "TOOL_RESULT",
                )
                assert answer.startswith("⚔️ vorenus")
                assert "Published actum 'bridge'." in answer
                actum = (castra_dir / "acta" / "bridge.xml").read_text()
                assert "The bridge over the Rhine is done." in actum
                assert await daemon.terminate() == 0

                seen = len(model.requests)
                await daemon.start()
                answer = await ask(api, "@vorenus REPLY I remember", "I remember")
                assert answer.endswith("I remember")
                resumed = json.dumps(model.requests[seen]["messages"])
                assert "The bridge over the Rhine is done." in resumed  # the resumed thread
                assert "context_notice" not in resumed
                assert {r["model"] for r in model.requests} == {PINNED_MODEL}
                assert await daemon.terminate() == 0
            finally:
                if daemon.process and daemon.process.poll() is None:
                    daemon.kill()
            with sqlite3.connect(castra_dir / "praetorium.db") as db:
                senders = [r[0] for r in db.execute("SELECT sender FROM nuntii ORDER BY seq")]
            assert senders == ["caesar", "legatus", "caesar", "vorenus", "caesar", "vorenus"]
            assert "Traceback" not in daemon.output()


async def test_a_stop_right_behind_a_slow_request_holds_in_the_real_daemon(
    castra_dir: Path, tmp_path: Path
) -> None:
    # "@vorenus … (slow)" and 0.1 s later "/stop vorenus": the stop says it stopped it, the
    # answer never comes, and vorenus takes its next request at once
    with FakeMessagesApi() as model:
        async with FakeBotApi() as api:
            config = write_daemon_config(castra_dir, api, "", extra=f'model = "{PINNED_MODEL}"')
            daemon = Daemon(config, api, None, env=model.safe_cli_env(tmp_path / "cli"))
            await daemon.start()
            try:
                start = len(api.calls)
                api.add_message("@vorenus SLOW 60")
                await asyncio.sleep(0.1)
                stop = await ask(api, "/stop vorenus", "vorenus")
                assert stop.startswith("Stopping vorenus"), stop
                ended = await api.wait_for_call(
                    "sendMessage",
                    lambda c: str(c.params["text"]).startswith("⚔️ vorenus"),
                    start=start,
                    timeout=60,
                )
                assert str(ended.params["text"]).endswith(
                    ("[vorenus] Interrupted.", "[vorenus] Stopped before it started.")
                )
                model.release()  # the fake model reads SLOW in the history the next query carries
                answer = await ask(api, "@vorenus REPLY next", "next")
                assert answer.endswith("next")
                texts = [str(c.params.get("text", "")) for c in api.calls_of("sendMessage")]
                assert not any("ECHO" in t for t in texts)  # the stopped request never answered
                assert await daemon.terminate() == 0
            finally:
                model.release()
                if daemon.process and daemon.process.poll() is None:
                    daemon.process.kill()
