"""Backups that restore: taken while messages flow, restored, compared row by row; a
``kill -9`` mid-backup leaves the earlier archives whole; a restore refuses archives that
would write outside its folder, and folders that are not empty."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tarfile
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from legio.app import LegioApp
from legio.config import load_config
from legio.operations.backup import (
    BackupError,
    archives,
    make_backup,
    prune,
    without_secrets,
)
from legio.operations.restore import restore
from legio.store.grants import ApprovalStore
from legio.store.praetorium import Praetorium
from tests.test_cli import legio

TABLES = ["nuntii", "participants", "approval_grants", "turns", "jobs"]


def rows(db_path: Path, table: str, upto: int | None = None) -> list[tuple[object, ...]]:
    db = sqlite3.connect(db_path)
    try:
        order = "seq" if table in ("nuntii", "participants") else "rowid"
        where = f" WHERE seq <= {upto}" if upto is not None and order == "seq" else ""
        return list(db.execute(f"SELECT * FROM {table}{where} ORDER BY {order}, 1"))
    finally:
        db.close()


def seed_memoria(castra: Path) -> None:
    (castra / "acta").mkdir(exist_ok=True)
    (castra / "acta" / "bridge.xml").write_text("<actum>the bridge is 40 m</actum>")
    (castra / "edicta").mkdir(exist_ok=True)
    (castra / "edicta" / "rule.xml").write_text("<edictum>be brief</edictum>")
    notes = castra / "centuriones" / "vorenus" / "commentarii"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "n1.xml").write_text("<note>checked the gate</note>")
    secret = castra / "state" / "claude" / "vorenus"
    secret.mkdir(parents=True)
    (secret / ".credentials.json").write_text('{"token": "never in a backup"}')
    (castra / "centuriones" / "vorenus" / "workspace").mkdir()
    (castra / "centuriones" / "vorenus" / "workspace" / "big.bin").write_bytes(b"x" * 1000)
    (castra / "acta" / "link.xml").symlink_to(secret / ".credentials.json")


async def test_backup_while_messages_flow_restores_row_by_row(
    tmp_path: Path, castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    config = load_config(write_config('timezone = "Europe/Rome"\n[backup]\nkeep = 3\n'))
    seed_memoria(castra_dir)
    praetorium = await Praetorium.open(castra_dir / "praetorium.db")
    first = await praetorium.post("caesar", "hello legion", ["legatus"], project=None)
    for i in range(300):
        await praetorium.post("legatus", f"answer {i}", ["caesar"], reply_to=first.id)
    await ApprovalStore(praetorium).add_grant("vorenus", "Bash(git push:*)")
    flowing = asyncio.Event()
    done = asyncio.Event()
    posted: list[int] = []

    async def writer() -> None:
        while not done.is_set():
            posted.append(
                (await praetorium.post("caesar", f"@vorenus more {len(posted)}", ["vorenus"])).seq
            )
            flowing.set()
            await asyncio.sleep(0)

    task = asyncio.create_task(writer())
    await flowing.wait()
    committed_before = posted[-1]  # committed before the backup began
    result = await asyncio.to_thread(make_backup, config)
    done.set()
    await task
    await praetorium.close()
    assert len(posted) > 1

    target = tmp_path / "restored"
    report = restore(result.archive, target, config)
    restored_db = target / "castra" / "praetorium.db"
    for table in TABLES:
        original = rows(castra_dir / "praetorium.db", table, upto=None)
        copied = rows(restored_db, table)
        if table == "approval_grants":  # the same grants, each revoked by the restore
            assert all(row[-1] is not None for row in copied)
            original, copied = [r[:-1] for r in original], [r[:-1] for r in copied]
        assert copied == original[: len(copied)], table  # the same rows, none changed
    copied_seqs = [r[0] for r in rows(restored_db, "nuntii")]
    assert copied_seqs[-1] >= committed_before  # nothing committed before it began is lost
    assert report.nuntii == len(copied_seqs)
    # memoria and prompts came back; state/ (logins), workspaces and links did not
    restored = target / "castra"
    assert (restored / "acta" / "bridge.xml").read_text() == "<actum>the bridge is 40 m</actum>"
    assert (restored / "centuriones" / "vorenus" / "commentarii" / "n1.xml").is_file()
    assert (restored / "legatus" / "prompt.md").read_bytes() == (
        castra_dir / "legatus" / "prompt.md"
    ).read_bytes()
    assert not (restored / "state").exists()
    assert not (restored / "acta" / "link.xml").exists()
    assert not (restored / "centuriones" / "vorenus" / "workspace").exists()
    # the restored castra starts: its config loads, its praetorium opens and reads
    again = load_config(target / "legio.toml")
    assert again.castra == restored.resolve() and again.timezone == "Europe/Rome"
    app = await LegioApp.open(again)  # what `legio run -c restored/legio.toml` opens
    try:
        assert (await app.history(1))[0].seq == copied_seqs[-1]
        assert [h.nuntius.text for h in await app.search("legion", 5)] == ["hello legion"]
        assert await app.approval_grants() == []  # Always grants come back revoked
    finally:
        await app.close()


def test_the_commands_back_up_restore_and_export(
    tmp_path: Path, castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    config = write_config()
    db = sqlite3.connect(castra_dir / "praetorium.db")
    db.close()
    asyncio.run(_post_one(castra_dir))
    made = legio("backup", str(tmp_path / "b"), "-c", str(config), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("backup written: ")
    [archive] = archives(tmp_path / "b")
    last = json.loads((castra_dir / "state" / "backups" / "last.json").read_text())
    assert last["ok"] is True and last["archive"] == str(archive)
    back = legio("restore", str(archive), str(tmp_path / "r"), cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    assert "(1 messages, schema" in back.stdout and "legio run -c" in back.stdout
    again = legio("restore", str(archive), str(tmp_path / "r"), cwd=tmp_path)
    assert again.returncode == 1 and "is not empty" in again.stderr
    out = tmp_path / "x.jsonl"
    exported = legio(
        "export",
        "-c",
        str(tmp_path / "r" / "legio.toml"),
        "--format",
        "json",
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert exported.returncode == 0, exported.stderr
    assert json.loads(out.read_text())["text"] == "from the command line"
    bad = legio("export", "-c", str(config), "--since", "last week", cwd=tmp_path)
    assert bad.returncode == 1 and "is not a date" in bad.stderr


async def _post_one(castra: Path) -> None:
    async with await Praetorium.open(castra / "praetorium.db") as p:
        await p.post("caesar", "from the command line", ["legatus"])


async def test_keep_prunes_oldest_and_nonempty_target_is_refused(
    tmp_path: Path, castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    config = load_config(write_config())
    async with await Praetorium.open(castra_dir / "praetorium.db") as p:
        await p.post("caesar", "one", ["legatus"])
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 11, 25, 8, tzinfo=UTC)
    folder = tmp_path / "backups"
    made = [make_backup(config, folder, moment=start + timedelta(days=d)).archive for d in range(4)]
    assert archives(folder) == made
    assert {p.stat().st_mode & 0o777 for p in made} == {0o600}  # the whole conversation
    stop = threading.Event()
    stop.set()  # Legio is stopping: the backup under way ends, leaving nothing behind
    with pytest.raises(BackupError, match="cancelled"):
        make_backup(config, folder, cancel=stop)
    assert sorted(folder.iterdir()) == sorted([*made, folder / ".backup.lock"])
    assert prune(folder, 2).removed == made[:2]
    assert archives(folder) == made[2:]
    full = tmp_path / "full"
    full.mkdir()
    (full / "something").write_text("mine")
    with pytest.raises(BackupError, match="not empty"):
        restore(made[-1], full)
    assert os.listdir(full) == ["something"]


def evil_archive(path: Path, name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for good, data in (("legio.toml", b'castra = "castra"\n'), ("castra/praetorium.db", b"")):
            info = tarfile.TarInfo(good)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, link
        data = b"owned" if kind == tarfile.REGTYPE else b""
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    ("name", "kind", "link"),
    [
        ("../escape.txt", tarfile.REGTYPE, ""),
        ("castra/../../escape.txt", tarfile.REGTYPE, ""),
        ("/tmp/escape.txt", tarfile.REGTYPE, ""),
        ("castra/acta/link", tarfile.SYMTYPE, "/etc/passwd"),
        ("castra/acta/hard", tarfile.LNKTYPE, "legio.toml"),
        ("castra/dev", tarfile.CHRTYPE, ""),
        ("elsewhere.txt", tarfile.REGTYPE, ""),
    ],
)
def test_restore_refuses_members_that_leave_the_castra(
    tmp_path: Path, name: str, kind: bytes, link: str
) -> None:
    archive = evil_archive(tmp_path / "evil.tar.gz", name, kind, link)
    target = tmp_path / "out" / "restored"
    with pytest.raises(BackupError, match="refused"):
        restore(archive, target)
    assert not target.exists()
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "out").exists()


def test_a_damaged_praetorium_is_not_restored(tmp_path: Path) -> None:
    archive = tmp_path / "bad.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("legio.toml", b""), ("castra/praetorium.db", b"not sqlite" * 500)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BackupError, match="praetorium"):
        restore(archive, tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_secrets_never_reach_the_archive_config() -> None:
    raw = {
        "castra": "/srv/castra",
        "telegram": {"token_env": "TELEGRAM_BOT_TOKEN", "token": "123456789:" + "A" * 35},
        "claude": {"env_deny": ["TELEGRAM_*"], "api_key": "sk-ant-xyz"},
        "projects": {"app": {"path": "/src/app", "base": "ghp_" + "a" * 30}},
        "list": ["fine", "xoxb-secret"],
    }
    clean, removed = without_secrets(raw)
    assert clean == {
        "castra": "/srv/castra",
        "telegram": {"token_env": "TELEGRAM_BOT_TOKEN"},
        "claude": {"env_deny": ["TELEGRAM_*"]},
        "projects": {"app": {"path": "/src/app"}},
        "list": ["fine"],
    }
    assert sorted(removed) == ["claude.api_key", "list[1]", "projects.app.base", "telegram.token"]


KILLED_BACKUP = textwrap.dedent(
    """
    import sys, tarfile, time
    from pathlib import Path
    from legio.config import load_config
    from legio.operations.backup import make_backup
    real = tarfile.TarFile.addfile
    def slow(self, info, fileobj=None):
        real(self, info, fileobj)
        if info.name == "castra/praetorium.db":
            self.fileobj.flush()
            print("writing", flush=True)
            time.sleep(120)  # killed here, mid-archive
    tarfile.TarFile.addfile = slow
    make_backup(load_config(sys.argv[1]), Path(sys.argv[2]))
    """
)


async def test_kill_9_during_a_backup_leaves_the_earlier_archives_whole(
    tmp_path: Path, castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    config_path = write_config()
    async with await Praetorium.open(castra_dir / "praetorium.db") as p:
        for i in range(2000):
            await p.post("caesar", f"message {i} " + "words " * 20, ["legatus"])
    folder = tmp_path / "backups"
    earlier = make_backup(load_config(config_path), folder).archive
    whole = earlier.read_bytes()
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_BACKUP, str(config_path), str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = await asyncio.to_thread(child.stdout.readline)
    assert line.strip() == "writing", child.communicate()
    parts = [p.name for p in folder.iterdir() if p.name.endswith(".part")]
    assert parts  # the new archive was under way, as a .part file
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(30) == -signal.SIGKILL
    child.communicate()  # closes its pipes
    assert archives(folder) == [earlier] and earlier.read_bytes() == whole
    report = restore(earlier, tmp_path / "from-earlier")
    assert report.nuntii == 2000
    later = make_backup(load_config(config_path), folder).archive  # cleans the leftovers
    assert archives(folder) == [earlier, later]
    assert not [p for p in folder.iterdir() if p.name.endswith((".part", ".db"))]


async def test_the_daemon_backs_up_on_its_own_and_keeps_the_newest(
    tmp_path: Path, castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    from datetime import UTC, datetime

    from legio.operations.routine import Routine, read_json

    folder = tmp_path / "auto"
    config = load_config(write_config(f'[backup]\nevery = "daily"\nkeep = 2\ndir = "{folder}"\n'))
    async with await Praetorium.open(castra_dir / "praetorium.db") as p:
        await p.post("caesar", "kept", ["legatus"])
        for day in range(3):  # three older archives
            make_backup(config, folder, moment=datetime(2026, 1, 1 + day, tzinfo=UTC))
        routine = Routine(config, p, UTC, first_delay_s=0)
        routine.start()  # no last.json yet: due after first_delay_s
        try:
            for _ in range(600):
                if (last := read_json(routine.last_path)) is not None:
                    break
                await asyncio.sleep(0.1)
        finally:
            await routine.stop()
    assert last is not None and last["ok"] is True and last["error"] is None
    kept = archives(folder)
    assert len(kept) == 2 and str(kept[-1]) == last["archive"]
    assert datetime.fromisoformat(last["finished"]).tzinfo is not None
