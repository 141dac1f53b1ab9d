"""Projects' checks for real: the check command in an agent's copy inside bubblewrap, its
output streamed to a bounded log, the runner's count read, killed at its timeout with
every process it started, a newer run superseding an older one, the fences held (no
write outside the copy, no credential store, no praetorium, no network), and the
``checks`` table's round trip and restart marks."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from legio.app import LegioApp
from legio.castra import Castra
from legio.config import load_config
from legio.errors import ProjectError
from legio.fence.jail import JailSupport, jail_support
from legio.frontends.views import projects_lines
from legio.projects.checkoutput import MAX_LOG_BYTES, TAIL_LINES
from legio.projects.checks import Checks
from legio.projects.checkwords import check_badge
from legio.projects.copies import Place, Projects
from legio.projects.overview import check_projects, overview
from legio.settings.projects import ProjectSettings
from legio.store.checkstore import CheckRecord, CheckStore
from legio.store.praetorium import Praetorium
from legio.timing import now
from tests.conftest import FakeCli
from tests.gitrepo import git, make_project
from tests.legion import fake_cli_config

# the interpreter itself, not the venv's link to it: the jail shows no home folder, so the
# bench lets checks read its install (``[sandbox] check_read``)
PY = os.path.realpath(sys.executable)
PY_HOME = sys.base_prefix


def processes_with(marker: str) -> list[int]:
    """Pids of this machine's processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


