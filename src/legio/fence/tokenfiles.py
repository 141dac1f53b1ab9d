"""Files that hold Legio's own tokens: found at start, and hidden from agents and checks.

The bot token, the forge token and the Claude login (``ANTHROPIC_API_KEY``,
``CLAUDE_CODE_OAUTH_TOKEN``) reach Legio through its environment, and that environment is
often filled from a file: systemd's ``EnvironmentFile`` (``/etc/legio/secrets.env`` in the
docs), a ``.env`` beside ``legio.toml``, a ``.bashrc`` that exports them. ``remember`` (called
by ``legio.fence.policy.scrub_environment``, before any CLI starts) lists:

- the usual places, there or not: ``/etc/legio/secrets.env``, ``.env`` and ``secrets.env``
  beside ``legio.toml``, and every ``EnvironmentFile=`` of a ``legio*.service`` unit;
- every regular file, at most ``MAX_SIZE``, directly in the folders such a file lives in
  (``legio.toml``'s folder, ``/etc/legio``, the daemon's home, ``~/.config/legio``,
  ``$CREDENTIALS_DIRECTORY``) whose bytes hold one of those tokens (``MIN_SECRET``
  characters or more), whatever its name.

``legio.fence.policy.key_entries`` makes each an entry of the protected set: a deny rule of
the CLI's sandbox, the path guard, and a blank file bound over it in a check's jail. Not
found: a token under another name, in a file elsewhere or deeper, or encoded.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from legio.config import Config
from legio.fence.cliconfig import daemon_home
from legio.fence.vault import forge_token, keep, kept_values

logger = logging.getLogger(__name__)

TOKEN_REASON = "this file holds Legio's own tokens; it is not for agents or checks"
FIXED = (Path("/etc/legio/secrets.env"),)
FOLDERS = (Path("/etc/legio"),)
UNITS = (Path("/etc/systemd/system"), Path("/lib/systemd/system"))
LOGIN_VARS = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")
MAX_SIZE = 1024 * 1024
MIN_SECRET = 12

_found: list[Path] = []


def secrets(config: Config, environ: Mapping[str, str] | None = None) -> list[str]:
    """The token values Legio holds now (long enough to be told from other text)."""
    environ = os.environ if environ is None else environ
    forge_token(config)  # into the vault while its variable is still there
    keep(config.telegram.token_env, config.telegram_token())  # and the bot's
    values = [*kept_values(), config.telegram_token()]
    values += [environ.get(name, "").strip() for name in LOGIN_VARS]
    return sorted({v for v in values if len(v) >= MIN_SECRET})


def unit_files(environ: Mapping[str, str]) -> list[Path]:
    """The ``EnvironmentFile=`` paths of every ``legio*.service`` unit (system or user)."""
    home = daemon_home(environ)
    found: list[Path] = []
    for folder in (*UNITS, home / ".config" / "systemd" / "user"):
        try:
            units = sorted(folder.glob("legio*.service"))
        except OSError:
            continue
        for unit in units:
            try:
                text = unit.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.strip().partition("=")
                if key.strip() == "EnvironmentFile":
                    path = value.strip().lstrip("-").strip()
                    if path.startswith("/"):
                        found.append(Path(path))
    return found


def candidates(config: Config, environ: Mapping[str, str]) -> list[Path]:
    """The places a token file usually is, there or not."""
    places = [*FIXED, *unit_files(environ)]
    if config.path is not None:
        places += [config.path.parent / ".env", config.path.parent / "secrets.env"]
    return places


def folders(config: Config, environ: Mapping[str, str]) -> list[Path]:
    """The folders whose files are read for tokens (not their subfolders)."""
    home = daemon_home(environ)
    found = [*FOLDERS, home, home / ".config" / "legio"]
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if xdg.startswith("/"):
        found.append(Path(xdg) / "legio")
    if environ.get("CREDENTIALS_DIRECTORY", "").startswith("/"):
        found.append(Path(environ["CREDENTIALS_DIRECTORY"]))
    if config.path is not None:
        found.append(config.path.parent)
    return list(dict.fromkeys(found))


def _holds(path: Path, needles: list[bytes]) -> bool:
    """Whether ``path`` (a regular file, not followed if a link, small) holds a needle."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SIZE:
            return False
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_SIZE + 1)
    except OSError:
        return False
    finally:
        os.close(fd)
    return any(n in data for n in needles)


def scan(config: Config, environ: Mapping[str, str] | None = None) -> list[Path]:
    """Every file that holds or would hold Legio's tokens (see the module docstring)."""
    environ = os.environ if environ is None else environ
    needles = [s.encode() for s in secrets(config, environ)]
    found = candidates(config, environ)
    if needles:
        for folder in folders(config, environ):
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            found += [Path(e.path) for e in entries if _holds(Path(e.path), needles)]
    unique = {Path(os.path.normpath(p)): None for p in found}
    return list(unique)


def remember(config: Config, environ: Mapping[str, str] | None = None) -> list[Path]:
    """Find the token files now, for every later session and check; the ones there."""
    global _found
    _found = scan(config, environ)
    there = [p for p in _found if os.path.lexists(p)]
    if there:
        logger.info(
            "hidden from agents and checks (they hold Legio's tokens): %s",
            ", ".join(str(p) for p in there),
        )
    return there


def token_files() -> list[Path]:
    """The files ``remember`` found (and the usual places, there or not)."""
    return list(_found) or list(FIXED)
