"""Git as Legio runs it itself: never running code an agent could have planted.

An agent's copy of a project (``legio.projects.copies``) is a repository the agent writes, its
``.git`` included: its config can name an fsmonitor, a pager, an external diff or a
textconv command, a clean/smudge filter (with a ``.gitattributes`` to use it), hooks,
``log.showSignature`` with a ``gpg.program``, submodules with configs of their own. Any of
those would run outside the agent's sandbox, as the daemon, the moment Legio ran
``git status`` or ``git diff`` there. So every git command Legio runs goes through
``run``: with ``--git-dir``/``--work-tree`` given (no discovery; ``.git`` must be a real
folder), no optional locks (a status writes no index), no pager, no prompt, none of the
caller's ``GIT_*`` variables, a timeout, and config that switches all of the above off —
for an agent's repository (``hostile=True``) also every filter and diff driver its
config defines, found by reading that config first (reading runs nothing), and every
transport (a partial clone's lazy fetch would run its remote's ``uploadpack``). Settings go
through ``GIT_CONFIG_COUNT``/``KEY``/``VALUE`` (git ≥ 2.31), which takes any key exactly,
and reach the processes git starts (``upload-pack``) too.

No global or system config is read (``GIT_CONFIG_GLOBAL=/dev/null``,
``GIT_CONFIG_NOSYSTEM``): a ``filter.lfs.smudge`` in the daemon user's ``~/.gitconfig``
would otherwise run on a ``.gitattributes`` an agent committed. No commit-graph or
multi-pack-index is trusted (an agent writes its copy's ``objects/info``; a forged graph
names other parents and trees than the commits do). Before git runs on a copy, ``checked``
looks (``lstat``) at what git would open first: ``HEAD``, ``config``, ``index``,
``packed-refs``, ``objects``, ``commondir``: a link, a FIFO or a device there is refused at
once, with its name, instead of steering git elsewhere or stalling it; and git on a copy
gets ``COPY_TIMEOUT_S``.

Git never runs in the daemon's working folder: its ``cwd`` is a fresh empty folder, which is
also the work tree of every command that looks at no files (``--git-dir`` alone would take
the cwd as the work tree, and its ``.gitattributes`` — ``* -diff`` — would steer a diff), and
``core.attributesFile`` is ``/dev/null``. A file over ``core.bigFileThreshold`` (8 MB) is
diffed as binary: one repeated line packs to nothing and would take gigabytes to diff.

Every git Legio runs gets an address-space limit (``RLIMIT_AS``, set in the child before it
runs git: ``MEMORY_LIMIT_MB``, from ``[projects] git_memory_mb``, 2 GiB by default): git
2.39 has no setting that stops ``merge-tree`` (``/diff``) text-merging a file under 1 GB
(``core.bigFileThreshold`` is not read by merges; only a ``merge=binary`` attribute would,
for every file), and a one-line file of 1 GB packs to about 1 MB and takes some 5 GB to
merge. Over the limit git stops ("Out of memory") and ``ProjectError`` says so, naming the
setting; the daemon and its other git commands are untouched. The pack files git maps are
kept under it too (``core.packedGitLimit`` 512 MB, in 64 MB windows: git's 64-bit defaults,
8 GB in 1 GB windows, would outgrow the limit on a big repository).
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from legio.errors import ProjectError

TIMEOUT_S = 120.0  # git in Caesar's own repository
COPY_TIMEOUT_S = 20.0  # git that reads an agent's copy: never holding a command up long
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # for a branch sharing no history
MAX_OUTPUT = 20 * 1024 * 1024  # a diff bigger than this is cut (and said so)
DEFAULT_MEMORY_LIMIT_MB = 2048
MEMORY_LIMIT_MB = float(DEFAULT_MEMORY_LIMIT_MB)  # set from [projects] git_memory_mb at start
OUT_OF_MEMORY = ("Out of memory", "Cannot allocate memory", "mmap failed")

# Off for every git command Legio runs.
SAFE_SETTINGS: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.alternateRefsCommand", ""),
    ("core.untrackedCache", "false"),
    ("core.attributesFile", "/dev/null"),
    ("core.bigFileThreshold", "8m"),  # bigger files are binary to diff: no line diff made
    # packs are mapped in windows: kept well under the address-space limit (MEMORY_LIMIT_MB)
    ("core.packedGitWindowSize", "64m"),
    ("core.packedGitLimit", "512m"),
    ("core.commitGraph", "false"),
    ("core.multiPackIndex", "false"),
    ("fetch.writeCommitGraph", "false"),
    ("diff.external", ""),
    ("status.submoduleSummary", "false"),
    ("submodule.recurse", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("credential.helper", ""),
    # No transport at all: a copy made a partial clone would otherwise fetch its "missing"
    # objects with its remote's uploadpack command (git takes the first one given, so no
    # setting can override it). Clone and publish allow the file transport alone.
    ("protocol.allow", "never"),
    ("protocol.ext.allow", "never"),
    ("sequence.editor", "true"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("maintenance.auto", "false"),
    ("status.showUntrackedFiles", "all"),  # a copy's config cannot hide new files from a card
    ("gc.auto", "0"),
)
DRIVERS = re.compile(r"(filter)\.(.+)\.(clean|smudge|process)|(diff)\.(.+)\.(textconv|command)")
LOCAL_TRANSPORT = (("protocol.file.allow", "always"),)
# What git opens in a copy's .git before anything else, and what each must be (lstat, no
# link followed): a file, a folder, or nothing at all. Absent is fine where git allows it.
FILE, FOLDER, NOTHING = "a file", "a folder", "nothing"
LAYOUT: tuple[tuple[str, str, bool], ...] = (  # (name, kind, may be absent)
    ("HEAD", FILE, False),
    ("config", FILE, True),
    ("index", FILE, True),
    ("packed-refs", FILE, True),
    ("shallow", FILE, True),
    ("objects", FOLDER, False),
    ("objects/info", FOLDER, True),
    ("objects/info/alternates", FILE, True),
    ("refs", FOLDER, False),
    ("commondir", NOTHING, True),  # a clone has none: it would move refs and objects elsewhere
    ("info/grafts", NOTHING, True),  # honoured by git even without replace refs: forged parents
)


def git_dir_of(repo: Path) -> Path:
    """``repo``'s ``.git`` folder, which must be a real folder (not a link, not a ``gitdir:``
    file pointing elsewhere): ``ProjectError`` otherwise."""
    dot_git = repo / ".git"
    try:
        mode = os.lstat(dot_git).st_mode
    except OSError as e:
        raise ProjectError(f"{repo} is not a git repository ({e.strerror})") from e
    if not stat.S_ISDIR(mode):
        raise ProjectError(
            f"{dot_git} is not a folder (a link or a gitdir file): Legio does not follow it"
        )
    return dot_git


def checked(git_dir: Path, *, index: bool = True) -> Path:
    """``git_dir`` (a copy's ``.git``) if each entry of ``LAYOUT`` is what it should be;
    ``ProjectError`` naming the first that is not (a link, a FIFO, a device…). ``index``:
    the command reads the index (it looks at the work tree)."""
    for name, kind, optional in LAYOUT:
        if name == "index" and not index:
            continue
        path = git_dir / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            if optional:
                continue
            raise ProjectError(f"{path} is missing: the copy is broken (/drop it)") from None
        except OSError as e:
            raise ProjectError(f"{path} cannot be read ({e.strerror})") from e
        if kind == NOTHING:
            what = (
                "it would give commits other parents than they have"
                if name == "info/grafts"
                else "it would send git to another repository's refs and objects"
            )
            raise ProjectError(
                f"{path} is there, and a copy has none ({what}): Legio runs no git on this "
                "copy until it is removed (or the copy is dropped with /drop)"
            )
        wanted = stat.S_ISREG if kind == FILE else stat.S_ISDIR
        if not wanted(mode):
            raise ProjectError(
                f"{path} is {_kind_of(mode)}, not {kind}: Legio runs no git on this copy "
                "until it is put right (or the copy is dropped with /drop)"
            )
    return git_dir


def _kind_of(mode: int) -> str:
    kinds = (
        (stat.S_ISLNK, "a link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISREG, "a file"),
    )
    return next((name for test, name in kinds if test(mode)), "something else")


def _environment(
    settings: Sequence[tuple[str, str]], objects: Path | None = None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}

    env.update(
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_PAGER="cat",
        PAGER="cat",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_NO_REPLACE_OBJECTS="1",
        LC_ALL="C",
        GIT_CONFIG_COUNT=str(len(settings)),
    )
    for i, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _limit_memory() -> None:
    """In the child, before git runs: its address space at most ``MEMORY_LIMIT_MB``."""
    limit = int(MEMORY_LIMIT_MB * 1024 * 1024)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def set_memory_limit(megabytes: float) -> None:
    """Every later git Legio runs gets at most ``megabytes`` of address space."""
    global MEMORY_LIMIT_MB
    MEMORY_LIMIT_MB = float(megabytes)


async def _exec(
    args: Sequence[str],
    settings: Sequence[tuple[str, str]],
    limit_s: float,
    given: bytes | None = None,
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    pass_fds: Sequence[int] = (),
    index: Path | None = None,
) -> tuple[int, bytes, str]:
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            *args,
            stdin=asyncio.subprocess.DEVNULL if given is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**_environment(settings), **(env or {})},
            cwd=cwd,
            pass_fds=tuple(pass_fds),
            preexec_fn=_limit_memory,  # only setrlimit: no lock taken, nothing imported
        )
    except FileNotFoundError as e:
        raise ProjectError("git is not installed: install it (apt install git)") from e
    try:
        out, err = await asyncio.wait_for(_bounded(process, given), limit_s)
        if len(out) >= MAX_OUTPUT:  # stopped on purpose: what it said is the answer, cut
            return 0, out, err.decode(errors="replace").strip()
    except TimeoutError as e:
        process.kill()
        await process.wait()
        where = args[1] if args[:1] == ["--git-dir"] else ""
        command = next((a for a in args[4:] if not a.startswith(("-", "/"))), "")
        raise ProjectError(
            f"git {command} took over {limit_s:.0f} s in {where or 'a repository'} and was "
            "stopped (a file there that never answers? see docs/projects.md)"
        ) from e
    except asyncio.CancelledError:
        process.kill()
        await process.wait()
        raise
    said = err.decode(errors="replace").strip()
    if process.returncode and any(m in said for m in OUT_OF_MEMORY):
        where = args[1] if args[:1] == ["--git-dir"] else "a repository"
        command = next((a for a in args[4:] if not a.startswith(("-", "/"))), "")
        raise ProjectError(
            f"git {command} ran out of the memory Legio gives it ({MEMORY_LIMIT_MB:g} MiB, "
            f"[projects] git_memory_mb in legio.toml) in {where}: a file there is too big "
            "to diff or merge (a huge one-line file?). Take it out of the branch, or raise "
            "git_memory_mb."
        )
    return process.returncode or 0, out, said


async def _bounded(
    process: asyncio.subprocess.Process, given: bytes | None = None
) -> tuple[bytes, bytes]:
    """Its output, at most ``MAX_OUTPUT`` bytes (then it is stopped: a copy holding a huge
    file must not fill the daemon's memory), and the start of its errors; ``given`` is
    written to its input meanwhile."""
    assert process.stdout is not None and process.stderr is not None
    errors = asyncio.ensure_future(_drain(process.stderr))
    feeder = asyncio.ensure_future(_feed(process, given))
    out = bytearray()
    while chunk := await process.stdout.read(1024 * 1024):
        out += chunk
        if len(out) >= MAX_OUTPUT:
            process.kill()
            break
    await process.wait()
    await feeder
    return bytes(out[:MAX_OUTPUT]), await errors


async def _feed(process: asyncio.subprocess.Process, given: bytes | None) -> None:
    if given is None or process.stdin is None:
        return
    try:
        process.stdin.write(given)
        await process.stdin.drain()
        process.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # it stopped reading: its exit code says why


async def _drain(stream: asyncio.StreamReader, keep: int = 64 * 1024) -> bytes:
    """All of ``stream`` read (so the process never blocks on it), its start kept."""
    kept = bytearray()
    while chunk := await stream.read(keep):
        if len(kept) < keep:
            kept += chunk
    return bytes(kept[:keep])


async def drivers_of(git_dir: Path) -> list[tuple[str, str]]:
    """Settings that switch off every filter and diff driver ``git_dir``'s config names
    (its includes followed): nothing of what it says is run."""
    with tempfile.TemporaryDirectory(prefix="legio-git-") as empty:
        code, out, _ = await _exec(
            ["--git-dir", str(git_dir), "--work-tree", empty, "config", "--list", "-z"],
            SAFE_SETTINGS,
            COPY_TIMEOUT_S,
            cwd=Path(empty),
        )
    off: list[tuple[str, str]] = []
    if code != 0:
        raise ProjectError(f"cannot read the git config of {git_dir}: it is broken")
    for item in out.decode(errors="replace").split("\0"):
        key = item.split("\n", 1)[0]
        match = DRIVERS.fullmatch(key)
        if match is None:
            continue
        section, name, _ = [g for g in match.groups() if g is not None]
        off.append((key, ""))
        if section == "filter":
            off.append((f"filter.{name}.required", "false"))
    return off


async def run(
    repo: Path,
    *args: str,
    hostile: bool = True,
    check: bool = True,
    work_tree: bool = True,
    limit_s: float | None = None,
    local_transport: bool = False,
    given: bytes | None = None,
    settings: Sequence[tuple[str, str]] = (),
    objects: Path | None = None,
    index: Path | None = None,
) -> str:
    """``git <args>`` in ``repo`` (its output), safely; see the module docstring.

    ``hostile``: an agent could have written the repository (its copy): its ``.git`` is
    ``checked`` first and git gets ``COPY_TIMEOUT_S`` (else ``TIMEOUT_S``), unless
    ``limit_s`` says otherwise. ``check``: a failing command raises ``ProjectError`` with
    git's own words. ``work_tree=False`` for commands that do not look at the files (log,
    rev-list, fetch): their work tree is an empty folder. ``given``: the command's input.
    ``settings``: more config for this command. ``objects``: a folder that receives the
    objects git writes (the repository's own are read, never written). ``index``: an
    index file of Legio's own instead of the repository's (``GIT_INDEX_FILE``)."""
    code, out, err = await run_raw(
        repo,
        *args,
        hostile=hostile,
        work_tree=work_tree,
        limit_s=limit_s,
        local_transport=local_transport,
        given=given,
        settings=settings,
        objects=objects,
        index=index,
    )
    if check and code != 0:
        raise ProjectError(f"git {args[0]} failed in {repo}: {err or f'exit code {code}'}")
    return out.decode(errors="replace")


async def run_raw(
    repo: Path,
    *args: str,
    hostile: bool = True,
    work_tree: bool = True,
    limit_s: float | None = None,
    local_transport: bool = False,
    given: bytes | None = None,
    settings: Sequence[tuple[str, str]] = (),
    objects: Path | None = None,
    pass_fds: Sequence[int] = (),
    index: Path | None = None,
) -> tuple[int, bytes, str]:
    """As ``run``, returning (exit code, stdout bytes, stderr) and never raising for a
    failing command. ``pass_fds``: descriptors git and its helpers inherit (a credential
    helper's pipe, ``legio.forge.push``)."""
    git_dir = git_dir_of(repo)
    config = list(SAFE_SETTINGS)
    if hostile:
        checked(git_dir, index=work_tree)
        config += await drivers_of(git_dir)
    if limit_s is None:
        limit_s = COPY_TIMEOUT_S if hostile else TIMEOUT_S
    if local_transport:  # fetching from a path (an agent's copy into the project)
        config += LOCAL_TRANSPORT
    config += settings
    env = None
    if objects is not None:
        env = {
            "GIT_OBJECT_DIRECTORY": str(objects),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(git_dir / "objects"),
        }
    if index is not None:
        env = {**(env or {}), "GIT_INDEX_FILE": str(index)}
    with tempfile.TemporaryDirectory(prefix="legio-git-") as empty:
        tree = str(repo) if work_tree else empty  # never the daemon's working folder
        where = ["--git-dir", str(git_dir), "--work-tree", tree]
        code, out, err = await _exec(
            [*where, *args], config, limit_s, given, cwd=Path(empty), env=env, pass_fds=pass_fds
        )
    return code, out[:MAX_OUTPUT], err


async def clone_shared(source: Path, target: Path, origin: str) -> None:
    """``git clone --shared --no-checkout``: ``target`` borrows ``source``'s objects (read
    only, through ``objects/info/alternates``) and has ``source`` as remote ``origin``."""
    clone = ["clone", "--quiet", "--shared", "--no-checkout", "--origin", origin]
    with tempfile.TemporaryDirectory(prefix="legio-git-") as empty:
        code, _, err = await _exec(
            [*clone, "--", str(source), str(target)],
            [*SAFE_SETTINGS, *LOCAL_TRANSPORT],
            TIMEOUT_S * 5,
            cwd=Path(empty),
        )
    if code != 0:
        raise ProjectError(f"cloning {source} failed: {err or f'exit code {code}'}")


class TreeTooLarge(ProjectError):
    """A commit whose files, summed, are more than a check may check out."""


async def tree_bytes(repo: Path, commit: str) -> int:
    """The size of ``commit``'s files, summed (``git ls-tree -r -l``), read from its
    objects before anything is checked out."""
    listing = await run(repo, "ls-tree", "-r", "-l", "-z", commit, hostile=False, work_tree=False)
    total = 0
    for entry in listing.split("\0"):
        size = entry.split("\t", 1)[0].split()[-1:] if entry else []
        if size and size[0].isdigit():
            total += int(size[0])
    return total


async def clean_tree(source: Path, commit: str, target: Path, max_bytes: int | None = None) -> None:
    """A fresh repository at ``target`` (which must not exist) holding exactly ``commit``
    of the project ``source``, checked out detached: what a check runs on. Its objects are
    borrowed from ``source`` (``clone --shared``: read, never written), no config of
    ``source`` or of an agent's copy comes along, and git runs with ``SAFE_SETTINGS``:
    no hook, no filter or attribute driver, no fsmonitor runs (a ``.gitattributes`` the
    commit holds names drivers nobody defines: each file is checked out as committed).
    ``ProjectError`` if ``source`` lacks the commit; ``TreeTooLarge`` if its files,
    summed, are over ``max_bytes`` (nothing is checked out)."""
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
        raise ProjectError(f"{commit[:80]!r} is not a commit id")
    await clone_shared(source, target, "project")
    code, _, _ = await run_raw(
        target, "cat-file", "-e", f"{commit}^{{commit}}", hostile=False, work_tree=False
    )
    if code != 0:
        raise ProjectError(f"commit {commit[:12]} is not in {source}")
    if max_bytes is not None:
        size = await tree_bytes(target, commit)
        if size > max_bytes:
            raise TreeTooLarge(
                f"commit {commit[:12]} holds {size / 2**20:,.0f} MB of files, more than a "
                f"check checks out ([sandbox] check_tree_mb = {max_bytes >> 20})"
            )
    await run(target, "checkout", "--quiet", "--detach", commit, hostile=False)
