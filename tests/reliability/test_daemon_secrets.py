"""The bot token is in no process an agent can read: the real daemon (`legio run`), the
real bundled CLI (fake Messages API), the fake Bot API.

``legio run`` starts itself again without the token (or any ``env_deny`` variable) in
its environment, so ``/proc/<daemon pid>/environ`` holds none of them; an agent's shell
with the sandbox OFF (the worst case: it sees every process of its user) finds none.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.bot_api import Call, FakeBotApi
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.reliability.daemon import Daemon, write_daemon_config

OTHER_SECRET = "deploy-bot-secret-4711"


async def ask(api: FakeBotApi, text: str, expect: str) -> str:
    start = len(api.calls)
    api.add_message(text)

    def answer(call: Call) -> bool:
        text = str(call.params["text"])
        return expect in text and not text.startswith("⏳")

    call = await api.wait_for_call("sendMessage", answer, start=start, timeout=60)
    return str(call.params["text"])


async def test_no_process_an_agent_can_read_holds_the_bot_token(
    castra_dir: Path, tmp_path: Path
) -> None:
    with FakeMessagesApi() as model:
        async with FakeBotApi() as api:
            config = write_daemon_config(castra_dir, api, "", extra=f'model = "{PINNED_MODEL}"')
            config.write_text(config.read_text() + '[sandbox]\nmode = "off"\n')
            env = {**model.safe_cli_env(tmp_path / "cli"), "DEPLOY_BOT_TOKEN": OTHER_SECRET}
            daemon = Daemon(config, api, None, env=env)
            await daemon.start()  # it polls: the token reached it through the restart
            try:
                assert daemon.process is not None
                pid = daemon.process.pid
                environ = Path(f"/proc/{pid}/environ").read_bytes()  # this test runs as root
                assert b"PATH=" in environ
                for secret in (api.token, OTHER_SECRET, "TELEGRAM_BOT_TOKEN", "DEPLOY_BOT_TOKEN"):
                    assert secret.encode() not in environ, secret
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                assert api.token.encode() not in cmdline

                # an unsandboxed shell of an agent, reading every environment it can
                # (spelled so that the path guard's word check lets it run, and with no
                # loop, which the approval matcher would ask Caesar about)
                every = "p=/pro; cat ${p}c/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'"
                command = (
                    f'{every} | grep -c -F -e "{api.token}" -e "{OTHER_SECRET}"; '
                    f"echo read $({every} | grep -c '^PATH=') environments"
                )
                answer = await ask(
                    api,
                    f"@vorenus CALL_TOOL Bash {json.dumps({'command': command})}",
                    "TOOL_RESULT",
                )
                found, read = answer.split("TOOL_RESULT: ", 1)[1].splitlines()[:2]
                assert int(read.split()[1]) > 3, answer  # it read the daemon's and others
                assert found == "0", answer
                assert await daemon.terminate() == 0
            finally:
                if daemon.process and daemon.process.poll() is None:
                    daemon.kill()
            log = daemon.output()
            assert 'Bash runs UNSANDBOXED ([sandbox] mode = "off") for pullo, vorenus' in log
            assert "Traceback" not in log