async def gone(marker: str, within_s: float = 30.0) -> bool:
    """Whether every process holding ``marker`` is gone (waited for, up to ``within_s``)."""
    deadline = time.monotonic() + within_s
    while processes_with(marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@dataclass
class Bench:
    """A castra with project ``app`` (check: ``command``), vorenus's copy, the checks."""

    root: Path
    project: Path
    place: Place
    praetorium: Praetorium
    checks: Checks
    store: CheckStore

    @property
    def copy(self) -> Path:
        return self.place.copy

    async def run(self) -> CheckRecord:
        run = await self.checks.start("vorenus", "app", self.copy, "c0ffee", uncommitted=True)
        return await run.wait()


BenchFactory = Callable[..., Awaitable[Bench]]


@pytest.fixture
async def bench(castra_dir: Path, tmp_path: Path) -> AsyncIterator[BenchFactory]:
    """Make the bench with a check command (and its timeout in minutes)."""
    assert jail_support().available, "install bubblewrap (.ci/run does)"
    opened: list[Bench] = []
    project = make_project(tmp_path / "app")

    async def make(
        command: str, timeout: float = 15, sandbox: str = "", **options: object
    ) -> Bench:
        toml = tmp_path / "legio.toml"
        toml.write_text(
            f'[projects.app]\npath = "{project}"\ncheck = """{command}"""\n'
            f'check_timeout = {timeout}\n[sandbox]\ncheck_read = ["{PY_HOME}"]\n{sandbox}'
        )
        config = load_config(toml)
        castra = Castra(config.castra)
        projects = Projects(config, castra)
        praetorium = await Praetorium.open(castra.praetorium_path)
        store = CheckStore(praetorium)
        checks = Checks(projects, store, kill_grace_s=2, **options)  # type: ignore[arg-type]
        place = await projects.place("vorenus", "app")
        made = Bench(castra.root.resolve(), project, place, praetorium, checks, store)
        opened.append(made)
        return made

    yield make
    for each in opened:
        await each.checks.close()
        await each.praetorium.close()


PYTEST_LIKE = (
    "import sys\n"
    "print('collected 212 items')\n"
    "for i in range(100): print(f'tests/test_{i}.py ....', flush=True)\n"
    "print('\\x1b[32m====== 212 passed, 1 warning in 41.02s ======\\x1b[0m')\n"
)


async def test_a_passing_check_is_recorded_with_its_count(bench: BenchFactory) -> None:
    b = await bench(f"{PY} fake_pytest.py")
    (b.copy / "fake_pytest.py").write_text(PYTEST_LIKE)
    seen: list[CheckRecord] = []

    async def told(record: CheckRecord) -> None:
        seen.append(record)

    b.checks.follow(told)
    run = await b.checks.start("vorenus", "app", b.copy, "c0ffee", uncommitted=True)
    assert run.record.state == "running" and run.commit == "c0ffee"
    assert (await b.checks.last("vorenus", "app")) == run.record  # running, as it stands
    record = await run.wait()
    assert record.state == "passed" and record.exit_code == 0 and record.detail is None
    assert (record.passed, record.failed, record.total, record.runner) == (212, 0, 212, "pytest")
    assert record.commit == "c0ffee" and record.duration_s is not None
    assert record.finished_at is not None and record.finished_at >= record.started_at
    lines = record.tail.splitlines()
    assert len(lines) == TAIL_LINES
    assert lines[-1] == "====== 212 passed, 1 warning in 41.02s ======"  # colours stripped
    assert seen == [record]
    assert await b.store.get(record.id) == record  # stored as told
    assert await b.checks.last("vorenus", "app") == record
    log = b.checks.log_path(record.id)
    assert log is not None and "collected 212 items" in log.read_text()
    assert log.stat().st_size == record.log_bytes


async def test_a_failing_check_says_how_many_failed(bench: BenchFactory) -> None:
    b = await bench(
        f"{PY} -c \"print('FAILED tests/test_x.py::test_a'); "
        "print('3 failed, 209 passed in 38.10s'); raise SystemExit(1)\""
    )
    record = await b.run()
    assert record.state == "failed" and record.exit_code == 1
    assert record.detail == "exit code 1"
    assert (record.passed, record.failed, record.total) == (209, 3, 212)
    assert "FAILED tests/test_x.py::test_a" in record.tail


async def test_a_check_past_its_time_is_killed_with_every_process_it_started(
    bench: BenchFactory,
) -> None:
    marker = "4711.0815"
    b = await bench(f"sh -c 'sleep {marker} & echo grandchild up; wait'", timeout=0.1)
    record = await b.run()
    assert record.state == "timed_out"
    assert record.detail is not None and "timed out after 0.1 min" in record.detail
    assert "grandchild up" in record.tail  # it had started its own child
    assert await gone(marker), "a process of the check outlived it"


async def test_a_check_that_prints_megabytes_keeps_a_bounded_log_and_the_right_tail(
    bench: BenchFactory,
) -> None:
    b = await bench(
        f'{PY} -c "import sys; w = sys.stdout.write\n'
        "for i in range(160000): w('x' * 60 + ' line ' + str(i) + chr(10))\n"
        "w('y' * 200000)\""  # and a last line of 200,000 characters, without a newline
    )
    record = await b.run()
    assert record.state == "passed"
    assert record.log_cut is True and record.log_bytes == MAX_LOG_BYTES
    log = b.checks.log_path(record.id)
    assert log is not None
    assert MAX_LOG_BYTES < log.stat().st_size < MAX_LOG_BYTES + 1024  # and the marker
    assert log.read_bytes()[-400:].decode().count("… cut: the log stops at 5120 KB") == 1
    lines = record.tail.splitlines()
    assert lines[-2].endswith("line 159999")
    assert lines[-1].startswith("yyyy") and lines[-1].endswith(" …")  # cut, said so
    assert len(record.tail) <= 8000


async def test_a_check_cannot_write_outside_its_copy(bench: BenchFactory, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    b = await bench("sh escape.sh")
    prompt = b.root / "centuriones" / "vorenus" / "prompt.md"
    before = prompt.read_text()
    attempts = [
        f"echo pwned > {outside}",
        f"echo pwned >> {prompt}",
        f"echo pwned > {b.project}/app.py",  # Caesar's own checkout
        "echo pwned >> .git/config",  # the copy's git settings are Legio's
        "mkdir -p $HOME/.legio-check-was-here",
        f"echo pwned > {b.root}/state/x",
    ]
    script = "; ".join(f"{a} && echo WROTE" for a in attempts) + "; echo ok > inside.txt; false"
    (b.copy / "escape.sh").write_text(script + "\n")
    record = await b.run()
    assert record.state == "failed"  # the check fails; Legio goes on
    # what it wrote under the host's /tmp went to its own private /tmp, gone with it
    assert "cannot create .git/config: Read-only file system" in record.tail, record.tail
    assert not outside.exists()
    assert prompt.read_text() == before
    assert "pwned" not in (b.project / "app.py").read_text()
    assert "pwned" not in (b.copy / ".git" / "config").read_text()
    assert not (Path.home() / ".legio-check-was-here").exists()
    assert (b.copy / "inside.txt").read_text() == "ok\n"  # its own copy is writable


async def test_a_check_sees_no_credential_no_praetorium_no_secret_variable(
    bench: BenchFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("SSH-KEY-NEVER-FOR-CHECKS\n")
    (home / ".netrc").write_text("machine x login y password NETRC-NEVER-FOR-CHECKS\n")
    (home / ".gitconfig").write_text("[user]\n\tname = GITCONFIG-NEVER-FOR-CHECKS\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "BOT-TOKEN-NEVER-FOR-CHECKS")
    monkeypatch.setenv("GH_TOKEN", "FORGE-TOKEN-NEVER-FOR-CHECKS")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "API-KEY-NEVER-FOR-CHECKS")
    b = await bench("sh peek.sh")
    await b.praetorium.post("caesar", "PRAETORIUM-TEXT-NEVER-FOR-CHECKS", ["vorenus"])
    pullo = b.root / "centuriones" / "pullo"
    (pullo / "notes.txt").write_text("PULLO-NEVER-FOR-CHECKS\n")
    config = b.root.parent / "legio.toml"
    script = (
        f"cat $HOME/.ssh/id_ed25519; cat $HOME/.netrc; cat {b.root}/praetorium.db*; "
        f"cat {pullo}/notes.txt; cat {config}; ls -a $HOME/.ssh; env; "
        f"cat /proc/1/environ; cat $HOME/.gitconfig; echo HOME=$HOME; "
        "git log -1 --format=subject:%s || echo GIT-FAILED; exit 3"
    )
    (b.copy / "peek.sh").write_text(script + "\n")
    record = await b.run()
    assert record.state == "failed" and record.exit_code == 3
    log = b.checks.log_path(record.id)
    assert log is not None
    seen = log.read_text(errors="replace")
    assert "NEVER-FOR-CHECKS" not in seen, seen
    assert "check =" not in seen  # the config is hidden too
    assert f"HOME={b.root}/state/checks/vorenus/app/home" in seen  # its own, empty
    assert "subject:a test" in seen and "GIT-FAILED" not in seen  # a hidden file reads empty


async def test_a_check_has_no_network(bench: BenchFactory) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), 5).close()  # reachable from here
        server.accept()[0].close()
        b = await bench(
            f"{PY} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\"; "
            f"{PY} -c \"import socket; socket.getaddrinfo('example.com', 443)\""
        )
        record = await b.run()
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing from the check waits to be accepted
    assert record.state == "failed"
    assert "ConnectionRefusedError" in record.tail or "unreachable" in record.tail
    assert "gaierror" in record.tail  # no name resolves either


async def test_a_newer_check_cancels_the_older_one(bench: BenchFactory) -> None:
    marker = "4712.0815"
    b = await bench(f"test -f fast || (echo slow started; sleep {marker})")
    first = await b.checks.start("vorenus", "app", b.copy, "aaaa", uncommitted=True)
    assert first.running
    (b.copy / "fast").write_text("")
    second = await b.checks.start("vorenus", "app", b.copy, "bbbb", uncommitted=True)
    older = await first.wait()
    assert older.state == "cancelled"
    assert older.detail == f"superseded by check #{second.id} (a newer turn)"
    newer = await second.wait()
    assert newer.state == "passed" and newer.commit == "bbbb"
    assert await gone(marker)
    assert (await b.store.get(first.id)) == older
    assert await b.checks.last("vorenus", "app") == newer


async def test_closing_stops_every_running_check(bench: BenchFactory) -> None:
    marker = "4713.0815"
    b = await bench(f"sleep {marker}")
    run = await b.checks.start("vorenus", "app", b.copy, "aaaa", uncommitted=True)
    await b.checks.close()
    record = await run.wait()
    assert record.state == "cancelled" and record.detail == "Legio shut down while it ran"
    left = processes_with(marker)
    assert await gone(marker), [Path(f"/proc/{p}/status").read_text() for p in left]


async def test_a_restart_marks_the_run_it_cut_off(bench: BenchFactory) -> None:
    b = await bench("true")
    cut = await b.store.begin("vorenus", "app", "make test", "aaaa", 900, now())
    done = await b.run()
    found = await b.checks.recover()
    assert [r.id for r in found] == [cut.id]
    again = await b.store.get(cut.id)
    assert again is not None and again.state == "interrupted"
    assert again.detail is not None and "restart" in again.detail
    assert (await b.store.get(done.id)) == done  # a finished run is left as it was
    assert await b.checks.recover() == []


async def test_without_bubblewrap_nothing_runs_and_it_says_to_install_it(
    bench: BenchFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    b = await bench(
        f"touch {marker}",
        support=lambda: JailSupport(False, "bubblewrap is not installed: install it"),
    )
    record = await b.run()
    assert record.state == "error" and "install" in (record.detail or "")
    assert not marker.exists()
    empty = tmp_path / "no-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    missing = jail_support()
    assert not missing.available
    assert "apt install bubblewrap" in missing.detail


async def test_start_refuses_a_project_without_check_or_another_copy(
    bench: BenchFactory, tmp_path: Path
) -> None:
    b = await bench("true")
    with pytest.raises(ProjectError, match="is not vorenus's copy"):
        await b.checks.start("vorenus", "app", tmp_path, "aaaa", uncommitted=True)
    b.checks.projects.config.projects["app"] = ProjectSettings(path=b.project)
    assert not b.checks.configured("app")
    with pytest.raises(ProjectError, match='add check = "make test"'):
        await b.checks.start("vorenus", "app", b.copy, "aaaa", uncommitted=True)


@pytest.fixture
def stores(tmp_path: Path) -> Path:
    return tmp_path / "p.db"


async def test_the_checks_table_round_trip(stores: Path) -> None:
    async with await Praetorium.open(stores) as praetorium:
        store = CheckStore(praetorium)
        first = await store.begin("vorenus", "app", "make test", "aaaa", 900, now())
        assert first.running and first.tail == "" and not first.counted
        finished = first.replace(
            state="failed",
            detail="exit code 2",
            finished_at=now(),
            exit_code=2,
            duration_s=38.5,
            tail="E  assert 1 == 2\n3 failed, 209 passed in 38.10s",
            log_bytes=1234,
            log_cut=True,
            passed=209,
            failed=3,
            skipped=0,
            total=212,
            unit="tests",
            runner="pytest",
        )
        await store.save(finished)
        second = await store.begin("pullo", "app", "make test", "bbbb", 60, now())
    async with await Praetorium.open(stores) as praetorium:
        store = CheckStore(praetorium)
        assert await store.get(first.id) == finished
        assert await store.last("vorenus", "app") == finished
        assert await store.last("pullo", "app") == second
        assert await store.last("vorenus", "other") is None
        assert await store.history("vorenus", "app") == [finished]
        assert await store.get(999) is None


async def test_projects_shows_each_copys_last_check_and_nothing_without_one(
    bench: BenchFactory,
) -> None:
    b = await bench(f"{PY} fake_pytest.py")
    projects = b.checks.projects
    lines = await check_projects(projects.config, projects.castra)
    said = f"project #app: check `{PY} fake_pytest.py` (on a clean tree of the commit, "
    assert ("ok", said + "sandboxed, no network, killed after 15 min)") in lines
    [limits] = [text for _, text in lines if "its check's limits by " in text]
    assert "1024 processes" in limits or "processes not limited" in limits
    [before] = await overview(projects, b.checks)
    assert before.check == f"{PY} fake_pytest.py"
    assert projects_lines([before])[1].endswith(", check: not run yet")
    (b.copy / "fake_pytest.py").write_text(PYTEST_LIKE)
    git(b.copy, "add", "fake_pytest.py", caesar=False)
    git(b.copy, "commit", "--quiet", "-m", "a fake pytest", caesar=False)
    await projects.publish(b.place)
    head = git(b.copy, "rev-parse", "HEAD").strip()
    record = await (await b.checks.start("vorenus", "app", b.copy)).wait()
    assert record.commit == head and not record.uncommitted  # the copy's HEAD, committed
    [state] = await overview(projects, b.checks)
    assert state.copies[0].check == record
    line = projects_lines([state])[1]
    assert line.startswith("  vorenus: legio/vorenus/main")
    assert ", check ✅ 212 passed · " in line and line.endswith(f" s on {head[:7]}")
    projects.config.projects["app"] = ProjectSettings(path=b.project)  # no check any more
    [plain] = await overview(projects, b.checks)
    assert plain.check is None and plain.copies[0].check is None
    assert "check" not in projects_lines([plain])[1]


async def test_the_engine_marks_cut_off_runs_at_start_and_stops_running_ones_at_close(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    marker = "4714.0815"
    project = make_project(tmp_path / "app")
    config = fake_cli_config(
        castra_dir, fake_cli, f'[projects.app]\npath = "{project}"\ncheck = "sleep {marker}"\n'
    )
    app = await LegioApp.open(config)
    try:
        place = await app.engine.sessions.projects.place("vorenus", "app")
        cut = await app.engine.checks.store.begin("pullo", "app", "make", "aaaa", 60, now())
        run = await app.engine.checks.start("vorenus", "app", place.copy, "bbbb", uncommitted=True)
    finally:
        await app.close()
    stopped = await run.wait()
    assert stopped.state == "cancelled" and stopped.detail == "Legio shut down while it ran"
    assert await gone(marker)
    app = await LegioApp.open(load_config(config.path))
    try:
        again = await app.engine.checks.get(cut.id)
        assert again is not None and again.state == "interrupted"
        assert await app.engine.checks.get(run.id) == stopped
    finally:
        await app.close()


async def test_dropping_a_copy_stops_its_check(bench: BenchFactory) -> None:
    marker = "4715.0815"
    b = await bench(f"sleep {marker}")
    run = await b.checks.start("vorenus", "app", b.copy, "aaaa", uncommitted=True)
    assert await b.checks.cancel("pullo", "app", "no such run") is None
    stopped = await b.checks.cancel("vorenus", "app", "its copy was dropped")
    assert stopped is not None and stopped.state == "cancelled"
    assert stopped.detail == "its copy was dropped" and await run.wait() == stopped
    assert await gone(marker)
    assert await b.checks.cancel("vorenus", "app", "again") is None


async def test_a_sandbox_that_cannot_start_is_an_error_not_a_failed_check(
    bench: BenchFactory, tmp_path: Path
) -> None:
    broken = tmp_path / "bwrap"
    broken.write_text(
        '#!/bin/sh\necho "bwrap: Can\'t mount tmpfs on /newroot/x: No such file"\nexit 1\n'
    )
    broken.chmod(0o755)
    b = await bench("true", support=lambda: JailSupport(True, str(broken)))
    record = await b.run()
    assert record.state == "error", (record.tail, record.detail)
    assert record.detail == (
        "the sandbox could not start (bwrap: Can't mount tmpfs on /newroot/x: No such file): "
        "the check did not run"
    )
    gone_bwrap = await bench("true", support=lambda: JailSupport(True, str(tmp_path / "none")))
    record = await gone_bwrap.run()
    assert record.state == "error" and (record.detail or "").startswith("the check could not run")


@pytest.mark.parametrize(
    ("printed", "code", "badge"),
    [
        # issue 44: a cargo line and a pytest line were summed into "✅ 1 failed of 5,001"
        (
            "test result: ok. 5000 passed; 0 failed; 0 ignored; 0 measured\\n1 failed in 0.1s",
            0,
            "✅ exit code 0 (its output counted failures: see its last lines)",
        ),
        ("3 passed in 0.1s", 1, "❌ exit code 1"),  # was "❌ exit code 1, 3 passed"
        ("3 failed, 2 passed in 0.1s", 1, "❌ 3 failed of 5"),
        ("5 passed in 0.1s", 0, "✅ 5 passed"),
    ],
)
async def test_the_badge_never_has_a_count_that_contradicts_the_exit(
    bench: BenchFactory, printed: str, code: int, badge: str
) -> None:
    b = await bench(f"printf '{printed}\\n'; exit {code}")
    record = await b.run()
    assert check_badge(record).startswith(badge + " · "), check_badge(record)
