"""The credential stores of the user running Legio: where they are, to be out of reach.

``key_stores`` lists every place a credential of the user lives (SSH keys, git config
and logins, GitHub and GitLab logins, ``.netrc``, package registries' and cloud tokens,
container registries' logins, kubeconfigs, database passwords, shell histories, browser
profiles, GnuPG, keyrings, ``pass``), where it is now or could be: ``~`` and
``$XDG_CONFIG_HOME`` / ``$XDG_DATA_HOME`` / ``$XDG_CACHE_HOME`` variants, the variables
that move a store (``$PASSWORD_STORE_DIR``, ``$CARGO_HOME``, ``$HISTFILE``…), and the
files the user's git config names (``git_config_stores``: a credential helper's
``--file``, included files). ``agent_sockets`` lists the sockets of SSH, GnuPG and keyring agents:
the ones the environment named (``SSH_AUTH_SOCK``… are removed from the daemon's
environment, their paths kept in ``LEGIO_AGENT_SOCKETS``), ``ssh-*`` folders in the temp
folders, and the agents' places in ``$XDG_RUNTIME_DIR``. ``legio.fence.policy`` turns both,
and ``[sandbox] hide``, into entries of the protected set (deny rules and the path guard).

``legio check``'s walk of ``$HOME`` for readable files that look like keys is
``legio.fence.keyscan``.
"""

from __future__ import annotations

import functools
import os
import pwd
import shlex
import subprocess
import tempfile
import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from legio.fence.cliconfig import daemon_home

KEY_REASON = (
    "the credentials of Legio's user (SSH keys, git and GitHub logins, tokens, keyrings) "
    "are not for agents"
)

# where a store lives under $HOME: (path, is a folder)
HOME_STORES = (
    (".ssh", True),
    (".git-credentials", False),
    (".config/git/credentials", False),
    (".gitconfig", False),  # url.<https://user:TOKEN@host/>.insteadOf, http.extraheader
    (".config/git/config", False),
    (".git-credential-cache", True),  # git credential-cache's socket (old place)
    (".cache/git/credential", True),  # … and its place now
    (".gcm", True),  # Git Credential Manager's plaintext and GPG stores
    (".config/gh", True),
    (".config/hub", False),
    (".config/glab-cli", True),
    (".netrc", False),
    (".npmrc", False),
    (".pypirc", False),
    (".gem/credentials", False),
    (".local/share/gem/credentials", False),
    (".cargo/credentials.toml", False),
    (".cargo/credentials", False),
    (".m2/settings.xml", False),
    (".m2/settings-security.xml", False),
    (".gradle/gradle.properties", False),
    (".docker/config.json", False),
    (".config/containers/auth.json", False),
    (".aws", True),
    (".azure", True),
    (".config/gcloud", True),
    (".kube", True),
    (".terraform.d/credentials.tfrc.json", False),
    (".terraformrc", False),
    (".vault-token", False),
    (".config/rclone/rclone.conf", False),
    (".pgpass", False),
    (".my.cnf", False),
    (".mylogin.cnf", False),
    (".gnupg", True),
    (".local/share/keyrings", True),
    (".password-store", True),
    (".mozilla", True),  # browsers' profiles: cookies, saved passwords
    (".config/google-chrome", True),
    (".config/chromium", True),
    (".config/BraveSoftware", True),
    (".config/microsoft-edge", True),
    *(
        (name, False)
        for name in (
            ".bash_history",  # shell and REPL histories: tokens typed on a command line
            ".zsh_history",
            ".zhistory",
            ".histfile",
            ".sh_history",
            ".history",
            ".local/share/fish/fish_history",
            ".python_history",
            ".node_repl_history",
            ".psql_history",
            ".mysql_history",
            ".sqlite_history",
            ".rediscli_history",
        )
    ),
)
# a base folder a variable moves: HOME_STORES under its default place are there too
BASE_VARS = (
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_CACHE_HOME", ".cache"),
)
# variables naming a store's place: (name, is a folder); KUBECONFIG may list several
STORE_VARS = (
    ("PASSWORD_STORE_DIR", True),
    ("GNUPGHOME", True),
    ("GH_CONFIG_DIR", True),
    ("HUB_CONFIG", False),
    ("GLAB_CONFIG_DIR", True),
    ("CLOUDSDK_CONFIG", True),
    ("DOCKER_CONFIG", True),
    ("REGISTRY_AUTH_FILE", False),
    ("AWS_SHARED_CREDENTIALS_FILE", False),
    ("AWS_CONFIG_FILE", False),
    ("AZURE_CONFIG_DIR", True),
    ("TF_CLI_CONFIG_FILE", False),
    ("NETRC", False),
    ("NPM_CONFIG_USERCONFIG", False),
    ("GIT_CONFIG_GLOBAL", False),
    ("RCLONE_CONFIG", False),
    ("PGPASSFILE", False),
    ("MYSQL_TEST_LOGIN_FILE", False),
    ("HISTFILE", False),
    ("KUBECONFIG", False),
)
# variables naming a folder that holds a store among other things: (name, store in it)
IN_VAR_STORES = (
    ("CARGO_HOME", "credentials.toml", False),
    ("CARGO_HOME", "credentials", False),
    ("GRADLE_USER_HOME", "gradle.properties", False),
    ("XDG_RUNTIME_DIR", "containers/auth.json", False),  # podman, buildah, skopeo
)

