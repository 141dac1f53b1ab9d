"""A command Legio runs itself in an agent's project copy (a project's check), fenced
outside the Claude CLI: bubblewrap, or nothing.

``jail_argv`` builds the ``bwrap`` command line by ALLOW-LIST: the jail's root is an empty
tmpfs (read-only) holding only what a build needs: the system folders (``/usr``, ``/etc``,
``/opt``, ``/bin``, ``/lib``… where they exist, links kept links on merged-``/usr``
systems) read-only; the copy writable at its own path, with its git settings, hooks,
``info`` and borrowed-objects list read-only again; the project's objects folder that the
copy borrows (``objects/info/alternates``, ``git clone --shared``) read-only; the check's
own ``TMPDIR``, cache and an empty ``HOME`` (in ``castra/state/checks/<agent>/<project>/``)
writable; the folders Caesar lists in ``[sandbox] check_read`` read-only; a private
``/tmp`` and ``/var/tmp``, a fresh ``/proc`` and ``/dev``. Nothing else of the host is
there: no ``/home``, ``/root``, ``/run``, no other part of the castra, so no Unix socket
of the host (tmux, X11, ssh-agent, the CLI's proxies) and no secret that appears while
it runs. Inside those folders what no agent may read stays hidden (an empty tmpfs over a
folder, an empty file over a file), and so does every entry of ``/etc`` the world may not
read (``/etc/shadow``, host keys: a check run by root would own them).
``--cap-drop ALL`` (root in a container keeps no capability: no mount, no remount),
``--unshare-all`` (and a user namespace with no nested one where the machine allows it):
no network at all, its own processes only; ``--die-with-parent``, ``--new-session``.
``jail_env`` is the agent's scrubbed environment without anything that looks like a
secret, ``HOME`` the empty one.

Without a working ``bwrap`` there is no check: ``jail_support`` says so and nothing runs
unsandboxed.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from legio.castra import Castra
from legio.config import Config
from legio.fence.cliconfig import state_dir
from legio.fence.keys import SOCKET_VARS
from legio.fence.policy import Protected, denied_env_names, protected_entries
from legio.fence.safefs import open_dir

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
# variables naming the host's own folders, which the check does not see
HOST_DIRS_VARS = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")
MAX_FILE_BYTES = 4 * 1024**3  # a check writes no larger file (RLIMIT_FSIZE)
MAX_OPEN_FILES = 65536  # nor holds more open files (RLIMIT_NOFILE)
# the host's folders a check sees, read-only (where they exist): what a build needs
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")


@dataclass(frozen=True)
class JailSupport:
    """Whether this machine can run a check in a sandbox, and what was found or missing;
    ``userns``: whether bubblewrap can give it its own user namespace (with no nested one)."""

    available: bool
    detail: str
    userns: bool = False


def jail_support() -> JailSupport:
    """Whether ``bwrap`` is here and can make the jail (cached per ``PATH``)."""
    return _support(sys.platform, os.environ.get("PATH", ""))


USERNS = ("--unshare-user", "--disable-userns")


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
    tail = ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--", "true"]
    first = "no message"
    for userns in (True, False):  # a user namespace where it works; capabilities dropped
        try:
            done = subprocess.run(
                [*probe, *(USERNS if userns else ()), *tail],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return JailSupport(False, f"bubblewrap does not run here ({e})")
        if done.returncode == 0:
            return JailSupport(True, bwrap, userns)
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
    return JailSupport(
        False, f"bubblewrap cannot make a sandbox here ({first}; user namespaces off?)"
    )


def checks_dir(castra_root: Path, agent: str, project: str) -> Path:
    """``castra/state/checks/<agent>/<project>/``: the check's scratch, cache and logs."""
    return state_dir(castra_root.resolve()) / CHECKS / agent / project


