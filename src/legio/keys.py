"""The credential stores of the user running Legio: where they are, and which files look like keys.

``key_stores`` lists every place a credential of the user lives (SSH keys, git and
GitHub logins, ``.netrc``, registry and cloud tokens, kubeconfigs, GnuPG, keyrings,
``pass``), where it is now or could be: ``~`` and ``$XDG_CONFIG_HOME`` /
``$XDG_DATA_HOME`` variants, and the variables that move a store (``$PASSWORD_STORE_DIR``,
``$GNUPGHOME``…). ``agent_sockets`` lists the sockets of SSH, GnuPG and keyring agents:
the ones the environment named (``SSH_AUTH_SOCK``… are removed from the daemon's
environment, their paths kept in ``LEGIO_AGENT_SOCKETS``), ``ssh-*`` folders in the temp
folders, and the agents' places in ``$XDG_RUNTIME_DIR``. ``legio.policy`` turns both,
and ``[sandbox] hide``, into entries of the protected set (deny rules and the path guard).

``exposed_keys`` is ``legio check``'s bounded walk of ``$HOME`` for readable files whose
name looks like a key or token.
"""

from __future__ import annotations

import fnmatch
import os
import pwd
import stat
import tempfile
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from legio.cliconfig import daemon_home

KEY_REASON = (
    "the credentials of Legio's user (SSH keys, git and GitHub logins, tokens, keyrings) "
    "are not for agents"
)

# where a store lives under $HOME: (path, is a folder)
HOME_STORES = (
    (".ssh", True),
    (".git-credentials", False),
    (".config/git/credentials", False),
    (".config/gh", True),
    (".netrc", False),
    (".npmrc", False),
    (".pypirc", False),
    (".docker/config.json", False),
    (".aws", True),
    (".config/gcloud", True),
    (".kube", True),
    (".gnupg", True),
    (".local/share/keyrings", True),
    (".password-store", True),
)
CONFIG_STORES = (("git/credentials", False), ("gh", True), ("gcloud", True))  # $XDG_CONFIG_HOME
DATA_STORES = (("keyrings", True),)  # $XDG_DATA_HOME
# variables naming a store's place: (name, is a folder); KUBECONFIG may list several
STORE_VARS = (
    ("PASSWORD_STORE_DIR", True),
    ("GNUPGHOME", True),
    ("GH_CONFIG_DIR", True),
    ("CLOUDSDK_CONFIG", True),
    ("DOCKER_CONFIG", True),
    ("AWS_SHARED_CREDENTIALS_FILE", False),
    ("AWS_CONFIG_FILE", False),
    ("NETRC", False),
    ("NPM_CONFIG_USERCONFIG", False),
    ("KUBECONFIG", False),
)

# the agents' sockets: never passed to a CLI (``legio.policy.denied_env_names``)
SOCKET_VARS = (
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "GNOME_KEYRING_CONTROL",
    "GNOME_KEYRING_PID",
    "DBUS_SESSION_BUS_ADDRESS",  # the Secret Service (gnome-keyring, KWallet) answers there
)
SOCKETS_NOTE = "LEGIO_AGENT_SOCKETS"  # the removed variables' socket paths, still hidden
RUNTIME_SOCKETS = (
    ("gnupg", True),
    ("keyring", True),
    ("gcr", True),
    ("bus", False),
    ("ssh-agent.socket", False),
    ("openssh_agent", False),
)


@dataclass(frozen=True)
class Store:
    """One place to hide from agents: a path, whether it is a folder, what it is."""

    path: Path
    folder: bool
    what: str


def _absolute(text: str, home: Path) -> Path | None:
    path = home / text[2:] if text.startswith("~/") else Path(text)
    return Path(os.path.normpath(path)) if path.is_absolute() else None


def account_home() -> Path | None:
    """The home of Legio's user in the password database: ``ssh`` and ``git`` look there
    even when ``$HOME`` says otherwise."""
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None


