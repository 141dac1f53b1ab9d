"""What an agent can reach, for real: the bundled CLI (sandboxed Bash) on the fake Messages API.

Each agent's CLI has its own config dir (``castra/state/claude/<agent>/``): its
transcripts are its own, a subscription login is copied in, a session saved in the
daemon's shared config dir is moved in when it resumes. No agent reads any CLI config
dir (its own included), the daemon's ``~/.claude*``, or a process's environment, with
its file tools or its shell; glob patterns cannot reach another agent's folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from legio.fence.policy import tmp_dir
from legio.fence.sandbox import detect_sandbox
from legio.memoria import MemoriaStore
from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.legion import Legion

ACCESS_TOKEN = "sk-ant-oat01-LEGIO-TEST-LOGIN"


@dataclass
class Reach:
    legion: Legion
    api: FakeMessagesApi
    root: Path
    shared: Path  # the daemon's CLAUDE_CONFIG_DIR
    home: Path  # the daemon's HOME

    async def call(self, agent: str, tool: str, args: dict[str, object]) -> str:
        """``agent`` runs one tool call; the text the tool gave back."""
        replies = await self.legion.say([agent], f"CALL_TOOL {tool} {json.dumps(args)}")
        reply = replies[agent]
        assert reply.startswith("TOOL_RESULT: "), reply
        return reply.removeprefix("TOOL_RESULT: ")

    def own_dir(self, agent: str) -> Path:
        return self.root / "state" / "claude" / agent

    def transcripts(self, where: Path) -> list[Path]:
        return sorted(where.glob("projects/*/*.jsonl"))


def refused(text: str) -> bool:
    """The CLI's deny rule ("denied by your permission settings") or the path guard."""
    return "denied" in text or "Legio's policy" in text


def _login(path: Path) -> None:
    expires = int(time.time() * 1000) + 3_600_000
    login = {
        "claudeAiOauth": {
            "accessToken": ACCESS_TOKEN,
            "refreshToken": "refresh-never-used",
            "expiresAt": expires,
            "scopes": ["user:inference", "user:profile"],
            "subscriptionType": "max",
        }
    }
    path.write_text(json.dumps(login))
    path.chmod(0o600)


async def _reach(
    castra_dir: Path,
    fake_cli: FakeCli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    login: bool,
) -> AsyncIterator[Reach]:
    assert detect_sandbox().available, "install bubblewrap and socat (.ci/run does)"
    with FakeMessagesApi() as api:
        env = api.safe_cli_env(tmp_path / "cli")
        shared, home = Path(env["CLAUDE_CONFIG_DIR"]), Path(env["HOME"])
        # the daemon's own environment: what protected_entries reads
        monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(shared))
        monkeypatch.setenv("HOME", str(home))
        (home / ".claude.json").write_text('{"secret": "the daemon\'s own CLI state"}')
        if login:
            del env["ANTHROPIC_API_KEY"]
            monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
            _login(shared / ".credentials.json")
        legion = Legion(castra_dir, fake_cli, cli_path="", model=PINNED_MODEL, env=env)
        await legion.start()
        try:
            yield Reach(legion, api, castra_dir.resolve(), shared.resolve(), home.resolve())
        finally:
            await legion.stop()


@pytest.fixture
async def reach(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Reach]:
    """Vorenus and pullo on the real CLI, with an API key in the environment."""
    async for r in _reach(castra_dir, fake_cli, tmp_path, monkeypatch, login=False):
        yield r


@pytest.fixture
async def logged_in(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Reach]:
    """The same with no API key: a subscription login in the daemon's config dir."""
    async for r in _reach(castra_dir, fake_cli, tmp_path, monkeypatch, login=True):
        yield r


async def test_each_agent_keeps_its_own_transcripts_and_reads_none(reach: Reach) -> None:
    r = reach
    secret = "the eagle is buried at the ford"
    assert await r.legion.say(["pullo"], f"REPLY noted: {secret}") == {"pullo": f"noted: {secret}"}
    assert await r.legion.say(["vorenus"], "REPLY ready") == {"vorenus": "ready"}

    [pullos] = r.transcripts(r.own_dir("pullo"))
    assert secret in pullos.read_text()
    [vorenus_own] = r.transcripts(r.own_dir("vorenus"))
    assert secret not in vorenus_own.read_text()
    assert r.transcripts(r.shared) == []  # nothing left in the daemon's shared dir
    assert r.own_dir("pullo").stat().st_mode & 0o777 == 0o700

    for path in (pullos, vorenus_own, r.home / ".claude.json"):
        text = await r.call("vorenus", "Read", {"file_path": str(path)})
        assert refused(text), text
        assert secret not in text and "daemon's own CLI state" not in text
    text = await r.call("vorenus", "Glob", {"pattern": f"{r.root}/state/**/*.jsonl"})
    assert pullos.name not in text
    text = await r.call("vorenus", "Grep", {"pattern": "eagle", "path": str(r.own_dir("pullo"))})
    assert secret not in text and refused(text), text

    # the shell, through the sandbox: spelled so no word names the path
    for command in (
        f"d={r.root}/sta; cat ${{d}}te/claude/*/projects/*/*.jsonl",
        "h=~/.cla; cat ${h}ude.json",
    ):
        text = await r.call("vorenus", "Bash", {"command": command})
        assert secret not in text and "daemon's own CLI state" not in text
        assert "No such file or directory" in text or "Permission denied" in text, text


