"""The check's jail built by allow-list, for real (bubblewrap): no Unix socket of the host
(a tmux server in /tmp would run commands outside any sandbox), no secret that appears
while it runs, no capability even when Legio runs as root, none of the castra but its
own copy; and still what a build needs: git in the copy, python3, sh, make."""

from __future__ import annotations

import asyncio
import resource
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from legio.fence import jail
from legio.fence.jail import (
    MAX_FILE_BYTES,
    MAX_OPEN_FILES,
    blank_file,
    borrowed,
    checks_dir,
    jail_argv,
    jail_support,
    pinned,
)
from tests.gitrepo import git
from tests.test_checks import PY, BenchFactory, bench  # noqa: F401 (the fixture)

CONNECT = (
    "import socket, sys\n"
    "for path in sys.argv[1:]:\n"
    "    try:\n"
    "        s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(path)\n"
    "        s.sendall(b'from-check'); print('CONNECTED', path, s.recv(100))\n"
    "    except OSError as e:\n"
    "        print('NO', path, type(e).__name__)\n"
)


def listening(path: Path, got: list[bytes]) -> socket.socket:
    """A Unix socket of the host at ``path`` that answers whoever connects."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(5)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                got.append(conn.recv(100))
                conn.sendall(b"HOST-ANSWERED")

    threading.Thread(target=serve, daemon=True).start()
    return server


async def test_a_check_reaches_no_unix_socket_of_the_host(
    bench: BenchFactory,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    b = await bench(f"{PY} connect.py {tmp_path}/tmux.sock {home}/agent.sock status.sock")
    (b.copy / "connect.py").write_text(CONNECT)
    got: list[bytes] = []
    (b.root / "state").mkdir(exist_ok=True)
    servers = [
        listening(tmp_path / "tmux.sock", got),  # a server in the host's /tmp
        listening(home / "agent.sock", got),  # and in the user's home
    ]
    status = b.root / "state" / "status.sock"  # and in the castra
    servers.append(listening(status, got))
    (b.copy / "status.sock").symlink_to(status)  # reached through a link in the copy
    try:
        record = await b.run()
    finally:
        for server in servers:
            server.close()
    assert "CONNECTED" not in record.tail and got == [], record.tail
    assert record.tail.count("NO ") == 3, record.tail


async def test_a_secret_that_appears_while_a_check_runs_stays_out_of_it(
    bench: BenchFactory,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    late = [home / ".netrc", home / ".ssh" / "id_ed25519", home / ".claude.json.backup.1"]
    reads = " ".join(f"cat {p};" for p in late)
    b = await bench(
        f"touch started; while [ ! -f go ]; do sleep 0.05; done; {reads} ls -a {home}; exit 1"
    )
    run = await b.checks.start("vorenus", "app", b.copy, "c0ffee", uncommitted=True)
    while not (b.copy / "started").exists():
        assert run.running, run.record
        await asyncio.sleep(0.05)
    (home / ".ssh").mkdir()
    for path in late:
        path.write_text("LATE-SECRET-NEVER-FOR-CHECKS\n")
    (b.copy / "go").write_text("")
    record = await run.wait()
    log = b.checks.log_path(record.id)
    assert log is not None
    seen = log.read_text(errors="replace")
    assert record.state == "failed" and "No such file or directory" in seen
    assert "LATE-SECRET" not in seen and f"cannot access '{home}'" in seen, seen


async def test_a_check_has_no_capability_even_as_root(bench: BenchFactory) -> None:  # noqa: F811
    b = await bench("sh caps.sh")
    (b.copy / "caps.sh").write_text(
        "grep CapEff /proc/self/status\n"
        "mount -o remount,bind,rw / && echo REMOUNTED\n"
        "mount -o remount,bind,rw /usr && echo REMOUNTED\n"
        "mount -t tmpfs none /tmp && echo MOUNTED\n"
        "umount /etc && echo UNMOUNTED\n"
        "grep root: /etc/shadow && echo READ-SHADOW\n"
        "exit 1\n"
    )
    record = await b.run()
    assert "CapEff:\t0000000000000000" in record.tail, record.tail
    for done in ("REMOUNTED", "MOUNTED", "UNMOUNTED", "READ-SHADOW"):
        assert done not in record.tail, record.tail


async def test_a_check_sees_its_copy_and_the_system_and_nothing_of_the_castra(
    bench: BenchFactory,  # noqa: F811
) -> None:
    assert jail_support().available
    b = await bench("sh look.sh")
    await b.praetorium.post("caesar", "PRAETORIUM-TEXT-NEVER-FOR-CHECKS", ["vorenus"])
    (b.root / "centuriones" / "pullo").mkdir(parents=True, exist_ok=True)
    (b.copy / "look.sh").write_text(
        f"echo root:; ls -a {b.root}; echo state:; ls -a {b.root}/state; "
        f"echo centuriones:; ls {b.root}/centuriones; echo home:; ls -a $HOME; "
        "echo made > made.txt && git add made.txt && git commit -qm 'from the check' && "
        "git status --short && git log -2 --format=log:%s; "
        "python3 -c 'print(\"python3\", 6 * 7)'; make --version | head -1; sh -c 'echo sh ok'\n"
    )
    record = await b.run()
    log = b.checks.log_path(record.id)
    assert log is not None
    seen = log.read_text(errors="replace")
    assert record.state == "passed", seen
    listed = seen.split("root:")[1].split("home:")[0]
    assert "praetorium" not in listed and "legio.lock" not in listed, seen
    assert "state:\n.\n..\nchecks\n" in seen and "pullo" not in listed, seen
    assert "home:\n.\n..\n?? look.sh\nlog:" in seen  # an empty home
    assert "log:from the check\nlog:a test" in seen  # git works, the borrowed objects too
    assert "python3 42" in seen and "GNU Make" in seen and "sh ok" in seen
    assert git(b.copy, "log", "-1", "--format=%s").strip() == "from the check"


async def test_links_swapped_in_after_the_jail_is_planned_reach_nothing(
    bench: BenchFactory,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between Legio's look at the copy and bubblewrap's mounts, the agent (a background
    command) swaps its ``.git/hooks``, then the copy itself, for links to a home folder:
    the jail binds the folders Legio opened, never what the links point at."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("SWAPPED-IN-KEY-NEVER-FOR-CHECKS\n")
    monkeypatch.setenv("HOME", str(home))
    b = await bench("true")
    copy, projects = b.copy.resolve(), b.checks.projects
    base = checks_dir(b.root, "vorenus", "app")
    own = [base / "tmp", base / "cache", base / "home"]
    for folder in own:
        folder.mkdir(parents=True, exist_ok=True)
    support = jail_support()
    fence = b.place.fence()
    look = "cat .git/hooks/id_ed25519 .ssh/id_ed25519; ls; echo ran"

    def planned() -> list[str]:
        return jail_argv(
            *(support.detail, projects.castra, projects.config, "vorenus", copy, own, look),
            *(blank_file(base), fence, None, borrowed(copy, b.project), support.userns, pins),
        )

    def run(argv: list[str]) -> str:
        done = subprocess.run(
            argv, pass_fds=tuple(pins.values()), capture_output=True, text=True, timeout=60
        )
        return done.stdout + done.stderr

    with pinned(projects.castra.root, copy, fence) as pins:
        argv = planned()
        copy.rename(copy.with_name("app.real"))
        copy.symlink_to(home)  # the copy itself
        seen = run(argv)
        assert "NEVER-FOR-CHECKS" not in seen, seen
        assert "app.py" in seen and "ran" in seen, seen  # the copy Legio opened, bound
        copy.unlink()
        copy.with_name("app.real").rename(copy)
    with pinned(projects.castra.root, copy, fence) as pins:
        argv = planned()
        (copy / ".git" / "hooks").rename(copy / ".git" / "hooks.real")
        (copy / ".git" / "hooks").symlink_to(home / ".ssh")  # its git hooks
        seen = run(argv)  # bubblewrap refuses to mount there: nothing runs
    assert "NEVER-FOR-CHECKS" not in seen, seen


async def test_a_check_runs_under_file_limits_it_cannot_raise(bench: BenchFactory) -> None:  # noqa: F811
    b = await bench("sh limits.sh")
    (b.copy / "limits.sh").write_text(
        "grep -E 'Max (file size|open files|core)' /proc/self/limits\n"
        "ulimit -n 1000000 && echo RAISED\n"
        "ulimit -f unlimited && echo RAISED\n"
        "dd if=/dev/zero of=$TMPDIR/big bs=1M seek=4095 count=2 2>&1 | tail -1\n"
        "ls -l $TMPDIR/big\n"
    )
    record = await b.run()
    seen = record.tail
    assert f"Max file size             {MAX_FILE_BYTES}" in seen, seen
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # never above the daemon's own
    files = MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, MAX_OPEN_FILES)
    assert f"Max open files            {files} " in seen, seen
    assert "Max core file size        0" in seen, seen
    assert "RAISED" not in seen
    assert f" {MAX_FILE_BYTES} " in seen  # the file stopped at the limit (sparse: no disk)


async def test_the_jails_first_process_shows_no_castra_path(bench: BenchFactory) -> None:  # noqa: F811
    b = await bench("sh ps.sh")
    (b.copy / "ps.sh").write_text(
        "for p in /proc/[0-9]*; do echo $p: $(tr '\\0' ' ' < $p/cmdline); done 2>/dev/null\n"
    )
    record = await b.run()
    assert record.state == "passed", record.tail
    first = next(line for line in record.tail.splitlines() if line.startswith("/proc/1:"))
    assert "--args" in first and "castra" not in first, first
    assert str(b.root) not in record.tail.replace(str(b.copy), ""), record.tail


async def test_a_castra_inside_a_system_folder_is_hidden_whole(
    bench: BenchFactory,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Legio installed under ``/opt`` (a system folder the jail shows): the castra is an
    empty folder there but for the copy and the check's own folders, even what appears
    in it while the check runs."""
    b = await bench("true")
    monkeypatch.setattr(jail, "SYSTEM", (*jail.SYSTEM, str(tmp_path)))
    copy, projects = b.copy.resolve(), b.checks.projects
    base = checks_dir(b.root, "vorenus", "app")
    own = [base / "tmp", base / "cache", base / "home"]
    for folder in own:
        folder.mkdir(parents=True, exist_ok=True)
    late = b.root / "centuriones" / "brutus"  # an agent enrolled while the check runs
    look = f"ls -a {b.root}; cat {late}/notes.txt; echo ran"
    support = jail_support()
    fence = b.place.fence()
    with pinned(projects.castra.root, copy, fence) as pins:
        argv = jail_argv(
            *(support.detail, projects.castra, projects.config, "vorenus", copy, own, look),
            *(blank_file(base), fence, None, borrowed(copy, b.project), support.userns, pins),
        )
        late.mkdir(parents=True)
        (late / "notes.txt").write_text("LATE-NEVER-FOR-CHECKS\n")
        done = await asyncio.to_thread(
            subprocess.run,
            argv,
            pass_fds=tuple(pins.values()),
            capture_output=True,
            text=True,
            timeout=60,
        )
    seen = done.stdout + done.stderr
    assert f"{tmp_path}" in " ".join(argv)  # the fake system folder is bound
    assert "ran" in seen and "NEVER-FOR-CHECKS" not in seen, seen
    assert ".\n..\ncenturiones\nstate\n" in seen and "praetorium" not in seen, seen
