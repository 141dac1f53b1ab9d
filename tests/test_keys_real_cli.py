"""Keys out of reach, for real: the bundled CLI (sandboxed Bash) on the fake Messages API.

Canary credentials under the daemon's ``HOME`` (``~/.git-credentials``, ``~/.ssh/``,
``~/.config/gh/hosts.yml``, ``~/.cargo/credentials.toml``, ``~/.config/containers/
auth.json``, ``~/.bash_history``, a token in ``~/.gitconfig`` and the file its
``credential.helper = store --file`` names, and a ``~/.netrc`` made after the session
started) and an
SSH agent's socket in the environment: no agent's shell (``cat`` spelled so no word
names the path, through a link, through ``/proc/self/root``, ``git credential fill``,
``find``) nor its ``Read`` and ``Grep`` gets a canary, and ``SSH_AUTH_SOCK`` never
reaches its shell.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.fence.policy import scrub_environment
from tests.conftest import FakeCli
from tests.test_agent_reach_real_cli import Reach, _reach, refused

CANARIES = {
    ".git-credentials": "https://caesar:CANARY-GIT@github.com\n",
    ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARY-SSH\n",
    ".config/gh/hosts.yml": "github.com:\n    oauth_token: CANARY-GH\n",
    ".cargo/credentials.toml": '[registry]\ntoken = "CANARY-CARGO"\n',
    ".config/containers/auth.json": '{"auths": {"quay.io": {"auth": "CANARY-PODMAN"}}}\n',
    ".bash_history": "curl -H 'Authorization: Bearer CANARY-HISTORY' https://api.example\n",
    ".gitconfig": '[url "https://caesar:CANARY-INSTEADOF@github.com/"]\n'
    "\tinsteadOf = https://github.com/\n"
    "[credential]\n\thelper = store --file ~/vault/git-store\n",
    "vault/git-store": "https://caesar:CANARY-HELPER@gitlab.com\n",
}
NETRC = "machine github.com login caesar password CANARY-NETRC\n"
CANARY_WORDS = ("CANARY-GIT", "CANARY-SSH", "CANARY-GH", "CANARY-NETRC", "CANARY-CARGO")
CANARY_WORDS += ("CANARY-PODMAN", "CANARY-HISTORY", "CANARY-INSTEADOF", "CANARY-HELPER")


@pytest.fixture
async def keyed(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Reach, Path]]:
    """Vorenus on the real CLI; canaries in the daemon's HOME; an SSH agent's socket
    named by ``SSH_AUTH_SOCK``, the environment scrubbed as ``LegioApp.open`` does."""
    agent_dir = tmp_path / "ssh-LEGIOTEST"
    agent_dir.mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(agent_dir / "agent.42"))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent_dir / "agent.42"))
    monkeypatch.setenv("SSH_AGENT_PID", "42")
    monkeypatch.delenv("LEGIO_AGENT_SOCKETS", raising=False)
    try:
        async for r in _reach(castra_dir, fake_cli, tmp_path, monkeypatch, login=False):
            for name, text in CANARIES.items():
                (r.home / name).parent.mkdir(parents=True, exist_ok=True)
                (r.home / name).write_text(text)
            scrub_environment(r.legion.config)  # before any CLI starts
            yield r, agent_dir.resolve()
    finally:
        sock.close()


def leaked(text: str) -> list[str]:
    return [c for c in CANARY_WORDS if c in text]


async def test_no_agent_reads_the_users_keys_however_it_asks(
    keyed: tuple[Reach, Path],
) -> None:
    r, agent_dir = keyed
    # spelled so that no word names a key store: the sandbox alone must hold
    command = "; ".join(
        [
            "echo RAN",
            "h=~/.s; cat ${h}sh/id_ed25519 ${h}sh/../.ssh/id_ed25519",
            "g=~/.git-cred; cat ${g}entials",
            "c=~/.conf; cat ${c}ig/gh/hosts.yml",
            "ln -s ${h}sh/id_ed25519 key-link; cat key-link",
            "cat /proc/self/root$HOME/.s''sh/id_ed25519 /proc/1/root$HOME/.git-cred''entials",
            "(cd /proc/self/cwd/../../../../../.. && cat .${HOME}/.s''sh/id_ed25519)",
            "printf 'protocol=https\\nhost=github.com\\n\\n' | GIT_TERMINAL_PROMPT=0 "
            "git -c credential.helper=store credential fill",
            "c=~/.car; cat ${c}go/credentials.toml ${c}go/../.config/contai''ners/auth.json",
            "b=~/.bash_hi; cat ${b}story; v=~/vau; cat ${v}lt/git-store",
            "git config --global --list; git config --show-origin --get-all credential.helper",
            "printf 'protocol=https\\nhost=gitlab.com\\n\\n' | GIT_TERMINAL_PROMPT=0 "
            "git credential fill",
            "grep -r CANARY $HOME",
            "find $HOME -name 'id_ed*'",
            "env | grep -E '^(SSH_AUTH_SOCK|SSH_AGENT_PID)='",
            f"a={str(agent_dir)[:-4]}; ls ${{a}}{str(agent_dir)[-4:]}",
        ]
    )
    text = await r.call("vorenus", "Bash", {"command": command})
    assert text.startswith("Exit code") or "RAN" in text, text
    assert "RAN" in text and "Sandbox" not in text, text  # the command ran, sandboxed
    assert leaked(text) == [], text
    assert "SSH_AUTH_SOCK=" not in text and "SSH_AGENT_PID=" not in text, text
    assert "agent.42" not in text, text

    # a store made after the session started is hidden too
    (r.home / ".netrc").write_text(NETRC)
    text = await r.call("vorenus", "Bash", {"command": "n=~/.ne; cat ${n}trc; echo RAN"})
    assert "RAN" in text and leaked(text) == [], text

    workspace = r.root / "centuriones" / "vorenus" / "workspace"
    for tool, args in (
        ("Read", {"file_path": str(r.home / ".ssh" / "id_ed25519")}),
        ("Read", {"file_path": str(workspace / "key-link")}),
        ("Read", {"file_path": str(r.home / ".netrc")}),
        ("Read", {"file_path": str(r.home / ".config" / "gh" / "hosts.yml")}),
        ("Grep", {"pattern": "CANARY", "path": str(r.home), "output_mode": "content"}),
        ("Grep", {"pattern": "CANARY", "path": str(r.home / ".ssh"), "output_mode": "content"}),
    ):
        text = await r.call("vorenus", tool, args)
        assert leaked(text) == [], (tool, args, text)
        assert refused(text) or tool == "Grep", (tool, args, text)
