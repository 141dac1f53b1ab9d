"""``legio check``'s look for keys under other names: readable files under ``$HOME`` whose
name looks like a key or a token (``id_rsa``, ``*.pem``, ``*token*``, ``.env``…) and that
no store of ``legio.fence.keys`` already hides, each named with the fix (``[sandbox]
hide``). The walk is bounded: a few levels deep, a fixed number of entries, no links
followed, caches and dependency trees left out.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

KEY_NAMES = (
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_ecdsa_sk",
    "id_ed25519_sk",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "*.asc",
    "*.gpg",
    "*token*",
    "*secret*",
    "credentials*",
    "*credentials.json",
    "auth.json",
    "*.tfrc.json",
    "rclone.conf",
    ".my.cnf",
    ".mylogin.cnf",
    ".git-credentials",
    ".netrc",
    ".vault-token",
    ".env",
    ".env.*",
    ".pgpass",
    ".htpasswd",
    "*.ovpn",
)
NOT_KEYS = ("*.pub", "*.py", "*.pyc", "*.js", "*.ts", "*.md", "*.html", "*.example", "*.sample")
# trees too big or too generated to walk (caches, dependencies, VCS data)
SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    ".cache",
    ".npm",
    ".rustup",
    ".venv",
    "venv",
    "__pycache__",
    "site-packages",
    ".tox",
    ".mypy_cache",
    ".ruff_cache",
    "go",
    "snap",
    ".vscode-server",
    ".nvm",
    ".pyenv",
    "Library",
}
# big generated trees inside folders that also hold stores (~/.cargo/credentials.toml…):
# those folders are walked, these left out
SKIP_UNDER_HOME = (
    ".cargo/registry",
    ".cargo/git",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    ".gradle/daemon",
    ".local/lib",
    ".local/share/Trash",
    ".local/share/Steam",
    ".local/share/containers",
    ".local/share/flatpak",
)
MAX_DEPTH = 3
MAX_ENTRIES = 20_000


def looks_like_key(name: str) -> bool:
    """Whether a file's name looks like a key, token or credentials file."""
    low = name.lower()
    if any(fnmatch.fnmatchcase(low, p) for p in NOT_KEYS):
        return False
    return any(fnmatch.fnmatchcase(low, p) for p in KEY_NAMES)


def exposed_keys(home: Path, skip: Sequence[Path]) -> list[Path]:
    """Readable files under ``home`` (depth ≤ 3, no links followed, caches and
    dependency trees and ``skip`` left out, at most 20,000 entries looked at) whose name
    looks like a key or token."""
    skipped = {Path(os.path.normpath(p)) for p in skip}
    skipped |= {home / rel for rel in SKIP_UNDER_HOME}
    found: list[Path] = []
    for seen, (path, st) in enumerate(_walk(home, skipped, 1)):
        if seen >= MAX_ENTRIES:
            break
        if stat.S_ISREG(st.st_mode) and looks_like_key(path.name) and os.access(path, os.R_OK):
            found.append(path)
    return found


def _walk(folder: Path, skipped: set[Path], depth: int) -> Iterator[tuple[Path, os.stat_result]]:
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        if path in skipped:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        yield path, st
        if stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH and entry.name not in SKIP_DIRS:
            yield from _walk(path, skipped, depth + 1)
