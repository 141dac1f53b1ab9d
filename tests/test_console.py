"""`legio console` as a user runs it, through a pipe: a message, /history, a clean exit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import FakeCli
from tests.legion import fake_cli_config


def run_console(
    castra_dir: Path, fake_cli: FakeCli, stdin: str
) -> subprocess.CompletedProcess[str]:
    config = fake_cli_config(castra_dir, fake_cli)
    assert config.path is not None
    env = {**os.environ, "IS_SANDBOX": "1"}  # tests may run as root; the fake CLI does not care
    return subprocess.run(
        [sys.executable, "-m", "legio", "console", "-c", str(config.path)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_a_message_history_and_a_clean_exit(castra_dir: Path, fake_cli: FakeCli) -> None:
    result = run_console(castra_dir, fake_cli, "hello legatus\n@vorenus THINK hmm\n/history\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("Legio console:")
    assert "legatus: ECHO: hello legatus" in out
    assert "  [vorenus] ⏳ Thinking..." in out
    assert (
        "⚔️ vorenus — Code reviewer and software engineer\n━━━━━━━━━━━━\nECHO: @vorenus THINK hmm"
        in out
    )
    assert "caesar → legatus: hello legatus" in out
    assert out.rstrip().endswith("Legio console closed.")
    assert "Traceback" not in result.stderr
    pids = [p.pid for p in fake_cli.processes()]
    assert len(pids) == 2
    for pid in pids:  # every agent's CLI is gone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"CLI {pid} outlived the console")


def test_an_immediate_end_of_input_exits_cleanly(castra_dir: Path, fake_cli: FakeCli) -> None:
    result = run_console(castra_dir, fake_cli, "")
    assert result.returncode == 0
    assert result.stdout.rstrip().endswith("Legio console closed.")
    assert fake_cli.processes() == []


def test_admin_commands_work_in_the_console(castra_dir: Path, fake_cli: FakeCli) -> None:
    result = run_console(castra_dir, fake_cli, "/status\n/reset nobody\n/help\n")
    assert "💤 legatus: idle · no live session" in result.stdout
    assert "No agent named 'nobody'." in result.stdout
    assert "/search <words>" in result.stdout


def test_attach_gives_a_file_to_an_agent_and_files_sent_back_are_printed(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("the eagle is in the tent\n")
    send = json.dumps({"path": "inbox/1-notes.txt", "caption": "back to you"})
    lines = [
        f"/attach {notes} @vorenus CALL_TOOL memoria_vorenus send_file {send}",
        "/attach /no/such/file.txt",
        "/attach",
        "/history",
    ]
    result = run_console(castra_dir, fake_cli, "\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "TOOL_RESULT: Queued 1-notes.txt" in out
    sent = re.search(r"📎 vorenus sent 1-notes\.txt: (\S+)", out)
    assert sent is not None
    assert Path(sent.group(1)).read_text() == "the eagle is in the tent\n"
    assert "⚠️ /no/such/file.txt is not a file: give the path of an existing file" in out
    assert "Usage: /attach PATH [text]" in out
    assert "📎 notes.txt" in out and "📎 1-notes.txt" in out
    [prompt] = [p for proc in fake_cli.processes() for p in proc.prompts]
    inbox = castra_dir.resolve() / "centuriones/vorenus/workspace/inbox/1-notes.txt"
    assert f'<attachment kind="document" name="notes.txt" path="{inbox}"' in prompt


def test_the_console_asks_before_a_matching_command(castra_dir: Path, fake_cli: FakeCli) -> None:
    prompt = castra_dir / "centuriones" / "vorenus" / "prompt.md"
    prompt.write_text(
        prompt.read_text().replace("---\n", "---\ntools: [Bash]\nask: ['Bash(touch:*)']\n", 1)
    )
    call = '@vorenus TOOL Bash {"command": "touch asked.txt"}'
    # a /command typed while the approval waits runs as a command, not as a deny reason
    lines = f"{call}\n/status\nnot today\n{call}\no\n"
    result = run_console(castra_dir, fake_cli, lines)
    assert result.returncode == 0, result.stderr
    assert "⚔️ vorenus asks to use Bash:\ntouch asked.txt\n" in result.stdout
    assert "vorenus: working" in result.stdout  # /status answered while it waited
    assert "His reason: /status" not in result.stdout
    assert "Caesar denied this call. His reason: not today" in result.stdout
    assert (castra_dir / "centuriones" / "vorenus" / "workspace" / "asked.txt").exists()


def test_the_console_passes_on_an_agents_question(castra_dir: Path, fake_cli: FakeCli) -> None:
    question = {
        "question": "Which road?",
        "header": "Road",
        "options": [
            {"label": "Appia", "description": "s"},
            {"label": "Latina", "description": "n"},
        ],
        "multiSelect": True,
    }
    call = f"@vorenus TOOL AskUserQuestion {json.dumps({'questions': [question]})}"
    result = run_console(castra_dir, fake_cli, f"{call}\n2,1\n")
    assert "⚔️ vorenus asks: Which road?\n  1. Appia — s\n  2. Latina — n" in result.stdout
    assert '"Which road?"="Latina, Appia"' in result.stdout


def test_help_lists_attach_and_status_counts_one_turn(castra_dir: Path, fake_cli: FakeCli) -> None:
    result = run_console(castra_dir, fake_cli, "hello\n/status\n/help\n")
    assert result.returncode == 0, result.stderr
    assert "1 turn," in result.stdout and "1 turns" not in result.stdout
    assert "In this console: /attach PATH [text]" in result.stdout
    assert "up to 20 MB" in result.stdout
    assert "legatus: Legio:" not in result.stdout  # Legio's own help is not the Legatus's


def test_retry_in_the_console_says_who_answers(castra_dir: Path, fake_cli: FakeCli) -> None:
    held = "LIMIT_FIRST authentication_failed 0 b\nREPLY salve"
    result = run_console(castra_dir, fake_cli, f"{held}\n/retry\n/retry\n")
    assert result.returncode == 0, result.stderr
    assert "legatus: ⏸ legatus stopped: 🔑" in result.stdout  # the one message of the fault
    assert "legatus: salve" in result.stdout  # /retry's answer, labelled
    assert "\nNothing to retry" in result.stdout  # Legio's own notice is not the Legatus's


def test_attach_takes_a_quoted_path_and_says_the_consoles_own_limit(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    spaced = tmp_path / "my notes.txt"
    spaced.write_text("salve")
    big = tmp_path / "big.bin"
    with big.open("wb") as f:
        f.truncate(21 * 1024 * 1024)
    lines = f'/attach "{spaced}" @vorenus read\n/attach {big}\n'
    result = run_console(castra_dir, fake_cli, lines)
    assert result.returncode == 0, result.stderr
    assert 'name="my notes.txt"' in "".join(p for c in fake_cli.processes() for p in c.prompts)
    assert "the console takes files up to 20 MB" in result.stdout
    assert "Telegram lets a bot" not in result.stdout