async def test_a_subscription_login_reaches_every_cli_but_no_agent(logged_in: Reach) -> None:
    r = logged_in
    assert await r.legion.say(["vorenus"], "REPLY logged in") == {"vorenus": "logged in"}
    assert r.api.auth[-1] == f"Bearer {ACCESS_TOKEN}"  # the CLI used the copied login
    copy = r.own_dir("vorenus") / ".credentials.json"
    assert json.loads(copy.read_text())["claudeAiOauth"]["accessToken"] == ACCESS_TOKEN
    assert copy.stat().st_mode & 0o777 == 0o600

    for path in (copy, r.shared / ".credentials.json"):
        text = await r.call("vorenus", "Read", {"file_path": str(path)})
        assert ACCESS_TOKEN not in text and refused(text), text
    command = f"d={r.root}/sta; cat ${{d}}te/claude/vorenus/.credentials.json; env"
    text = await r.call("vorenus", "Bash", {"command": command})
    assert "PATH=" in text  # the command ran
    assert ACCESS_TOKEN not in text


async def test_a_session_from_the_shared_config_dir_is_moved_and_resumed(reach: Reach) -> None:
    r = reach
    await r.legion.say(["vorenus"], "REPLY the bridge over the Rhine is done")
    checkpoint = await r.legion.praetorium.records.get_checkpoint("vorenus")
    assert checkpoint is not None
    await r.legion.stop()
    # as an earlier Legio left it: every CLI's transcripts in the daemon's config dir
    own = r.own_dir("vorenus")
    shutil.move(own / "projects", r.shared / "projects")
    shutil.rmtree(own)

    await r.legion.start()
    seen = len(r.api.requests)
    assert await r.legion.say(["vorenus"], "REPLY resumed") == {"vorenus": "resumed"}
    context = json.dumps(r.api.requests[seen]["messages"])
    assert "the bridge over the Rhine is done" in context  # the resumed thread
    assert "context_notice" not in context
    again = await r.legion.praetorium.records.get_checkpoint("vorenus")
    assert again is not None and again.session_id == checkpoint.session_id
    assert r.transcripts(r.shared) == []
    assert [p.stem for p in r.transcripts(own)] == [checkpoint.session_id]


async def test_glob_patterns_cannot_reach_another_centurios_folder(reach: Reach) -> None:
    r = reach
    note = MemoriaStore(r.root).write_commentarium("pullo", "Secret", "pullo's secret", "pullo")
    name = f"{note.name}.xml"
    pullo = r.root / "centuriones" / "pullo"
    for args in (
        {"pattern": f"{pullo}/**"},
        {"pattern": "../../pullo/**/*.xml"},
        {"pattern": "*.xml", "path": str(r.root / "centuriones" / "PULLO" / "..")},
    ):
        text = await r.call("vorenus", "Glob", args)
        assert name not in text and refused(text), (args, text)
    text = await r.call(
        "vorenus", "Grep", {"pattern": "secret", "glob": f"{pullo}/**", "output_mode": "content"}
    )
    assert "pullo's secret" not in text and refused(text), text