def key_stores(environ: Mapping[str, str] | None = None) -> list[Store]:
    """Every place a credential of the user lives or would live, there now or not."""
    environ = os.environ if environ is None else environ
    home = daemon_home(environ)
    homes = [home, *[h for h in [account_home()] if h is not None and h != home]]
    stores = [Store(h / rel, folder, f"~/{rel}") for h in homes for rel, folder in HOME_STORES]
    for var, default, names in (
        ("XDG_CONFIG_HOME", ".config", CONFIG_STORES),
        ("XDG_DATA_HOME", ".local/share", DATA_STORES),
    ):
        base = _absolute(environ.get(var, ""), home)
        if base is not None and base != home / default:
            stores += [Store(base / rel, folder, f"${var}/{rel}") for rel, folder in names]
    for var, folder in STORE_VARS:
        for text in environ.get(var, "").split(os.pathsep):
            path = _absolute(text, home) if text else None
            if path is not None:
                stores.append(Store(path, folder, f"${var}"))
    return _unique(stores)


def _socket_of(var: str, value: str) -> str:
    if var == "GPG_AGENT_INFO":  # path:pid:protocol
        return value.split(":", 1)[0]
    if var == "DBUS_SESSION_BUS_ADDRESS":  # unix:path=/run/user/1000/bus,guid=…
        for part in value.split(",") + value.split(";"):
            if "path=" in part:
                return part.split("path=", 1)[1].split(",", 1)[0]
        return ""
    return value


def remember_sockets(environ: MutableMapping[str, str]) -> None:
    """Before ``SOCKET_VARS`` leave ``environ``: keep their sockets' paths in
    ``LEGIO_AGENT_SOCKETS`` (not secret), so every session goes on hiding them."""
    paths = [p for p in environ.get(SOCKETS_NOTE, "").split(os.pathsep) if p]
    for var in SOCKET_VARS:
        path = _socket_of(var, environ.get(var, ""))
        if path.startswith("/") and path not in paths:
            paths.append(path)
    if paths:
        environ[SOCKETS_NOTE] = os.pathsep.join(paths)


def agent_sockets(environ: Mapping[str, str] | None = None) -> list[Store]:
    """The sockets of SSH, GnuPG and keyring agents there are now (and those the
    environment names): each hidden by its own rule, so the set changes as agents come
    and go (``legio.policy.hidden_now``)."""
    environ = os.environ if environ is None else environ
    named = [p for p in environ.get(SOCKETS_NOTE, "").split(os.pathsep) if p]
    named += [_socket_of(var, environ.get(var, "")) for var in SOCKET_VARS]
    stores = []
    for text in named:
        if not text.startswith("/"):
            continue
        path = Path(os.path.normpath(text))
        if path.parent.name.startswith("ssh-"):  # ssh-agent's own folder: all of it
            stores.append(Store(path.parent, True, "an SSH agent's socket folder"))
        else:
            stores.append(Store(path, False, "an agent's socket"))
    runtime = Path(environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}")
    stores += [
        Store(runtime / name, folder, f"$XDG_RUNTIME_DIR/{name}")
        for name, folder in RUNTIME_SOCKETS
        if os.path.lexists(runtime / name)
    ]
    for temp in sorted({Path("/tmp"), Path(tempfile.gettempdir())}):
        stores += [
            Store(path, True, "an SSH agent's socket folder") for path in _ssh_agent_dirs(temp)
        ]
    return _unique(stores)


def _ssh_agent_dirs(temp: Path) -> list[Path]:
    """``ssh-XXXXXXXXXX`` folders of this user in ``temp`` (ssh-agent's default place)."""
    found = []
    try:
        with os.scandir(temp) as listing:
            for entry in listing:
                if (
                    entry.name.startswith("ssh-")
                    and entry.is_dir(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_uid == os.getuid()
                ):
                    found.append(Path(entry.path))
    except OSError:
        return []
    return sorted(found)


def _unique(stores: Sequence[Store]) -> list[Store]:
    seen: set[Path] = set()
    out = []
    for store in stores:
        if store.path not in seen:
            seen.add(store.path)
            out.append(store)
    return out


# ------------------------------------------------------------------ legio check's walk

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
    ".cargo",
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
    ".local",
    ".vscode-server",
    ".nvm",
    ".pyenv",
    ".gradle",
    ".m2",
    "Library",
}
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
