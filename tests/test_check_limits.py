"""Limits on a check (issue 44, item 5): its processes, its memory and its ``/tmp``, set
in ``[sandbox]`` (small here, so each bomb is cheap), by a cgroup where the machine offers
one and by rlimits otherwise. A fork bomb, a memory bomb or a ``/tmp`` bomb ends that
check, and nothing else: the next check runs, Legio's own processes are untouched. Each
bomb is bounded by itself too (a loop with an end, a fixed size), so a limit that fails
costs a few seconds, never the machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from legio.fence.checklimits import (
    LIMITS_FAILED,
    CheckLimits,
    Confinement,
    LimitSupport,
    limit_support,
    limits_said,
)
from tests.test_checks import PY, BenchFactory, bench  # noqa: F401 (the fixture)

SMALL = "check_processes = 24\ncheck_memory_mb = 64\ncheck_tmp_mb = 16\n"
# at most 200 processes that end by themselves within 3 s: bounded even without a limit
FORK_BOMB = 'i=0; while [ $i -lt 200 ]; do sleep 3 & i=$((i+1)); done; wait; echo "ALL FORKED"'
MEMORY_BOMB = f"{PY} -c \"b = b'x' * (300 * 1024 * 1024); print('ALLOCATED', len(b))\""
TMP_BOMB = "head -c 200000000 /dev/zero > /tmp/big && ls -l /tmp/big && echo WROTE"


def alive() -> bool:
    """Whether this machine still starts a process for Legio (nothing else was ended)."""
    return subprocess.run(["true"], check=False).returncode == 0


async def test_a_fork_bomb_ends_its_check_and_nothing_else(bench: BenchFactory) -> None:  # noqa: F811
    b = await bench(FORK_BOMB, sandbox=SMALL)
    run = await b.checks.start("vorenus", "app", b.copy, "aaaa", uncommitted=True)
    record = await run.wait()
    assert record.state == "failed", record.tail
    assert "ALL FORKED" not in record.tail
    assert alive()
    b2 = await bench("echo NEXT", sandbox=SMALL)
    after = await (
        await b2.checks.start("vorenus", "app", b2.copy, "bbbb", uncommitted=True)
    ).wait()
    assert after.state == "passed" and "NEXT" in after.tail
    for parent in limit_support().cgroups:  # the runs' cgroups are gone with them
        ours = f"legio-check-{os.getpid()}-"  # this process's (another may run checks)
        assert not [p for p in parent.iterdir() if p.name.startswith(ours)]


async def test_a_memory_bomb_ends_its_check(bench: BenchFactory) -> None:  # noqa: F811
    b = await bench(MEMORY_BOMB, sandbox=SMALL)
    run = await b.checks.start("vorenus", "app", b.copy, "aaaa", uncommitted=True)
    record = await run.wait()
    assert record.state == "failed", record.tail
    assert "ALLOCATED" not in record.tail
    assert alive() and os.getpid() > 0


async def test_memory_spread_over_processes_is_limited_in_total(bench: BenchFactory) -> None:  # noqa: F811
    """Five processes of 30 MB each: under the per-process bound, over the check's 64 MB.
    Where a cgroup holds memory in total the check is ended; where none can, ``legio
    check`` says memory is limited per process only."""
    hog = f"{PY} -c \"import time; b = b'x' * (30 * 1024 * 1024); time.sleep(2)\""
    spread = (
        f'pids=""; for i in 1 2 3 4 5; do {hog} & pids="$pids $!"; done; '
        "for p in $pids; do wait $p || exit 1; done; echo ALL-HELD"
    )
    b = await bench(spread, sandbox=SMALL)
    record = await (await b.checks.start("vorenus", "app", b.copy, "a", uncommitted=True)).wait()
    support = limit_support()
    if support.memory:
        assert record.state == "failed" and "ALL-HELD" not in record.tail, record.tail
    else:
        said = limits_said(CheckLimits(24, 64, 16), support)
        assert "memory not limited in total" in said and "64 MB per process" in said


@pytest.mark.parametrize(
    "bomb",
    [
        TMP_BOMB,
        TMP_BOMB.replace("/tmp/", "/var/tmp/"),
        TMP_BOMB.replace("/tmp/", "/dev/shm/"),  # bubblewrap's own /dev is half the memory
        TMP_BOMB.replace("/tmp/", "/dev/"),
        TMP_BOMB.replace("/tmp/", "$HOME/"),  # HOME, the cache and TMPDIR: sized too
        TMP_BOMB.replace("/tmp/", "$XDG_CACHE_HOME/"),
        TMP_BOMB.replace("/tmp/", "$TMPDIR/"),
    ],
    ids=["tmp", "var-tmp", "dev-shm", "dev", "home", "cache", "tmpdir"],
)
async def test_a_tmp_bomb_ends_its_check(bench: BenchFactory, bomb: str) -> None:  # noqa: F811
    b = await bench(bomb, sandbox=SMALL)
    run = await b.checks.start("vorenus", "app", b.copy, "aaaa", uncommitted=True)
    record = await run.wait()
    assert record.state == "failed", record.tail
    assert "WROTE" not in record.tail


def test_legio_check_says_how_each_limit_is_held() -> None:
    """``legio check`` names each limit and how it is held here, and says plainly which
    one cannot be set on this machine."""
    limits = CheckLimits(processes=24, memory_mb=64, tmp_mb=16)
    support = limit_support()
    said = limits_said(limits, support)
    assert "24 processes" in said and "64 MB" in said
    assert ("a /tmp of 16 MB" in said) == support.tmp_size
    for what, held in (
        ("processes", support.processes),
        ("memory", support.memory),
        ("/tmp", support.tmp),
    ):
        assert (f"{what} not limited" in said) == (not held), said


def test_each_way_wraps_the_check_so_its_children_are_born_inside(tmp_path: Path) -> None:
    """A systemd scope takes the limits as properties; a cgroup of Legio's is joined by the
    shell that then execs bubblewrap (a cgroup it cannot join: the check does not run, and
    says why); rlimits wrap nothing and go in the jail's ``ulimit`` line."""
    limits = CheckLimits(processes=24, memory_mb=64, tmp_mb=16)
    argv = ["bwrap", "--args", "5", "--", "/bin/sh", "-c", "true"]
    scope = LimitSupport("a systemd scope", True, True, True, True, False, ("systemd-run",))
    wrapped = Confinement(limits, scope, "x").wrap(argv)
    assert wrapped[-len(argv) :] == argv and "TasksMax=24" in wrapped
    assert "MemoryMax=64M" in wrapped and "MemorySwapMax=0" in wrapped

    plain = LimitSupport("rlimits", True, False, True, True, True)
    confined = Confinement(limits, plain, "x")
    assert confined.wrap(argv) == argv
    assert "ulimit -d 65536" in confined.shell() and "ulimit -p 24" in confined.shell()
    assert confined.tmp_args(tmp_path)[:4] == ["--size", str(16 * 1024 * 1024), "--tmpfs", "/tmp"]

    nowhere = tmp_path / "not-a-cgroup"
    nowhere.mkdir()
    group = LimitSupport("a cgroup", True, True, True, True, False, cgroups=(nowhere,))
    confined = Confinement(limits, group, "run")
    confined.setup()  # a plain folder: no limit files, nothing written
    (nowhere / "run" / "cgroup.procs").mkdir()  # cannot be written: the join fails
    done = subprocess.run(
        confined.wrap(["echo", "RAN"]), capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and done.stdout.strip() == LIMITS_FAILED
    assert "RAN" not in done.stdout


FAKE_SYSTEMD_RUN = """#!/bin/sh
# systemd-run as far as a scope goes: its properties noted, the command exec'd in place;
# like systemd >= 254 it expands ${...} in the command unless told not to
if [ "$1" = "--help" ]; then echo "  --expand-environment=BOOL"; exit 0; fi
expand=yes
while [ "$1" != "--" ]; do
  case "$1" in
    --expand-environment=no) expand=no ;;
    -p) shift; echo "$1" >> "$SCOPE_LOG" ;;
  esac
  shift
done
shift
if [ $expand = yes ]; then
  for a; do shift; case "$a" in *'${'*) set -- "$@" "" ;; *) set -- "$@" "$a" ;; esac; done
fi
exec "$@"
"""


async def test_a_systemd_scope_runs_the_check_with_its_limits_and_its_words_untouched(
    bench: BenchFactory,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where systemd makes scopes (none here: a stand-in that execs in place, as
    ``systemd-run --scope`` does), the check runs inside one with its limits as
    properties, its descriptors and words passed as they are (``$1`` of the jail's line
    not expanded by systemd-run)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "systemd-run"
    fake.write_text(FAKE_SYSTEMD_RUN)
    fake.chmod(0o755)
    log = tmp_path / "scope.log"
    monkeypatch.setenv("SCOPE_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    limit_support.cache_clear()
    try:
        b = await bench('echo "IN SCOPE $HOME"', sandbox=SMALL)
        record = await (
            await b.checks.start("vorenus", "app", b.copy, "a", uncommitted=True)
        ).wait()
        support = limit_support(*_jail())
    finally:
        limit_support.cache_clear()
    assert support.how == "a systemd scope" and "--expand-environment=no" in support.systemd
    assert record.state == "passed" and "IN SCOPE /" in record.tail, record.tail
    # the probe's scope first, then the check's
    assert log.read_text().split()[-3:] == ["TasksMax=24", "MemoryMax=64M", "MemorySwapMax=0"]


def _jail() -> tuple[str, bool]:
    from legio.fence.jail import jail_support

    support = jail_support()
    return support.detail, support.userns