@pytest.fixture
def holder() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose environment holds a secret."""
    env = {**os.environ, "HELD_SECRET": "secret-in-another-process"}
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


async def test_file_tools_cannot_read_a_process_environment(
    reach: Reach, holder: subprocess.Popen[bytes]
) -> None:
    path = f"/proc/{holder.pid}/environ"
    assert b"secret-in-another-process" in Path(path).read_bytes()  # readable to this user
    # the CLI 2.1.330 refuses "device or process files" itself; the guard stands behind
    calls: list[tuple[str, dict[str, object]]] = [
        ("Read", {"file_path": path}),
        ("Grep", {"pattern": "secret-in", "path": path, "output_mode": "content"}),
        ("Grep", {"pattern": "secret-in", "path": f"/proc/{holder.pid}", "glob": "environ"}),
        ("Read", {"file_path": "/proc/self/environ"}),
    ]
    for tool, args in calls:
        text = await reach.call("vorenus", tool, args)
        assert "secret-in-another-process" not in text, text
        assert refused(text) or "process file" in text, text


async def test_no_agent_reads_another_agents_scratch_or_a_claude_backup(reach: Reach) -> None:
    """Each agent has its own ``TMPDIR`` (``castra/tmp/<agent>/``): pullo's background
    command's output is kept there, and vorenus's shell cannot read it, however spelled;
    nor any ``~/.claude*`` entry, one made after the start included."""
    r = reach
    (r.home / ".claude.json.backup").write_text("backup: the daemon's own CLI state")
    text = await r.call(
        "pullo", "Bash", {"command": "echo PULLO-SCRATCH-SECRET", "run_in_background": True}
    )
    assert "Sandbox" not in text, text
    scratch = tmp_dir(r.root, "pullo")
    for _ in range(100):  # the background command's output file
        found = [p for p in scratch.rglob("*") if p.is_file() and "PULLO-SCRATCH" in p.read_text()]
        if found:
            break
        await asyncio.sleep(0.05)
    assert found, (text, sorted(scratch.rglob("*")))  # under pullo's own TMPDIR

    base, name = str(scratch.parent), scratch.name
    spelled = f"t={base[:-3]}; cat ${{t}}{base[-3:]}/{name}/*/*/*/tasks/*.output"
    outside = await asyncio.to_thread(
        subprocess.run, ["bash", "-c", spelled], capture_output=True, text=True
    )
    assert "PULLO-SCRATCH-SECRET" in outside.stdout  # the command reads it, unsandboxed
    for command in (
        spelled,
        f"grep -r PULLO-SCRATCH {scratch}",
        "h=~/.cla; cat ${h}ude.json.backup",
    ):
        text = await r.call("vorenus", "Bash", {"command": command})
        assert "PULLO-SCRATCH-SECRET" not in text and "backup: the daemon" not in text, text

    # a new ~/.claude* entry: the next session of vorenus hides it too
    (r.home / ".claude.json.backup.1764000000").write_text("backup: a newer one")
    text = await r.call("vorenus", "Bash", {"command": "h=~/.cla; cat ${h}ude.json.backup.*"})
    assert "backup: a newer one" not in text, text


def _rotate(path: Path, token: str, minutes: int) -> None:
    """Write a login as the CLI does after refreshing it (a new refresh token too)."""
    login = json.loads(path.read_text())
    login["claudeAiOauth"].update(
        accessToken=token,
        refreshToken=f"refresh-{token}",
        expiresAt=int(time.time() * 1000) + minutes * 60_000,
    )
    path.write_text(json.dumps(login))


async def test_one_login_for_all_a_rotated_token_reaches_every_cli(logged_in: Reach) -> None:
    """A CLI that refreshed the login (and so rotated the refresh token) in its own copy:
    the next request of every other agent carries it, the daemon's own copy gets it, a
    half-written copy is never spread, and `claude login` in the daemon's dir is taken."""
    r = logged_in
    await r.legion.say(["vorenus"], "REPLY one")
    await r.legion.say(["pullo"], "REPLY one")
    assert r.api.auth[-2:] == [f"Bearer {ACCESS_TOKEN}"] * 2

    _rotate(r.own_dir("vorenus") / ".credentials.json", "sk-ant-oat01-ROTATED", 120)
    await r.legion.say(["vorenus"], "REPLY two")
    assert r.api.auth[-1] == "Bearer sk-ant-oat01-ROTATED"
    await r.legion.say(["pullo"], "REPLY two")
    assert r.api.auth[-1] == "Bearer sk-ant-oat01-ROTATED"  # pullo's CLI, pullo's copy
    for copy in (r.own_dir("pullo") / ".credentials.json", r.shared / ".credentials.json"):
        login = json.loads(copy.read_text())["claudeAiOauth"]
        assert login["refreshToken"] == "refresh-sk-ant-oat01-ROTATED"
        assert copy.stat().st_mode & 0o777 == 0o600

    half = r.own_dir("pullo") / ".credentials.json"
    half.write_text('{"claudeAiOauth": {"accessToken": "sk-ant-oat01-HALF')  # cut mid-write
    await r.legion.say(["vorenus"], "REPLY three")
    assert "HALF" not in (r.shared / ".credentials.json").read_text()
    assert "HALF" not in (r.own_dir("vorenus") / ".credentials.json").read_text()
    assert json.loads(half.read_text())["claudeAiOauth"]["accessToken"].endswith("ROTATED")

    _rotate(r.shared / ".credentials.json", "sk-ant-oat01-RENEWED", 240)  # claude login
    await r.legion.say(["pullo"], "REPLY four")
    assert r.api.auth[-1] == "Bearer sk-ant-oat01-RENEWED"


async def test_a_sandbox_that_cannot_start_refuses_the_command_never_runs_it_bare(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A temp folder so deep the sandbox's sockets cannot be made there: the CLI used to
    say "Sandboxing is disabled" and run the command anyway; now it refuses it."""
    import tempfile

    deep = tmp_path / ("x" * 90)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    async for r in _reach(castra_dir, fake_cli, tmp_path, monkeypatch, login=False):
        text = await r.call("vorenus", "Bash", {"command": "echo RAN > ran.txt"})
        assert "failed to initialize" in text and "not allowed" in text, text
        assert not (r.root / "centuriones" / "vorenus" / "workspace" / "ran.txt").exists()
