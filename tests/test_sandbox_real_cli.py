"""The Bash sandbox for real: the bundled CLI under bubblewrap, on the fake Messages API.

The fake model asks for a built-in tool call (``CALL_TOOL Bash {...}``) and answers
with the tool's result, so each test sees what the shell saw. Commands that name a
protected path plainly are also refused by the CLI's own rule check; the ones
spelled indirectly (``d=pul; ...${d}lo``) get past that check and show the
operating-system sandbox holding by itself.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from legio.fence.policy import scrub_environment
from legio.fence.sandbox import detect_sandbox
from legio.memoria import MemoriaStore
from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.legion import Legion

BOT_TOKEN = "123456:BOT-TOKEN-NEVER-FOR-AGENTS"


class _Recorder(BaseHTTPRequestHandler):
    seen: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.send_header("content-length", "7")
        self.end_headers()
        self.wfile.write(b"reached")


@pytest.fixture
def local_server() -> Iterator[tuple[int, list[str]]]:
    """An HTTP server on 127.0.0.1 that records every request it gets."""
    seen: list[str] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Sandboxed:
    legion: Legion
    root: Path
    workspace: Path
    granted: Path
    outside: Path

    async def call(self, tool: str, args: dict[str, object]) -> str:
        """Vorenus runs one tool call; the text the tool gave back."""
        replies = await self.legion.say(["vorenus"], f"CALL_TOOL {tool} {json.dumps(args)}")
        reply = replies["vorenus"]
        assert reply.startswith("TOOL_RESULT: "), reply
        return reply.removeprefix("TOOL_RESULT: ")

    async def bash(self, command: str, **more: object) -> str:
        return await self.call("Bash", {"command": command, **more})


@pytest.fixture
async def sandboxed(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Sandboxed]:
    """Vorenus on the real CLI with its default tools (Bash included, sandboxed) and
    ``add_dirs: [<tmp>/myapp]``; shell network allowed to ``localhost`` only."""
    assert detect_sandbox().available, "install bubblewrap and socat (.ci/run does)"
    granted = tmp_path / "myapp"
    granted.mkdir()
    prompt = castra_dir / "centuriones" / "vorenus" / "prompt.md"
    prompt.write_text(prompt.read_text().replace("---\n", f"---\nadd_dirs: [{granted}]\n", 1))
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", BOT_TOKEN)
    with FakeMessagesApi() as api:
        env = api.safe_cli_env(tmp_path / "cli")
        legion = Legion(
            castra_dir,
            fake_cli,
            cli_path="",
            model=PINNED_MODEL,
            env=env,
            toml_tail='[sandbox]\nallowed_domains = ["localhost"]\n',
        )
        await legion.start()
        scrub_environment(legion.config)  # as LegioApp.open does before any CLI starts
        root = castra_dir.resolve()
        try:
            yield Sandboxed(
                legion=legion,
                root=root,
                workspace=root / "centuriones" / "vorenus" / "workspace",
                granted=granted.resolve(),
                outside=tmp_path.resolve() / "outside.txt",
            )
        finally:
            await legion.stop()


async def test_bash_writes_in_its_workspace_and_granted_folder_only(sandboxed: Sandboxed) -> None:
    s = sandboxed
    assert await s.bash("echo built > out.txt && cat out.txt") == "built"
    assert (s.workspace / "out.txt").read_text() == "built\n"

    assert await s.bash(f"echo ok > {s.granted}/made.txt && cat {s.granted}/made.txt") == "ok"
    assert (s.granted / "made.txt").read_text() == "ok\n"

    text = await s.bash(f"echo bad > {s.outside}")
    assert "Read-only file system" in text
    text = await s.bash(f"echo bad > {s.outside}", dangerouslyDisableSandbox=True)
    assert "Read-only file system" in text
    assert not s.outside.exists()

    env = await s.bash("env")
    assert "PATH=" in env  # the command ran
    assert BOT_TOKEN not in env
    assert "TELEGRAM_BOT_TOKEN" not in env


async def test_bash_and_file_tools_cannot_touch_what_legio_protects(sandboxed: Sandboxed) -> None:
    s = sandboxed
    await s.legion.post("a secret only the praetorium holds", ["legatus"])
    note = MemoriaStore(s.root).write_commentarium("pullo", "Secret", "pullo's secret", "pullo")
    commentarius = s.root / "centuriones" / "pullo" / "commentarii" / f"{note.name}.xml"
    prompt = s.root / "centuriones" / "vorenus" / "prompt.md"
    db = s.root / "praetorium.db"
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (db, commentarius, prompt)}

    # 6*7 is written, so the command's own text (kept in the praetorium) never matches
    text = await s.bash(f"echo $((6*7))4711 >> {db}")  # the path guard's own check
    assert "Legio's policy: the praetorium (Legio's message store) is not for agents" in text
    text = await s.bash(f"d={s.root}/praetor; echo $((6*7))4711 >> ${{d}}ium.db; cat ${{d}}ium.db")
    assert "praetorium.db: Permission denied" in text
    assert "a secret only the praetorium holds" not in text
    for name in ("praetorium.db", "praetorium.db-wal"):
        assert b"424711" not in (s.root / name).read_bytes()

    text = await s.bash(f"cat {commentarius}")
    assert "pullo's secret" not in text
    sneaky = str(commentarius).replace("/pullo/", "/${d}lo/")
    text = await s.bash(f"d=pul; cat {sneaky}")
    assert "No such file or directory" in text
    assert "pullo's secret" not in text

    text = await s.bash("f=../prompt; echo evil >> $f.md")
    assert "Read-only file system" in text

    written = await s.call("Write", {"file_path": "plan.md", "content": "step one"})
    assert written.startswith("File created successfully")
    edited = await s.call(
        "Edit", {"file_path": "plan.md", "old_string": "one", "new_string": "two"}
    )
    assert "updated" in edited
    assert (s.workspace / "plan.md").read_text() == "step two"
    text = await s.call("Write", {"file_path": str(prompt), "content": "evil"})
    assert "prompts are Caesar's to edit" in text or "denied" in text, text
    text = await s.call("Edit", {"file_path": str(prompt), "old_string": "#", "new_string": "x"})
    assert "prompts are Caesar's to edit" in text or "denied" in text, text

    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (db, commentarius, prompt)}
    assert after == before


async def test_shell_network_reaches_allowed_domains_only(
    sandboxed: Sandboxed, local_server: tuple[int, list[str]]
) -> None:
    port, seen = local_server
    # through the sandbox's proxy (its no_proxy would send loopback hosts direct)
    fetch = (
        f'no_proxy= NO_PROXY= {sys.executable} -c "import urllib.request as u; '
        "print(u.urlopen('http://{host}:{port}/{path}', timeout=5).read().decode())\""
    )
    text = await sandboxed.bash(fetch.format(host="127.0.0.1", port=port, path="through-proxy"))
    assert "reached" not in text
    direct = fetch.replace("u.urlopen(", "u.build_opener(u.ProxyHandler(dict())).open(")
    text = await sandboxed.bash(direct.format(host="127.0.0.1", port=port, path="direct"))
    assert "reached" not in text
    assert seen == []  # 127.0.0.1 is not in allowed_domains: nothing got through

    text = await sandboxed.bash(fetch.format(host="localhost", port=port, path="allowed"))
    assert text == "reached"
    assert seen == ["/allowed"]
