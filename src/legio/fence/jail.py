"""A command Legio runs itself in an agent's project copy (a project's check), fenced like
the agent's own shell commands, outside the Claude CLI: bubblewrap, or nothing.

``jail_argv`` builds the ``bwrap`` command line from the same protected set the agent's
deny rules come from (``legio.fence.policy.protected_entries``, the copy's fence, every
project's checkout): the root read-only; the copy, a private ``TMPDIR`` and a cache folder
writable (both in ``castra/state/checks/<agent>/<project>/``, which no agent can read);
every entry the agent may not read hidden (an empty read-only tmpfs over a folder,
an empty read-only file over a file); what it may read but not write inside the copy (its
``.git/config``, hooks…) bound read-only again; ``/run`` (the user's sockets) an empty
tmpfs; a fresh ``/proc`` and ``/dev``. ``--unshare-all``: no network at all (stricter than
the agent's allow-list, and it fails closed), its own processes only; ``--die-with-parent``
and ``--new-session``. ``jail_env`` is the agent's scrubbed environment without anything
that looks like a secret, with the same ``HOME``.

Without a working ``bwrap`` there is no check: ``jail_support`` says so and nothing runs
unsandboxed.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from legio.castra import Castra
from legio.config import Config
from legio.fence.cliconfig import state_dir
from legio.fence.keys import SOCKET_VARS
from legio.fence.policy import Protected, denied_env_names, protected_entries

INSTALL_JAIL = "apt install bubblewrap"
CHECKS = "checks"  # castra/state/checks/<agent>/<project>/{tmp,cache,logs}
# variables a check never gets, on top of the agent's own scrubbing: it runs tests, not
# tools that log in anywhere
SECRET_VARS = (
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*API_KEY*",
    "*CREDENTIAL*",
    "*_PAT",
    "ANTHROPIC_*",
    "CLAUDE_*",
    "LEGIO_*",
    "AWS_*",
)


@dataclass(frozen=True)
class JailSupport:
    """Whether this machine can run a check in a sandbox, and what was found or missing."""

    available: bool
    detail: str


def jail_support() -> JailSupport:
    """Whether ``bwrap`` is here and can make the jail (cached per ``PATH``)."""
    return _support(sys.platform, os.environ.get("PATH", ""))


@functools.cache
def _support(platform: str, search_path: str) -> JailSupport:
    if not platform.startswith("linux"):
        return JailSupport(False, f"checks run in bubblewrap, which {platform} does not have")
    bwrap = shutil.which("bwrap", path=search_path)
    if bwrap is None:
        return JailSupport(
            False, f"bubblewrap is not installed: install it (`{INSTALL_JAIL}`) to run checks"
        )
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all"]
    try:
        done = subprocess.run(
            [*probe, "--die-with-parent", "--new-session", "--", "true"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return JailSupport(False, f"bubblewrap does not run here ({e})")
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        return JailSupport(
            False, f"bubblewrap cannot make a sandbox here ({first}; user namespaces off?)"
        )
    return JailSupport(True, bwrap)


def checks_dir(castra_root: Path, agent: str, project: str) -> Path:
    """``castra/state/checks/<agent>/<project>/``: the check's scratch, cache and logs."""
    return state_dir(castra_root.resolve()) / CHECKS / agent / project


def jail_env(
    config: Config, scratch: Path, cache: Path, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The check's environment: the daemon's (already scrubbed for agents) without what
    agents may not see nor anything that looks like a secret; ``HOME`` as the agent's,
    ``TMPDIR`` its own, ``XDG_CACHE_HOME`` a cache kept between its runs."""
    environ = dict(os.environ if environ is None else environ)
    denied = set(denied_env_names(config, environ))
    patterns = (*SECRET_VARS, *SOCKET_VARS)
    env = {
        name: value
        for name, value in environ.items()
        if name not in denied and not any(fnmatch.fnmatchcase(name.upper(), p) for p in patterns)
    }
    env.update(TMPDIR=str(scratch), XDG_CACHE_HOME=str(cache))
    env.setdefault("PATH", os.defpath)
    return env


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _kind(path: Path) -> str | None:
    """ "dir", "file" (anything else that is there) or None (not there, or unreadable)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return "dir" if stat.S_ISDIR(mode) else "file"


def _hidden(entries: Sequence[Protected]) -> list[tuple[Path, str]]:
    """The places to hide, resolved (bubblewrap does not mount through a link), there
    now, and the topmost only (nothing is hidden twice)."""
    found: dict[Path, str] = {}
    for entry in entries:
        if entry.read or entry.pattern:
            continue  # patterns: ~/.claude* is listed one by one, /proc/*/environ is fresh
        path = entry.path.resolve()
        kind = _kind(path)
        if kind is not None:
            found[path] = kind
    top: list[tuple[Path, str]] = []
    for path in sorted(found, key=lambda p: len(p.parts)):
        if not any(kind == "dir" and _inside(path, other) for other, kind in top):
            top.append((path, found[path]))
    return top


def _hide(path: Path, kind: str, blank: Path) -> list[str]:
    if kind == "dir":
        return ["--tmpfs", str(path)]
    return ["--ro-bind", str(blank), str(path)]


def blank_file(folder: Path) -> Path:
    """An empty read-only file in ``folder``: what a hidden file reads as (``/dev/null``
    bound on a file cannot be opened: git would stop at a hidden ``~/.gitconfig``)."""
    blank = folder / "blank"
    if not blank.is_file() or blank.is_symlink() or blank.stat().st_size:
        blank.unlink(missing_ok=True)
        fd = os.open(blank, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
        os.close(fd)
    return blank


def jail_argv(
    bwrap: str,
    castra: Castra,
    config: Config,
    agent: str,
    copy: Path,
    writable: Sequence[Path],
    command: str,
    blank: Path,
    fence: Sequence[Protected] = (),
    info_fd: int | None = None,
) -> list[str]:
    """``bwrap … -- /bin/sh -c command`` in ``copy``; ``writable``: the check's own
    folders (its ``TMPDIR``, its cache), made first; ``blank``: an empty file, what a
    hidden file reads as (``blank_file``). ``fence``: the copy's own (what the
    agent may read there, not write) and the projects' checkouts. ``info_fd``: where
    bubblewrap writes the pid of the sandbox's first process (``child-pid``), whose death
    takes every process in the sandbox."""
    copy = copy.resolve()
    open_ = [copy, *(w.resolve() for w in writable)]
    hide = [Path(p) for p in config.sandbox.hide]
    entries = [*fence, *protected_entries(castra, agent, config.path, hide)]
    hidden = _hidden(entries)
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
    inner = [(p, k) for p, k in hidden if any(_inside(p, o) for o in open_)]
    outer = [(p, k) for p, k in hidden if (p, k) not in inner and not _inside(p, Path("/run"))]
    for path, kind in outer:
        argv += _hide(path, kind, blank)
    for folder in open_:
        argv += ["--bind", str(folder), str(folder)]
    for path, kind in inner:  # a hidden place inside the copy stays hidden
        argv += _hide(path, kind, blank)
    for entry in fence:  # read, not written: the copy's git settings and hooks
        path = entry.path.resolve()
        if entry.read and not entry.write and _inside(path, copy) and _kind(path) is not None:
            argv += ["--ro-bind", str(path), str(path)]
    for path, kind in [*outer, *inner, (Path("/run"), "dir")]:
        if kind == "dir":
            argv += ["--remount-ro", str(path)]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    argv += [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--chdir",
        str(copy),
        "--",
        "/bin/sh",
        "-c",
        command,
    ]
    return argv
