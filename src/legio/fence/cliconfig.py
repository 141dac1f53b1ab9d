"""Each agent's own Claude CLI config dir: its transcripts, its copy of the login.

Every agent's CLI runs with ``CLAUDE_CONFIG_DIR=castra/state/claude/<agent>/``, so the
transcripts it writes (``projects/<cwd as a key>/<session_id>.jsonl``) are its own. The
daemon's own config dir (``$CLAUDE_CONFIG_DIR``, else ``~/.claude``) is where the CLIs
lived before; a session saved there is moved once into the agent's dir when it is
resumed. A subscription login (``.credentials.json``, which the CLI reads from its
config dir with ``O_NOFOLLOW``, so a symlink is refused, and re-reads before a request)
is one login for all (``LoginSync``): the newest whole copy reaches every other copy,
the daemon's own included, with mode 0600, when a CLI starts and around every turn (a
CLI that refreshed the login, and perhaps rotated its refresh token, wrote the newest).
``ANTHROPIC_API_KEY`` / ``CLAUDE_CODE_OAUTH_TOKEN`` in the environment need nothing:
every CLI inherits them.

Agents may not read any of these dirs, their own included (``legio.fence.policy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Login:
    """One copy of the login: where, its bytes, and how new it is (the OAuth token's
    expiry, then the file's mtime)."""

    path: Path
    content: bytes
    newness: tuple[int, int]


def read_login(path: Path) -> Login | None:
    """The login at ``path``, if it is a whole one: a JSON object (a half-written or
    foreign file is never taken); None if there is none or it is not whole."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        mtime = os.fstat(fd).st_mtime_ns
        with os.fdopen(os.dup(fd), "rb") as f:
            content = f.read(1 << 20)
    finally:
        os.close(fd)
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    oauth = data.get("claudeAiOauth")
    expires = oauth.get("expiresAt") if isinstance(oauth, dict) else None
    return Login(path, content, (int(expires) if isinstance(expires, int | float) else 0, mtime))


def login_copies(shared: Path, root: Path) -> list[Path]:
    """Every copy of the login: the daemon's own, then each agent's."""
    copies = [shared / CREDENTIALS]
    if root.is_dir():
        copies += sorted(d / CREDENTIALS for d in root.iterdir() if d.is_dir())
    return copies


def write_login(target: Path, content: bytes) -> None:
    """``content`` as ``target``, atomically (a fresh temp file, fsynced, renamed), 0600,
    never through a link."""
    temporary = target.parent / f".{CREDENTIALS}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, target)


class LoginSync:
    """One login for all: after any turn (and before a CLI starts), the newest whole copy
    of ``.credentials.json`` (a CLI that refreshed its token and rotated the refresh token
    wrote it; or Caesar ran ``claude login``) reaches every other copy, the daemon's own
    included, so no CLI is left with a refresh token that no longer works. Cheap when
    nothing changed: one ``stat`` per copy."""

    def __init__(self, shared: Path, root: Path) -> None:
        self.shared = shared
        self.root = root
        self._seen: dict[Path, tuple[int, int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, castra_root: Path, env: Mapping[str, str]) -> LoginSync:
        """The copies of a castra's agents and of the daemon their CLIs start from."""
        return cls(daemon_config_dir({**os.environ, **env}), cli_configs_root(castra_root))

    async def refresh(self) -> None:
        """``sync``, before and after every turn: a ``stat`` per copy on the loop, and the
        reading and writing off it only when a copy changed; a failure is logged."""
        if self._signature() == self._seen:
            return
        try:
            await asyncio.to_thread(self.sync)
        except OSError as e:
            logger.warning("could not spread the refreshed login: %s", e)

    def _signature(self) -> dict[Path, tuple[int, int]]:
        seen = {}
        for path in login_copies(self.shared, self.root):
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            seen[path] = (st.st_mtime_ns, st.st_size)
        return seen

    def sync(self, also: Path | None = None) -> int:
        """Spread the newest login (to ``also`` too: a config dir being prepared); the
        number of copies written."""
        with self._lock:
            seen = self._signature()
            if seen == self._seen and (also is None or also / CREDENTIALS in seen):
                return 0
            logins = [login for p in seen if (login := read_login(p)) is not None]
            if not logins:
                self._seen = seen
                return 0
            newest = max(logins, key=lambda login: login.newness)
            by_path = {login.path: login for login in logins}
            targets = set(seen) | ({also / CREDENTIALS} if also is not None else set())
            written = 0
            for target in sorted(targets):
                have = by_path.get(target)
                if have is not None and (
                    have.content == newest.content or have.newness > newest.newness
                ):
                    continue
                if not target.parent.is_dir():
                    continue
                write_login(target, newest.content)
                written += 1
            if written:
                logger.info("the newest login (%s) reached %d other copies", newest.path, written)
            self._seen = self._signature()
            return written


def copy_credentials(shared: Path, target: Path, root: Path) -> bool:
    """Put the newest whole ``.credentials.json`` (the daemon's or another agent's) in
    ``target`` with mode 0600; False if there is none."""
    LoginSync(shared, root).sync(also=target)
    return read_login(target / CREDENTIALS) is not None


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
