"""Each agent's own Claude CLI config dir: its transcripts, its copy of the login.

Every agent's CLI runs with ``CLAUDE_CONFIG_DIR=castra/state/claude/<agent>/``, so the
transcripts it writes (``projects/<cwd as a key>/<session_id>.jsonl``) are its own.
The daemon's own config dir (``$CLAUDE_CONFIG_DIR``, else ``~/.claude``) is where the
CLIs lived before; a session saved there is moved once into the agent's dir when it
is resumed. A subscription login (``.credentials.json``, which the CLI reads from its
config dir with ``O_NOFOLLOW``, so a symlink is refused) is copied into the agent's dir
with mode 0600 each time its CLI starts, taking the newest copy (a CLI that refreshed
the login wrote the newest). ``ANTHROPIC_API_KEY`` / ``CLAUDE_CODE_OAUTH_TOKEN`` in the
environment need nothing: every CLI inherits them.

Agents may not read any of these dirs, their own included (``legio.policy``).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

logger = logging.getLogger(__name__)

STATE = "state"
CREDENTIALS = ".credentials.json"


def state_dir(castra_root: Path) -> Path:
    """``castra/state/``: Legio's own runtime state, never an agent's to read."""
    return castra_root / STATE


def cli_configs_root(castra_root: Path) -> Path:
    return state_dir(castra_root) / "claude"


def cli_config_dir(castra_root: Path, agent: str) -> Path:
    """The ``CLAUDE_CONFIG_DIR`` of ``agent``'s CLI."""
    return cli_configs_root(castra_root) / agent


def daemon_home(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ.get("HOME") or os.path.expanduser("~"))


def daemon_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The config dir a CLI started with ``environ`` would use: ``$CLAUDE_CONFIG_DIR``,
    else ``~/.claude``."""
    environ = os.environ if environ is None else environ
    configured = environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else daemon_home(environ) / ".claude"


def _newest_credentials(shared: Path, root: Path) -> Path | None:
    candidates = [shared / CREDENTIALS]
    if root.is_dir():
        candidates += [d / CREDENTIALS for d in root.iterdir() if d.is_dir()]
    found = []
    for path in candidates:
        try:
            found.append((path.stat().st_mtime_ns, path))
        except OSError:
            continue
    return max(found)[1] if found else None


def copy_credentials(shared: Path, target: Path, root: Path) -> bool:
    """Put the newest ``.credentials.json`` (the daemon's or another agent's) in
    ``target`` with mode 0600; False if there is none."""
    newest = _newest_credentials(shared, root)
    if newest is None:
        return False
    mine = target / CREDENTIALS
    if newest == mine:
        return True
    temporary = target / f".{CREDENTIALS}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, newest.read_bytes())
    finally:
        os.close(fd)
    os.replace(temporary, mine)
    return True


def adopt_transcript(shared: Path, target: Path, session_id: str) -> bool:
    """Move session ``session_id``'s transcript (and its side folder) from the daemon's
    config dir into ``target`` once; True if ``target`` has it now."""
    name = f"{session_id}.jsonl"
    if any(target.glob(f"projects/*/{name}")):
        return True
    moved = False
    for transcript in shared.glob(f"projects/*/{name}"):
        project = target / "projects" / transcript.parent.name
        project.mkdir(parents=True, exist_ok=True)
        shutil.move(transcript, project / name)
        side = transcript.parent / session_id  # subagents, large tool results
        if side.is_dir():
            shutil.move(side, project / session_id)
        moved = True
        logger.info("moved the transcript of session %s into %s", session_id, target)
    return moved


def prepare_config_dir(
    castra_root: Path, agent: str, shared: Path, resume: str | None = None
) -> Path:
    """``agent``'s config dir, created (0700) with the login copied in and, when a
    session is to be resumed, its transcript moved in from ``shared``."""
    root = cli_configs_root(castra_root)
    target = cli_config_dir(castra_root, agent)
    target.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(target, 0o700)
    if shared.resolve() != target.resolve():
        copy_credentials(shared, target, root)
        if resume:
            adopt_transcript(shared, target, resume)
    return target
