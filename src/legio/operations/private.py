"""Legio's files are its user's alone, and a starting daemon has room for descriptors.

- ``PRIVATE_UMASK`` (077) is set by ``legio``'s ``main`` before any command runs: what
  Legio writes (the castra, the praetorium and its WAL, memoria, logs, ``legio.toml`` from
  ``legio init``, archives) is made 0600 / 0700, whatever the shell's umask.
- ``make_private`` (the engine, once the castra is locked and the praetorium open) takes
  group and other permissions off what an earlier Legio, or a copy, left readable: the
  castra and everything under it, and ``legio.toml``. The owner's own bits stay (a script
  stays runnable); links are never followed (each entry is opened ``O_PATH|O_NOFOLLOW``
  under a folder descriptor of ``os.fwalk``, and changed through that descriptor); only
  files and folders of this user are changed; a git work tree inside the castra (an
  agent's copy of a project) has its own folder closed (0700: nobody else can reach in)
  and its contents left as the project has them. SQLite gives a new ``-wal``/``-shm``
  the database's own mode, so a 0600 praetorium keeps private WAL files.
- ``privacy_report`` (``legio check``): what of Legio's other users can read (the
  castra's entries, ``legio.toml``, the secrets file ``$LEGIO_SECRETS_FILE`` or
  ``/etc/legio/secrets.env``, which should be ``0600 root:root``: systemd reads it as
  root, and Legio's own user, so its agents and checks, should not).
- ``raise_descriptor_limit`` (first thing in ``legio run`` and ``legio console``): the soft
  ``RLIMIT_NOFILE`` raised to the hard one (a distribution's default soft limit, 1,024, is
  what ~1,150 idle connections to the health endpoint once used up; the endpoint now
  holds only a few, and the room is for agents' CLIs, checks and git).
"""

from __future__ import annotations

import functools
import grp
import logging
import os
import pwd
import resource
import stat
from collections.abc import Iterator
from pathlib import Path

from legio.config import Config

logger = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077
NOFILE_FALLBACK = 65536  # when the hard limit is "unlimited", which the kernel refuses
SECRETS_ENV = "LEGIO_SECRETS_FILE"
DEFAULT_SECRETS = Path("/etc/legio/secrets.env")
EXAMPLES = 3
Line = tuple[str, str]  # (ok | warn | bad, text), as legio check prints them


# ---------------------------------------------------------------- the process


