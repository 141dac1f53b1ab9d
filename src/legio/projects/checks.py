"""Projects' checks: ``[projects.<name>] check`` run on an agent's commit, in the jail.

``Checks.start(agent, project, copy_dir, commit)`` runs the project's check command on a
clean tree of exactly ``commit`` (``castra/state/checks/<agent>/<project>/tree-<run>``, made
from the project by Legio's own git, its objects borrowed read-only; removed after the
run), never on the copy's work tree, which the agent controls (a file marked
``skip-worktree`` with other content put back, a filter of its own): what is recorded
for a commit is what that commit does. ``uncommitted=True`` (asked for) runs on the
copy's work tree instead, recorded as such. Either runs inside ``legio.fence.jail`` (an
allow-list jail: the system folders read-only, its tree, an empty home; no network, no
capability) and returns a ``RunningCheck`` at once: its ``record`` (a
``legio.store.checkstore.CheckRecord``, kept in the praetorium) and ``done``, a future
set to the final record. One run at a time per copy: a newer ``start`` stops the older
one (its whole sandbox killed) and records it ``cancelled``, superseded. A run past
``check_timeout`` minutes is killed the same way (SIGTERM to its process group, then
SIGKILL; everything in its PID namespace dies with it) and recorded ``timed_out``.
Without bubblewrap nothing runs: the run is an ``error`` that says to install it.

The output is streamed, never held (``legio.projects.checkoutput``): to a log file
(``castra/state/checks/logs/<id>.log``, cut at 5 MB with a marker; the last
``KEEP_LOGS`` runs of a copy are kept), through the runner's count reader and a ring of
its last 60 lines that becomes the record's ``tail``.
``follow(callback)`` calls back with every finished record; ``recover`` (at start-up)
marks the runs a restart cut off; ``close`` stops every run (shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from legio.errors import ProjectError
from legio.fence.checklimits import LIMITS_FAILED, CheckLimits, Confinement, limit_support
from legio.fence.cliconfig import state_dir
from legio.fence.jail import (
    CHECKS,
    JailSupport,
    blank_file,
    borrowed,
    checks_dir,
    jail_argv,
    jail_env,
    jail_support,
    pinned,
    through_fd,
)
from legio.projects import gitsafe
from legio.projects.checkoutput import LINE_CHARS, MAX_LOG_BYTES, CheckOutput, remove_tree
from legio.projects.copies import Place, Projects
from legio.store.checkstore import CheckRecord, CheckState, CheckStore
from legio.timing import now

logger = logging.getLogger(__name__)

KEEP_LOGS = 10  # logs kept per copy; older ones are removed
KILL_GRACE_S = 5.0  # between SIGTERM and SIGKILL
READ_CHUNK = 64 * 1024
NOT_STARTED = (b"bwrap: ", LIMITS_FAILED.encode())  # the sandbox's or its limits' own words

Follower = Callable[[CheckRecord], Awaitable[None]]


class RunningCheck:
    """One run of a check: ``record`` as it stands, ``done`` set to the final record."""

    def __init__(self, record: CheckRecord, log_path: Path) -> None:
        self.record = record
        self.log_path = log_path
        self.done: asyncio.Future[CheckRecord] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._why: tuple[CheckState, str] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def id(self) -> int:
        return self.record.id

    @property
    def agent(self) -> str:
        return self.record.agent

    @property
    def project(self) -> str:
        return self.record.project

    @property
    def commit(self) -> str:
        return self.record.commit

    @property
    def running(self) -> bool:
        return not self.done.done()

    async def wait(self) -> CheckRecord:
        """The final record, once the run ended (cancelling the waiter leaves the run)."""
        return await asyncio.shield(self.done)

    def stop(self, state: CheckState, why: str) -> None:
        """Ask the run to end now, recorded as ``state`` because ``why``."""
        if self._why is None:
            self._why = (state, why)
        self._stop.set()


def _remove_trees(base: Path) -> None:
    """The clean trees earlier runs left (one cut off by a restart, say)."""
    for old in base.glob("tree-*"):
        remove_tree(old)


def _fresh_dirs(base: Path) -> tuple[Path, Path, Path]:
    """The run's empty ``TMPDIR``, cache and ``HOME``, 0700. The cache is not kept between
    runs: a run of the agent's uncommitted work could seed it (a tool's "ok (cached)")
    for the check of a commit. In the jail each is a sized tmpfs where bubblewrap makes
    one (``Confinement.scratch_size``)."""
    tmp, cache, home = base / "tmp", base / "cache", base / "home"
    for folder in (tmp, cache, home):
        remove_tree(folder)
    for folder in (base, tmp, cache, home):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return tmp, cache, home


class Checks:
    """Every copy's check: started, stopped, recorded; see the module docstring."""

    def __init__(
        self,
        projects: Projects,
        store: CheckStore,
        *,
        support: Callable[[], JailSupport] = jail_support,
        kill_grace_s: float = KILL_GRACE_S,
        max_log_bytes: int = MAX_LOG_BYTES,
    ) -> None:
        self.projects = projects
        self.store = store
        self.support = support
        self.kill_grace_s = kill_grace_s
        self.max_log_bytes = max_log_bytes
        self._runs: dict[tuple[str, str], RunningCheck] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._followers: list[Follower] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def logs_dir(self) -> Path:
        return state_dir(self.projects.castra.root.resolve()) / CHECKS / "logs"

    def command(self, project: str) -> str | None:
        """The project's check command, or None (no check configured, or no project)."""
        settings = self.projects.config.projects.get(project)
        return settings.check if settings is not None and settings.check else None

    def configured(self, project: str) -> bool:
        return self.command(project) is not None

    def follow(self, callback: Follower) -> Callable[[], None]:
        """Call ``callback`` with every run's final record (awaited before the run's
        ``done`` is set: keep it short, start a task for slow work); returns the way to
        stop following."""
        self._followers.append(callback)
        return lambda: self._followers.remove(callback) if callback in self._followers else None

    def running(self, agent: str, project: str) -> RunningCheck | None:
        run = self._runs.get((agent, project))
        return run if run is not None and run.running else None

    async def last(self, agent: str, project: str) -> CheckRecord | None:
        """The latest run on the copy (the one running now, as it stands), or None."""
        run = self.running(agent, project)
        return run.record if run is not None else await self.store.last(agent, project)

    async def get(self, run_id: int) -> CheckRecord | None:
        for run in self._runs.values():
            if run.id == run_id:
                return run.record
        return await self.store.get(run_id)

    def log_path(self, run_id: int) -> Path | None:
        """The run's whole log, if it is still kept."""
        path = self.logs_dir / f"{int(run_id)}.log"
        return path if path.is_file() else None

    async def recover(self) -> list[CheckRecord]:
        """At start-up: the runs a restart cut off, marked ``interrupted``."""
        found = await self.store.interrupt_running(now())
        for record in found:
            logger.info("check #%d (%s on #%s) was cut off by a restart", *_who(record))
        return found

    async def start(
        self,
        agent: str,
        project: str,
        copy_dir: Path,
        commit: str | None = None,
        *,
        uncommitted: bool = False,
    ) -> RunningCheck:
        """Run ``project``'s check for ``agent``'s copy (``copy_dir``) on ``commit`` (None:
        the copy's HEAD, read now): on a clean tree of that commit made from the project
        (``gitsafe.clean_tree``), never on the copy's work tree; with ``uncommitted`` (asked
        for), on the copy's work tree as it is, recorded so. The run, started (or already
        ended: no sandbox, no such commit in the project). A run on the same copy is
        stopped first, recorded as superseded. ``ProjectError`` if the project has no
        check, or ``copy_dir`` is not that copy."""
        command = self.command(project)
        if command is None:
            raise ProjectError(
                f'#{project} has no check: add check = "make test" to [projects.{project}]'
            )
        copy = await asyncio.to_thread(self._copy_of, agent, project, copy_dir)
        if commit is None:  # the copy's HEAD, read with Legio's own git (gitsafe)
            commit = await self.projects.revision(copy, "HEAD")
        key = agent, project
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            timeout_s = self.projects.settings(project).check_timeout * 60
            record = await self.store.begin(
                agent, project, command, commit, timeout_s, now(), uncommitted
            )
            run = RunningCheck(record, self.logs_dir / f"{record.id}.log")
            older = self._runs.get(key)
            self._runs[key] = run
            if older is not None and older.running:
                older.stop("cancelled", f"superseded by check #{record.id} (a newer turn)")
                await older.wait()
            task = asyncio.create_task(self._run(run, copy), name=f"check {agent} #{project}")
            run._task = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return run

    async def cancel(self, agent: str, project: str, why: str) -> CheckRecord | None:
        """Stop the copy's running check (its copy is dropped, say), recorded as
        ``cancelled`` because ``why``; its final record, or None if none was running."""
        run = self.running(agent, project)
        if run is None:
            return None
        run.stop("cancelled", why)
        return await run.wait()

    def _copy_of(self, agent: str, project: str, copy_dir: Path) -> Path:
        """``copy_dir``, checked to be ``agent``'s copy of ``project``: a folder, reached
        through no link (the jail binds it writable)."""
        copy = self.projects.unlinked(agent, project)
        if copy_dir.resolve() != copy.resolve() or not copy.is_dir():
            raise ProjectError(f"{copy_dir} is not {agent}'s copy of #{project}")
        return copy.resolve()

    async def close(self) -> None:
        """Stop every running check (shutdown), each recorded as cancelled."""
        runs = [run for run in self._runs.values() if run.running]
        for run in runs:
            run.stop("cancelled", "Legio shut down while it ran")
        if runs:
            await asyncio.gather(*(run.wait() for run in runs), return_exceptions=True)
        self._followers.clear()

    # ---------------------------------------------------------- one run

    async def _run(self, run: RunningCheck, copy: Path) -> None:
        started = time.monotonic()
        output: CheckOutput | None = None
        tree: Path | None = None
        try:
            support = await asyncio.to_thread(self.support)
            if not support.available:
                await self._finish(run, None, started, "error", support.detail, None)
                return
            base = checks_dir(self.projects.castra.root, run.agent, run.project)
            dirs = await asyncio.to_thread(_fresh_dirs, base)
            if not run.record.uncommitted:  # the commit itself, never the work tree
                tree = base / f"tree-{run.id}"  # its own: an older run may still remove its
                await asyncio.to_thread(_remove_trees, base)
                try:
                    repo = self.projects.settings(run.project).path
                    limit = self.projects.config.sandbox.check_tree_mb
                    await gitsafe.clean_tree(repo, run.commit, tree, limit << 20)
                except ProjectError as e:
                    logger.warning("check #%d: no clean tree: %s", run.id, e)
                    why = (
                        f"{e}: nothing was checked"
                        if isinstance(e, gitsafe.TreeTooLarge)
                        else f"commit {run.commit[:12]} is not in #{run.project} (not "
                        "published there?): nothing was checked"
                    )
                    ended: tuple[CheckState, str | None, int | None] = ("error", why, None)
                else:
                    copy = tree
            if tree is None or copy == tree:
                self.logs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                output = CheckOutput(run.log_path, self.max_log_bytes)
                ended = await self._sandboxed(run, copy, support, dirs, output)
        except Exception as e:  # never a traceback to Caesar: the run says what went wrong
            logger.exception("check #%d failed to run", run.id)
            ended = ("error", f"the check could not run: {e}", None)
        finally:
            if tree is not None:  # gone before the run is told over
                await asyncio.to_thread(remove_tree, tree)
        await self._finish(run, output, started, *ended)

    async def _sandboxed(
        self,
        run: RunningCheck,
        copy: Path,
        support: JailSupport,
        dirs: tuple[Path, Path, Path],
        output: CheckOutput,
    ) -> tuple[CheckState, str | None, int | None]:
        """The run inside its limits (``legio.fence.checklimits``): made, run, removed."""
        config = self.projects.config
        repo = self.projects.settings(run.project).path
        objects = await asyncio.to_thread(borrowed, copy, repo)
        held = await asyncio.to_thread(limit_support, support.detail, support.userns)
        name = f"legio-check-{os.getpid()}-{run.id}-{secrets.token_hex(4)}"  # unique here
        confined = Confinement(CheckLimits.of(config), held, name)
        try:
            await asyncio.to_thread(confined.setup)
        except OSError as e:  # fail closed: no check without its limits
            await asyncio.to_thread(confined.cleanup)
            return "error", f"the check's limits could not be set ({e}): it did not run", None
        try:
            return await self._confined(run, copy, support, dirs, output, confined, objects)
        finally:
            await asyncio.to_thread(confined.cleanup)
            if confined.groups:
                logger.warning("check #%d: cgroups left behind: %s", run.id, confined.groups)

    async def _confined(
        self,
        run: RunningCheck,
        copy: Path,
        support: JailSupport,
        dirs: tuple[Path, Path, Path],
        output: CheckOutput,
        confined: Confinement,
        objects: list[Path],
    ) -> tuple[CheckState, str | None, int | None]:
        projects = self.projects
        tmp, cache, home = dirs
        config = projects.config
        repo = projects.settings(run.project).path
        fence = Place(run.project, run.agent, repo, "", "", copy).fence()
        command = run.record.command
        info, info_w = os.pipe()
        try:
            with contextlib.ExitStack() as stack:
                pins = stack.enter_context(pinned(projects.castra.root, copy, fence))
                argv = await asyncio.to_thread(
                    jail_argv,
                    support.detail,
                    projects.castra,
                    config,
                    run.agent,
                    copy,
                    [tmp, cache, home],
                    command,
                    blank_file(tmp.parent),
                    fence,
                    info_w,
                    objects,
                    support.userns,
                    pins,
                    confined.tmp_args(tmp),
                    confined.shell(),
                    confined.dev_args(tmp),
                    confined.scratch_size(),
                )
                argv, args = through_fd(argv)
                if not os.access(argv[0], os.X_OK):  # said as such, not as the check's exit
                    raise ProjectError(f"{argv[0]} cannot be run")
                argv = confined.wrap(argv)
                stack.callback(os.close, args)
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    env=jail_env(config, tmp, cache, home),
                    start_new_session=True,  # its own process group: killed whole
                    pass_fds=(info_w, args, *pins.values()),
                )
        except BaseException:
            os.close(info)
            raise
        finally:
            os.close(info_w)
        inner = await asyncio.to_thread(_child_pid, info)  # EOF at once if bwrap failed
        assert process.stdout is not None
        pump = asyncio.create_task(self._pump(process.stdout, output))
        stopped = asyncio.create_task(run._stop.wait())
        try:
            done, _ = await asyncio.wait(
                {pump, stopped}, timeout=run.record.timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            if pump not in done:
                if run._why is None:
                    minutes = run.record.timeout_s / 60
                    run._why = (
                        "timed_out",
                        f"timed out after {minutes:g} min: killed with all its processes",
                    )
                await self._kill(process, inner)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(pump), self.kill_grace_s + 5)
            code = await process.wait()
        finally:
            stopped.cancel()
            if not pump.done():
                pump.cancel()
            if process.returncode is None:
                await self._kill(process, inner)
        if run._why is not None:
            return run._why[0], run._why[1], code
        if code != 0 and output.first.startswith(NOT_STARTED) and output.lines <= 3:
            why = output.first.decode("utf-8", "replace")[:LINE_CHARS]
            return "error", f"the sandbox could not start ({why}): the check did not run", code
        if code == 0:
            return "passed", None, code
        return "failed", f"exit code {code}", code

    @staticmethod
    async def _pump(stream: asyncio.StreamReader, output: CheckOutput) -> None:
        while chunk := await stream.read(READ_CHUNK):  # read off the loop: never stalls it
            await asyncio.to_thread(output.write, chunk)

    async def _kill(self, process: asyncio.subprocess.Process, inner: int | None) -> None:
        """The whole check: the sandbox's first process (``inner``) with SIGKILL, which
        takes every process in its PID namespace, while bubblewrap (its parent, which
        reaps it) still runs; then bubblewrap's process group with SIGTERM, and SIGKILL
        after the grace."""
        if inner is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(inner, signal.SIGKILL)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            try:
                await asyncio.wait_for(process.wait(), self.kill_grace_s)
                return
            except TimeoutError:
                continue

    async def _finish(
        self,
        run: RunningCheck,
        output: CheckOutput | None,
        started: float,
        state: CheckState,
        detail: str | None,
        code: int | None,
    ) -> None:
        if run.done.done() or run.record.state != "running":
            return  # told once
        changes: dict[str, object] = {
            "state": state,
            "detail": detail,
            "finished_at": now(),
            "exit_code": code,
            "duration_s": round(time.monotonic() - started, 3),
        }
        if output is not None:
            output.close()
            changes.update(tail=output.tail, log_bytes=output.written, log_cut=output.cut)
            tally = output.tally.result()
            if tally is not None:
                changes.update(
                    passed=tally.passed,
                    failed=tally.failed,
                    skipped=tally.skipped,
                    total=tally.total,
                    unit=tally.unit,
                    runner=tally.runner,
                )
        record = run.record.replace(**changes)
        run.record = record
        try:
            await self.store.save(record)
        except Exception:
            logger.exception("check #%d: its end could not be stored", run.id)
        logger.info("check #%d (%s on #%s): %s", *_who(record), state)
        await self._prune(record)
        for follower in list(self._followers):  # before ``done``: a run is over once told
            try:
                await follower(record)
            except Exception:
                logger.exception("a follower of check #%d failed", run.id)
        if not run.done.done():
            run.done.set_result(record)

    async def _prune(self, record: CheckRecord) -> None:
        """Keep the logs of the copy's last ``KEEP_LOGS`` runs; a failure is logged."""
        try:
            runs = await self.store.history(record.agent, record.project, KEEP_LOGS + 50)
        except Exception:
            logger.exception("check #%d: the older logs could not be listed", record.id)
            return
        for stale in runs[KEEP_LOGS:]:
            with contextlib.suppress(OSError):
                (self.logs_dir / f"{stale.id}.log").unlink(missing_ok=True)


def _child_pid(fd: int) -> int | None:
    """The ``child-pid`` bubblewrap wrote to its info pipe (read to its end, closed)."""
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk[: 65536 - len(data)]
    finally:
        os.close(fd)
    try:
        pid = json.loads(data).get("child-pid")
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def _who(record: CheckRecord) -> tuple[int, str, str]:
    return record.id, record.agent, record.project
