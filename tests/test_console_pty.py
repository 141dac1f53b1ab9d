"""`legio console` on a pseudo-terminal, as a person types: the prompt answers while an
agent works (``/stop`` stops a slow turn at once, ``/status`` answers mid-stream), Ctrl-C
stops the turn and the console stays, Ctrl-D closes it once, and no log record reaches
the conversation (they go to ``castra/state/legio.log``). Fake CLI, real prompt_toolkit."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.conftest import FakeCli
from tests.legion import fake_cli_config

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


@pytest.fixture
def console(castra_dir: Path, fake_cli: FakeCli) -> Iterator[pexpect.spawn]:
    config = fake_cli_config(castra_dir, fake_cli)
    env = {**os.environ, "IS_SANDBOX": "1", "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "legio", "console", "-c", str(config.path)],
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 160),
    )
    child.expect("caesar>")
    try:
        yield child
    finally:
        if child.isalive():
            child.terminate(force=True)


def working(child: pexpect.spawn, agent: str) -> None:
    """Wait until ``/status`` (answered at once, mid-turn) says ``agent`` is working."""
    for _ in range(20):
        child.sendline("/status")
        if child.expect([f"{agent}: working", "caesar>"], timeout=10) == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"{agent} never showed as working")


def test_stop_and_status_answer_while_an_agent_works(
    console: pexpect.spawn, castra_dir: Path
) -> None:
    started = time.monotonic()
    console.sendline("@vorenus SLEEP 30")
    working(console, "vorenus")  # /status answered while the turn runs
    console.sendline("/stop")
    console.expect("Stopping vorenus")
    console.expect(r"\[vorenus\] Interrupted")
    assert time.monotonic() - started < 15  # long before the 30 s turn would end
    console.sendline("@pullo REPLY still here")
    console.expect("still here")


def test_ctrl_c_stops_the_turn_and_ctrl_d_closes_once(
    console: pexpect.spawn, castra_dir: Path
) -> None:
    console.sendline("@vorenus SLEEP 30")
    working(console, "vorenus")
    console.sendcontrol("c")
    console.expect("Stopping vorenus")
    console.sendline("hello again")
    console.expect("ECHO: hello again")
    console.sendcontrol("d")
    console.expect(pexpect.EOF)
    text = ANSI.sub("", console.before or "")
    assert text.count("Legio console closed.") == 1
    assert "Traceback" not in text
    log = castra_dir / "state" / "legio.log"
    assert log.exists() and "INFO" in log.read_text()
    assert not re.search(r"\b(INFO|WARNING) legio\.", text)  # no log record in the chat


def test_status_mid_stream_answers_at_once_and_the_answer_arrives_whole(
    console: pexpect.spawn,
) -> None:
    words = " ".join(f"w{i:02d}" for i in range(40))
    console.sendline(f"@vorenus STREAM 40 0.1 {words}")
    console.expect("━━━━━━━━━━━━")  # the answer's header: it is streaming
    console.sendline("/status")
    console.expect("⚙️ vorenus: working")  # answered while the stream goes on
    console.expect("w39")
    time.sleep(0.5)  # the turn is stored
    console.sendline("/history 1")
    console.expect(f"vorenus → caesar: {words}")  # the answer whole, in order


def test_the_status_line_says_who_does_what_and_for_how_long() -> None:
    from claude_agent_sdk import ToolUseBlock

    from legio.frontends.console.prompt import Board
    from legio.frontends.statusview import status_text
    from legio.sessions.turn import status_of

    bash = ToolUseBlock(
        id="t1", name="Bash", input={"command": "ls -la\n  src", "description": "x"}
    )
    status = status_of("vorenus", bash)
    assert status is not None and (status.kind, status.tool) == ("tool", "Bash")
    line = status_text(status)
    assert line == "⏳ Bash: ls -la src"
    board = Board()
    assert "Ctrl-C stops" in board.text()  # nothing running: the keys
    board.update("vorenus", line)
    board.update("pullo", "⏳ Thinking...")
    board.update("legatus", "⏸ legatus is waiting for your approval: git push")
    text = board.text()
    assert "vorenus: Bash: ls -la src (0s)" in text
    assert "pullo: thinking (0s)" in text
    assert "legatus: waiting for approval (0s)" in text
    board.done("vorenus")
    assert "vorenus" not in board.text()