# the agents' sockets: never passed to a CLI (``legio.fence.policy.denied_env_names``)
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
    """Every place a credential of the user lives or would live, there now or not, and
    the files the user's git config names (``git_config_stores``)."""
    environ = os.environ if environ is None else environ
    home = daemon_home(environ)
    homes = [home, *[h for h in [account_home()] if h is not None and h != home]]
    stores = [Store(h / rel, folder, f"~/{rel}") for h in homes for rel, folder in HOME_STORES]
    for var, default in BASE_VARS:
        base = _absolute(environ.get(var, ""), home)
        if base is not None and base != home / default:
            stores += [
                Store(base / rel[len(default) + 1 :], folder, f"${var}/{rel[len(default) + 1 :]}")
                for rel, folder in HOME_STORES
                if rel.startswith(default + "/")
            ]
    for var, folder in STORE_VARS:
        for text in environ.get(var, "").split(os.pathsep):
            path = _absolute(text, home) if text else None
            if path is not None:
                stores.append(Store(path, folder, f"${var}"))
    runtime = environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    for var, rel, folder in IN_VAR_STORES:
        base = _absolute(runtime if var == "XDG_RUNTIME_DIR" else environ.get(var, ""), home)
        if base is not None:
            stores.append(Store(base / rel, folder, f"${var}/{rel}"))
    stores += git_config_stores(environ, homes)
    return _unique(stores)


# ------------------------------------------------------------------ the user's git config

GIT_KEYS = r"^(credential\..*helper|include\.path|includeif\..*\.path)$"


def git_config_files(environ: Mapping[str, str], homes: Sequence[Path]) -> list[Path]:
    """The user's git config files, as git finds them (global, then system)."""
    home = homes[0]
    files: list[Path] = []
    glob = _absolute(environ.get("GIT_CONFIG_GLOBAL", ""), home)
    if glob is not None:
        files.append(glob)
    else:
        xdg = _absolute(environ.get("XDG_CONFIG_HOME", ""), home) or home / ".config"
        files += [xdg / "git" / "config", home / ".config" / "git" / "config"]
        files += [h / ".gitconfig" for h in homes]
    if not environ.get("GIT_CONFIG_NOSYSTEM"):
        files.append(
            _absolute(environ.get("GIT_CONFIG_SYSTEM", ""), home) or Path("/etc/gitconfig")
        )
    return list(dict.fromkeys(files))