def raise_descriptor_limit() -> int:
    """Raise the soft descriptor limit to the hard one; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, NOFILE_FALLBACK)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as e:
            logger.warning("could not raise the descriptor limit to %s: %s", wanted, e)
            return soft
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def start_daemon_process() -> None:
    """What ``legio run`` and ``legio console`` do first (see the module docstring)."""
    raise_descriptor_limit()


# ---------------------------------------------------------------- the castra's files


def castra_entries(root: Path) -> Iterator[tuple[Path, str, int]]:
    """Everything under ``root`` (not ``root`` itself): its path, its name and a
    descriptor of its folder. Links are not followed; a git work tree's contents are
    not entered (its folder is yielded)."""
    for folder, dirs, files, dir_fd in os.fwalk(root):
        if folder != os.fspath(root) and (".git" in dirs or ".git" in files):
            dirs[:] = []  # a work tree: its folder was seen from its parent
            continue
        for name in (*dirs, *files):
            yield Path(folder) / name, name, dir_fd


def _tighten(name: str | Path, dir_fd: int | None = None, *, follow: bool = False) -> bool:
    """Take group and other permissions off one file or folder of this user, through a
    descriptor of the thing itself (never a link); whether it changed."""
    flags = os.O_PATH | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        kind = stat.S_IFMT(info.st_mode)
        if kind not in (stat.S_IFREG, stat.S_IFDIR) or info.st_uid != os.geteuid():
            return False
        if not info.st_mode & 0o077:
            return False
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(info.st_mode) & ~0o077)
        return True
    except OSError as e:
        logger.warning("could not make %s private: %s", name, e)
        return False
    finally:
        os.close(fd)


def make_private(config: Config) -> int:
    """Tighten the castra and ``legio.toml`` (see the module docstring); how many changed."""
    root = config.castra
    changed = int(_tighten(root, follow=True))  # the castra may be a link to its disk
    for _, name, dir_fd in castra_entries(root):
        changed += _tighten(name, dir_fd)
    if config.path is not None:
        changed += _tighten(config.path)
    if changed:
        logger.info("made %d of Legio's files and folders readable by its user only", changed)
    return changed


# ---------------------------------------------------------------- legio check


@functools.cache
def _group_shared(gid: int) -> bool:
    """Whether a user other than this one is in the group ``gid``."""
    me = os.geteuid()
    try:
        members = set(grp.getgrgid(gid).gr_mem)
        mine = pwd.getpwuid(me).pw_name
    except KeyError:
        return True
    if members - {mine}:
        return True
    return any(user.pw_gid == gid and user.pw_uid != me for user in pwd.getpwall())


def exposed(info: os.stat_result) -> bool:
    """Whether another user can use this file or folder (by "other" or a shared group)."""
    mode = info.st_mode
    return bool(mode & 0o007) or bool(mode & 0o070 and _group_shared(info.st_gid))


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def secrets_file() -> tuple[Path, bool]:
    """The secrets file systemd reads, and whether ``$LEGIO_SECRETS_FILE`` named it."""
    named = os.environ.get(SECRETS_ENV, "")
    return (Path(named), True) if named else (DEFAULT_SECRETS, False)


def _secrets_line() -> Line | None:
    path, named = secrets_file()
    try:
        info = path.stat()
    except FileNotFoundError:
        return ("warn", f"${SECRETS_ENV} names {path}, which does not exist") if named else None
    except OSError:
        return ("ok", f"secrets file {path}: Legio's user cannot even see it")
    wrong = []
    if info.st_mode & 0o077:
        wrong.append(f"it is {stat.S_IMODE(info.st_mode):04o}")
    if info.st_uid != 0:
        wrong.append(f"it is owned by {_owner(info.st_uid)}")
    if os.geteuid() != 0 and os.access(path, os.R_OK):
        wrong.append("Legio's own user can read it, and so could its agents' shells and checks")
    if not wrong:
        return ("ok", f"secrets file {path}: 0600 root:root")
    return (
        "warn",
        f"secrets file {path}: {'; '.join(wrong)}. It must be 0600 root:root (systemd "
        f"reads it as root): `sudo chown root:root {path} && sudo chmod 600 {path}`",
    )


def privacy_report(config: Config) -> list[Line]:
    """``legio check``'s lines about what of Legio's other users can read."""
    lines: list[Line] = []
    root = config.castra
    seen: list[str] = []
    try:
        if exposed(root.stat()):
            seen.append(f"{root} {stat.S_IMODE(root.stat().st_mode):04o}")
    except OSError:
        pass
    for path, name, dir_fd in castra_entries(root):
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISLNK(info.st_mode) and exposed(info):
            seen.append(f"{path.relative_to(root)} {stat.S_IMODE(info.st_mode):04o}")
    if seen:
        examples = ", ".join(seen[:EXAMPLES]) + (", …" if len(seen) > EXAMPLES else "")
        lines.append(
            (
                "warn",
                f"castra {root}: {len(seen)} file(s) or folder(s) other users can read "
                f"({examples}): `legio run` makes them its user's alone when it starts, or "
                f"run `chmod -R go= {root}`",
            )
        )
    else:
        lines.append(("ok", f"castra {root}: readable by Legio's user only"))
    if config.path is not None:
        try:
            info = config.path.stat()
        except OSError:
            pass
        else:
            if exposed(info):
                fix = f"chmod 600 {config.path}"
                if info.st_uid != os.geteuid():  # Legio's user must still read it
                    fix = f"sudo chown {_owner(os.geteuid())} {config.path} && sudo {fix}"
                lines.append(
                    (
                        "warn",
                        f"{config.path} is {stat.S_IMODE(info.st_mode):04o}: other users can "
                        f"read Legio's configuration: `{fix}`",
                    )
                )
    secrets = _secrets_line()
    if secrets is not None:
        lines.append(secrets)
    return lines
