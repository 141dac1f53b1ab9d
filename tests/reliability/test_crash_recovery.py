"""SIGKILL of `legio run` mid-answer, then a restart: nothing lost, nothing twice."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import FakeCli
from tests.fakes.bot_api import FakeBotApi
from tests.legion import processes_of
from tests.reliability.daemon import CAESAR, Daemon, alive, until, write_daemon_config

NOTICE = "⚠️ Interrupted by a restart:"


async def test_sigkill_mid_answer_then_restart_recovers_once(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    async with FakeBotApi() as api:
        config = write_daemon_config(castra_dir, api, str(fake_cli.path))
        daemon = Daemon(config, api, fake_cli)
        await daemon.start()
        try:
            await daemon_answers(api, "hello before the crash")
            request = api.add_message("@vorenus inspect the walls\nSLEEP_FIRST 20 crash")
            await until(lambda: bool(processes_of(fake_cli, "vorenus")), what="vorenus's CLI")
            await until(
                lambda: bool(processes_of(fake_cli, "vorenus")[0].prompts), what="the prompt"
            )
            [orphan] = processes_of(fake_cli, "vorenus")
            daemon.kill()
            assert alive(orphan.pid), "the CLI outlives a SIGKILLed daemon, as the real one does"

            start = len(api.calls)
            await daemon.start()
            assert not alive(orphan.pid), "the restart ends CLIs the dead daemon left"
            notice = await api.wait_for_call(
                "sendMessage", lambda c: str(c.params["text"]).startswith(NOTICE), start=start
            )
            assert "inspect the walls" in notice.params["text"]
            assert "no answer from vorenus" in notice.params["text"]

            # Telegram delivers the unconfirmed update again: no second nuntius, no answer
            api.add_update({"message": request["message"]})
            await daemon_answers(api, "/history 5")
            with sqlite3.connect(castra_dir / "praetorium.db") as db:
                texts = [
                    r[0] for r in db.execute("SELECT text FROM nuntii WHERE sender = 'caesar'")
                ]
            assert texts.count("@vorenus inspect the walls\nSLEEP_FIRST 20 crash") == 1

            start = len(api.calls)
            api.add_message("/retry")
            answer = await api.wait_for_call(
                "sendMessage", lambda c: str(c.params["text"]).startswith("⚔️ vorenus"), start=start
            )
            assert "ECHO: @vorenus inspect the walls" in answer.params["text"]
            again = await daemon_answers(api, "/retry")
            assert again == "Nothing to retry: no interrupted request is waiting."
            sent = api.sent_texts(CAESAR)
            assert sum(t.startswith(NOTICE) for t in sent) == 1
            assert sum(t.startswith("⚔️ vorenus") for t in sent) == 1

            pids = [p.pid for p in fake_cli.processes()]
            assert await daemon.terminate() == 0
            assert not [pid for pid in pids if alive(pid)], "no CLI outlives a clean stop"
            with sqlite3.connect(castra_dir / "praetorium.db") as db:
                assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
                answers = db.execute(
                    "SELECT count(*) FROM nuntii WHERE sender = 'vorenus'"
                ).fetchone()
                assert answers == (1,)
            assert "Traceback" not in daemon.output()
        finally:
            if daemon.process and daemon.process.poll() is None:
                daemon.kill()


async def daemon_answers(api: FakeBotApi, text: str) -> str:
    """Send ``text`` and return the first non-status message the bot sends back."""
    start = len(api.calls)
    api.add_message(text)
    call = await api.wait_for_call(
        "sendMessage", lambda c: not str(c.params["text"]).startswith("⏳"), start=start, timeout=20
    )
    return str(call.params["text"])


WRITER = """
import sys, itertools
from pathlib import Path
from legio.memoria.store import MemoriaStore
store = MemoriaStore(Path(sys.argv[1]), max_document_bytes=1_000_000)
bodies = ["A" * 200_000, "B" * 300_000]
store.publish_actum("plan", "Plan", bodies[0], "vorenus")
print("ready", flush=True)
for i in itertools.count():
    store.publish_actum("plan", "Plan", bodies[i % 2], "vorenus")
"""


async def test_sigkill_during_memoria_writes_leaves_a_whole_document(castra_dir: Path) -> None:
    from legio.memoria.store import MemoriaStore

    store = MemoriaStore(castra_dir, max_document_bytes=1_000_000)
    for round_ in range(12):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(castra_dir)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        await asyncio.sleep(0.02 + 0.013 * round_)
        writer.kill()
        writer.wait()
        writer.stdout.close()
        body = store.read_actum("plan").body
        assert body in ("A" * 200_000, "B" * 300_000)
        assert [d.name for d in store.list_acta().documents] == ["plan"]