def git_config_stores(
    environ: Mapping[str, str] | None = None, homes: Sequence[Path] | None = None
) -> list[Store]:
    """What the user's git config (global and system files, read by git itself, their
    includes not followed) says holds a credential: the ``--file`` of a ``store``
    credential helper (``credential.helper = store --file ~/x``, also per URL), the
    ``--socket`` of a ``cache`` helper, and every file it includes (``include.path``,
    ``includeIf.<cond>.path``: part of the user's config, tokens included). Read again
    only when a config file changes."""
    environ = os.environ if environ is None else environ
    homes = [daemon_home(environ)] if homes is None else list(homes)
    files = git_config_files(environ, homes)
    return list(_git_config_stores(tuple((f, _signature(f)) for f in files), homes[0]))


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _git_config_stores(
    files: tuple[tuple[Path, tuple[int, int, int] | None], ...], home: Path
) -> tuple[Store, ...]:
    stores: list[Store] = []
    for path, signature in files:
        if signature is None:
            continue
        for key, value in _git_config_values(path):
            if key.endswith(".path"):  # an include: relative to the including file
                target = _git_path(value, home, relative_to=path.parent)
                if target is not None:
                    stores.append(Store(target, False, f"a file {path} includes"))
            else:
                stores += [
                    Store(target, folder, f"a credential helper's file ({path})")
                    for target, folder in _helper_files(value, home)
                ]
    return tuple(stores)


def _git_config_values(path: Path) -> list[tuple[str, str]]:
    try:
        done = subprocess.run(
            ["git", "config", "--file", str(path), "--no-includes", "-z", "--get-regexp", GIT_KEYS],
            capture_output=True,
            timeout=10,
            env={"PATH": os.environ.get("PATH", os.defpath), "GIT_CONFIG_NOSYSTEM": "1"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for item in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        key, _, value = item.partition("\n")
        if key:
            found.append((key, value))
    return found


def _git_path(text: str, home: Path, relative_to: Path | None = None) -> Path | None:
    if text.startswith("~/"):
        return Path(os.path.normpath(home / text[2:]))
    if relative_to is not None and text and not text.startswith("~"):
        return Path(os.path.normpath(relative_to / text))
    return _absolute(text, home)


def _helper_files(helper: str, home: Path) -> list[tuple[Path, bool]]:
    """The files a credential helper keeps credentials in, where its words say so
    (``store --file <path>``, ``cache --socket <path>``); a shell helper (``!…``) is
    not read."""
    if helper.startswith("!"):
        return []
    try:
        words = shlex.split(helper)
    except ValueError:
        return []
    if not words or words[0].split("/")[-1].removeprefix("git-credential-") not in (
        "store",
        "cache",
    ):
        return []
    found = []
    for i, word in enumerate(words[1:], 1):
        for option in ("--file", "--socket"):
            value = None
            if word == option and i + 1 < len(words):
                value = words[i + 1]
            elif word.startswith(option + "="):
                value = word[len(option) + 1 :]
            path = _git_path(value, home) if value else None
            if path is not None:
                found.append((path, False))
    return found


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
    and go (``legio.fence.policy.hidden_now``)."""
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


# temp folder -> ((dev, inode, mtime_ns) when listed, when it was listed (ns), what it held)
_LISTED: dict[Path, tuple[tuple[int, int, int], int, list[Path]]] = {}
SETTLED_NS = 1_000_000_000


def _ssh_agent_dirs(temp: Path) -> list[Path]:
    """``ssh-XXXXXXXXXX`` folders of this user in ``temp`` (ssh-agent's default place).

    Asked before every turn (``hidden_now``), and a shared temp folder may hold thousands
    of entries (~5 ms of the loop's CPU at 6,600): the listing is reused while the folder
    is unchanged (an entry made or removed moves its mtime), and only if the folder had
    not changed for ``SETTLED_NS`` when it was listed (a change within the same clock
    tick as the listing would not move the mtime)."""
    try:
        st = os.stat(temp)
    except OSError:
        return []
    key = (st.st_dev, st.st_ino, st.st_mtime_ns)
    cached = _LISTED.get(temp)
    if cached is not None and cached[0] == key and key[2] < cached[1] - SETTLED_NS:
        return list(cached[2])
    listed_at = time.time_ns()
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
    _LISTED[temp] = (key, listed_at, sorted(found))
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
