"""``/restart``'s hand-over: the new image reads the tokens from the inherited pipe first
thing, non-dumpable before it reads, and closes the pipe at once (issue 44 item 13)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from legio.config import Config
from legio.fence.launch import restart_argv
from tests.test_cli import legio

SRC = Path(__file__).resolve().parents[1] / "src" / "legio"

RECEIVER = """
import json, os, sys
r, w = os.pipe()
os.write(w, b"123:BOT-SECRET\\nghp_FORGE-SECRET")
os.close(w)
os.set_inheritable(r, True)
os.environ["LEGIO_TOKEN_FD"] = str(r)
from legio.fence import handoff
handoff.receive()
before = set(sys.modules)
tokens = handoff.take()
from legio.fence.launch import is_dumpable
handoff.receive()
print(json.dumps({
    "tokens": list(tokens or ()),
    "again": handoff.take(),
    "fd_open": os.path.exists(f"/proc/self/fd/{r}"),
    "in_env": "LEGIO_TOKEN_FD" in os.environ,
    "dumpable": is_dumpable(),
    "heavy": sorted(m for m in before if m.split(".")[0] in ("pydantic", "claude_agent_sdk",
        "telegram", "aiosqlite") or m in ("legio.cli", "legio.config")),
}))
"""


def test_the_pipe_is_read_closed_and_the_process_non_dumpable() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", RECEIVER], capture_output=True, text=True, env=env, check=False
    )
    seen = json.loads(out.stdout or "{}") if out.returncode == 0 else out.stderr
    assert seen == {
        "tokens": ["123:BOT-SECRET", "ghp_FORGE-SECRET"],
        "again": None,  # read once: nothing left to take
        "fd_open": False,
        "in_env": False,
        "dumpable": False,
        "heavy": [],  # nothing heavy imported before the tokens are read
    }


def test_legio_main_takes_the_tokens_before_importing_the_cli() -> None:
    """``python -m legio`` (what ``/restart`` runs) reads the pipe before any other import."""
    tree = ast.parse((SRC / "__main__.py").read_text())
    body = [n for n in tree.body if not isinstance(n, ast.Expr) or isinstance(n.value, ast.Call)]
    first_imports = [ast.unparse(n) for n in body[:2]]
    assert first_imports[0] == "from legio.fence import handoff"
    assert first_imports[1] == "handoff.receive()"


def test_after_a_restart_the_pipe_is_closed_and_no_token_in_the_environment(
    tmp_path: Path,
) -> None:
    """The console starts itself again through the pipe, as ``/restart`` does: once up, it
    holds no pipe but its standard streams, and its environment shows no token."""
    legio("init", "demo", cwd=tmp_path)
    base = {k: v for k, v in os.environ.items() if k != "LEGIO_CONFIG"}
    env = {**base, "IS_SANDBOX": "1", "TELEGRAM_BOT_TOKEN": "123:HANDED-OVER"}
    process = subprocess.Popen(
        [sys.executable, "-m", "legio", "console", "-c", "demo/legio.toml"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()  # written after the restart
        assert banner.startswith("Legio console"), banner
        fds = Path(f"/proc/{process.pid}/fd")
        pipes = [
            fd.name
            for fd in fds.iterdir()
            if int(fd.name) > 2 and os.readlink(fd).startswith("pipe:")
        ]
        assert pipes == []
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
        assert b"HANDED-OVER" not in environ
        assert b"LEGIO_TOKEN_FD" in environ  # it came through the pipe, whose number this is
    finally:
        process.communicate("", timeout=30)
    assert process.returncode == 0


def test_a_restart_does_not_import_a_module_planted_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attacker's pass: ``python -m legio`` searched the daemon's current folder first,
    so a planted ``ctypes.py`` ran before the token pipe was read (``handoff`` imports
    ctypes). The restart's command line keeps the current folder off the module path, and
    names the config file by its absolute path."""
    (tmp_path / "ctypes.py").write_text("open('planted-ran', 'w').write('x')\n")
    (tmp_path / "legio.py").write_text("open('planted-ran', 'w').write('x')\n")
    monkeypatch.chdir(tmp_path)
    config = cast(Config, SimpleNamespace(path=Path("legio.toml")))
    argv = restart_argv(config, "--help")
    assert argv[argv.index("-c") + 1] == str(tmp_path / "legio.toml")
    env = {**os.environ, "PYTHONPATH": str(SRC.parent)}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "planted-ran").exists()