def jail_env(
    config: Config,
    scratch: Path,
    cache: Path,
    home: Path,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The check's environment: the daemon's (already scrubbed for agents) without what
    agents may not see nor anything that looks like a secret; ``HOME`` the check's own
    empty one, ``TMPDIR`` its own, ``XDG_CACHE_HOME`` a cache empty at each run."""
    environ = dict(os.environ if environ is None else environ)
    denied = set(denied_env_names(config, environ))
    patterns = (*SECRET_VARS, *SOCKET_VARS, *HOST_DIRS_VARS)
    env = {
        name: value
        for name, value in environ.items()
        if name not in denied and not any(fnmatch.fnmatchcase(name.upper(), p) for p in patterns)
    }
    env.update(TMPDIR=str(scratch), XDG_CACHE_HOME=str(cache), HOME=str(home))
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


def borrowed(copy: Path, repo: Path) -> list[Path]:
    """The objects folders the copy borrows (its ``objects/info/alternates``) that lie in
    the project's checkout ``repo``: what git in the copy needs to read. A line pointing
    anywhere else is not followed (the jail binds none of it: git fails, nothing leaks)."""
    alternates = copy / ".git" / "objects" / "info" / "alternates"
    try:
        if alternates.is_symlink():
            return []
        lines = alternates.read_text(errors="replace").splitlines()
    except OSError:
        return []
    found: list[Path] = []
    top = repo.resolve()
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "\0" in line:
            continue
        path = (alternates.parent.parent / line).resolve()
        if _inside(path, top) and path.is_dir() and path not in found:
            found.append(path)
    return found


def system_binds() -> list[str]:
    """The host's system folders, read-only (links recreated as links: merged ``/usr``)."""
    argv: list[str] = []
    for name in SYSTEM:
        path = Path(name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            argv += ["--ro-bind", name, name]
    return argv


def _private_etc(etc: Path = Path("/etc")) -> list[tuple[Path, str]]:
    """What in ``/etc`` the world may not read (``shadow``, host keys, ``ssl/private``):
    hidden, since a check run by root owns it (the owner reads without a capability)."""
    found: list[tuple[Path, str]] = []
    for root, dirs, files in os.walk(etc):
        keep = []
        for name in sorted(dirs + files):
            path = Path(root) / name
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                continue
            if stat.S_ISDIR(mode):
                if mode & (stat.S_IROTH | stat.S_IXOTH) != stat.S_IROTH | stat.S_IXOTH:
                    found.append((path, "dir"))
                elif name in dirs:
                    keep.append(name)
            elif not mode & stat.S_IROTH:
                found.append((path, "file"))
        dirs[:] = keep
    return found


@contextlib.contextmanager
def pinned(root: Path, copy: Path, fence: Sequence[Protected]) -> Iterator[dict[Path, int]]:
    """Descriptors of the copy and of the ``fence`` entries inside it (its git settings,
    hooks…), each reached from ``root`` (the castra, Legio's) one component at a time
    without following a link, closed on leaving: what bubblewrap binds (``--bind-fd``),
    so a link the agent puts in their place between this walk and the mount reaches
    nothing (the copy swapped for a link to a home folder stays the copy). An entry that
    is a link or is not there is left out; the copy itself a link: ``UnsafePath``."""
    root, copy = root.resolve(), copy.resolve()
    base = copy.relative_to(root).parts
    fds: dict[Path, int] = {}
    try:
        fds[copy] = open_dir(root, base)
        for entry in fence:
            if not entry.read or entry.write or not _inside(entry.path, copy):
                continue
            rel = entry.path.relative_to(copy).parts
            if not rel:
                continue
            try:
                parent = open_dir(root, [*base, *rel[:-1]])
            except (OSError, ValueError):
                continue  # a link or nothing on the way: no bind, nothing reached
            try:
                fd = os.open(rel[-1], os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            except OSError:
                continue
            finally:
                os.close(parent)
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                os.close(fd)
                continue
            fds[copy.joinpath(*rel)] = fd
        yield fds
    finally:
        for fd in fds.values():
            os.close(fd)


def _linked_below(path: Path, top: Path) -> bool:
    """Whether a part of ``path`` below ``top`` is a link (bubblewrap would follow it)."""
    try:
        parts = path.relative_to(top).parts
    except ValueError:
        return True
    here = top
    for part in parts:
        here = here / part
        if here.is_symlink():
            return True
    return False


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
    read: Sequence[Path] = (),
    userns: bool = False,
    pins: Mapping[Path, int] | None = None,
    tmp: Sequence[str] = ("--tmpfs", "/tmp", "--tmpfs", "/var/tmp"),
    ulimits: str = "",
    dev: Sequence[str] = (),
    scratch: Sequence[str] | None = None,
) -> list[str]:
    """``bwrap … -- /bin/sh -c LIMITS check command`` in ``copy`` (``limits``);
    ``writable``: the check's own folders (its ``TMPDIR``, cache, ``HOME``), made first;
    ``read``: folders it reads (the objects the copy borrows: ``borrowed``); ``blank``:
    an empty file, what a hidden file reads as (``blank_file``). ``fence``: the copy's own
    (what the agent may read there, not write) and the projects' checkouts. ``info_fd``:
    where bubblewrap writes the pid of the sandbox's first process (``child-pid``), whose
    death takes every process in the sandbox. ``userns``: its own user namespace
    (``JailSupport.userns``). ``pins``: descriptors of the copy and its fence entries
    (``pinned``), bound instead of their paths (given: an entry without one is not
    bound). ``tmp``: the options making ``/tmp`` and ``/var/tmp`` (sized:
    ``legio.fence.checklimits``); ``ulimits``: more of the jail's ``ulimit`` line; ``dev``:
    what follows ``--dev /dev`` (a sized ``/dev/shm``, ``/dev`` read-only). ``scratch``
    (not None): each of ``writable`` is a fresh tmpfs made with these options first
    (``["--size", N]``: ``Confinement.scratch_size``), not the folder on disk."""
    given, copy = copy, copy.resolve()
    system = [Path(n).resolve() for n in SYSTEM if not Path(n).is_symlink() and Path(n).is_dir()]
    extra = [Path(p).expanduser().resolve() for p in config.sandbox.check_read]
    extra = [p for p in extra if p.exists() and not any(_inside(p, s) for s in system)]
    reads = [*extra, *(r.resolve() for r in read)]
    open_ = [copy, *(w.resolve() for w in writable)]
    bound = [*system, *reads, *open_]
    hide = [Path(p) for p in config.sandbox.hide]
    entries = [*fence, *protected_entries(castra, agent, config.path, hide)]
    hidden = [(p, k) for p, k in _hidden(entries) if any(_inside(p, b) for b in bound)]
    hidden += [(p, k) for p, k in _private_etc() if not any(_inside(p, h) for h, _ in hidden)]
    castra_root = castra.root.resolve()
    if any(_inside(castra_root, b) for b in [*system, *reads]):  # Legio under /opt, say
        hidden = [  # none of it but the check's own folders
            (castra_root, "dir"),
            *(
                (p, k)
                for p, k in hidden
                if not _inside(p, castra_root) or any(_inside(p, o) for o in open_)
            ),
        ]
    argv = [bwrap, *tmp, *system_binds()]
    argv += ["--dev", "/dev", *dev, "--proc", "/proc"]
    for folder in reads:  # after the private /tmp: a project may live in the host's /tmp
        argv += ["--ro-bind", str(folder), str(folder)]
    outer = [(p, k) for p, k in hidden if not any(_inside(p, o) for o in open_)]
    inner = [(p, k) for p, k in hidden if (p, k) not in outer]
    for path, kind in outer:
        argv += _hide(path, kind, blank)
    for folder in open_:
        if scratch is not None and folder != copy:
            argv += [*scratch, "--tmpfs", str(folder)]
        elif pins is not None and folder in pins:
            argv += ["--bind-fd", str(pins[folder]), str(folder)]
        else:
            argv += ["--bind", str(folder), str(folder)]
    for path, kind in inner:  # a hidden place inside the copy stays hidden
        argv += _hide(path, kind, blank)
    for entry in fence:  # read, not written: the copy's git settings and hooks
        if not entry.read or entry.write or not _inside(entry.path, given):
            continue
        path = copy / entry.path.relative_to(given)
        if pins is not None:
            if path in pins:
                argv += ["--ro-bind-fd", str(pins[path]), str(path)]
        elif not _linked_below(path, copy) and _kind(path) is not None:
            argv += ["--ro-bind", str(path), str(path)]
    for path, kind in hidden:
        if kind == "dir":
            argv += ["--remount-ro", str(path)]
    argv += ["--remount-ro", "/"]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    argv += ["--cap-drop", "ALL", "--unshare-all", *(USERNS if userns else ())]
    argv += [
        "--die-with-parent",
        "--new-session",
        "--chdir",
        str(copy),
        "--",
        "/bin/sh",
        "-c",
        limits(ulimits),
        "check",
        command,
    ]
    return argv


def limits(more: str = "") -> str:
    """The shell line that lowers the check's limits (soft and hard: with no capability
    it cannot raise them again) then runs its command (``$1``): no file over
    ``MAX_FILE_BYTES``, at most ``MAX_OPEN_FILES`` open files, no core dump, and ``more``
    (memory, processes: ``legio.fence.checklimits``); one that cannot be set stops the
    check before its command. ``ulimit -f`` counts 512-byte blocks in every ``/bin/sh``
    (dash, bash as ``sh``, busybox)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    files = MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(MAX_OPEN_FILES, hard)
    blocks = MAX_FILE_BYTES // 512
    more = f"{more} && " if more else ""
    return f'ulimit -f {blocks} && ulimit -n {files} && ulimit -c 0 && {more}exec /bin/sh -c "$1"'


def through_fd(argv: Sequence[str]) -> tuple[list[str], int]:
    """``argv`` (``bwrap … -- command``) as ``bwrap --args FD -- command``, its options
    in a memory file: ``/proc/<pid>/cmdline`` of the sandbox's first process (the check
    sees it) and of bubblewrap on the host show no castra path nor the list of what is
    hidden (bubblewrap takes the command from its own command line only). The descriptor
    is the caller's to pass (``pass_fds``) and close."""
    end = list(argv).index("--")
    fd = os.memfd_create("legio-check-args", os.MFD_CLOEXEC)
    try:
        data = memoryview(b"".join(a.encode() + b"\0" for a in argv[1:end]))
        while data:
            data = data[os.write(fd, data) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return [argv[0], "--args", str(fd), *argv[end:]], fd
