"""Backups another local user cannot steer (issue #44, items 7 and 8): the archive is never
written through a link planted at its temporary name, it is 0600 whatever the umask, a
folder other users can write is refused (or warned about, when ``legio.toml`` allows it),
and pruning removes only archives Legio wrote, never the one just written.

``nobody`` is simulated by files ``chown``-ed to it (the tests run as root, here and in CI);
"nobody cannot read the archive" is tried for real, by a process running as ``nobody``."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from legio.cli import check_config
from legio.config import load_config
from legio.frontends.digestview import digest_lines
from legio.operations import backup
from legio.operations.backup import archive_name, archives, make_backup, prune
from legio.operations.digest import Digest
from legio.operations.routine import Routine, read_json
from legio.store.praetorium import Praetorium
from tests.test_cli import legio

NOBODY = pwd.getpwnam("nobody")
MOMENT = datetime(2026, 11, 27, 9, 30, tzinfo=UTC)


@pytest.fixture
def umask_zero() -> Iterator[None]:
    """The most permissive umask: the archive must still be 0600."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
async def praetorium(castra_dir: Path) -> None:
    async with await Praetorium.open(castra_dir / "praetorium.db") as p:
        await p.post("caesar", "the whole conversation", ["legatus"])


def as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command), user=NOBODY.pw_uid, group=NOBODY.pw_gid, capture_output=True, text=True
    )


def private_folder(path: Path) -> Path:
    path.mkdir(mode=0o700)
    os.chmod(path, 0o700)
    return path


@pytest.mark.parametrize("whose", ["nobody", "legio"])
async def test_a_link_planted_as_the_part_file_is_never_written_through(
    tmp_path: Path,
    castra_dir: Path,
    write_config: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    umask_zero: None,
    praetorium: None,
    whose: str,
) -> None:
    config = load_config(write_config(""))
    folder = private_folder(tmp_path / "backups")
    # the link aims at a file nobody reads (their own, in their folder), or at one of
    # Legio's user's files (which the old code truncated)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chmod(theirs, 0o755)
    target = theirs / "loot" if whose == "nobody" else tmp_path / "precious.txt"
    target.write_text("before")
    if whose == "nobody":
        os.chown(theirs, NOBODY.pw_uid, NOBODY.pw_gid)
        os.chown(target, NOBODY.pw_uid, NOBODY.pw_gid)
        os.chmod(target, 0o644)
    final = folder / archive_name(MOMENT)
    tokens = iter(["guessed"])  # the first name drawn was guessed; the next ones are not
    monkeypatch.setattr(
        backup, "part_token", lambda: next(tokens, secrets.token_hex(8)), raising=False
    )
    planted = [folder / f"{final.name}.part", folder / f".{final.name}.guessed.part"]
    copy = backup.copy_praetorium

    def copy_then_plant(*args: Any, **kwargs: Any) -> int:
        version = copy(*args, **kwargs)  # the backup is under way: the links appear now
        for link in planted:
            link.symlink_to(target)
            os.lchown(link, NOBODY.pw_uid, NOBODY.pw_gid)
        return version

    monkeypatch.setattr(backup, "copy_praetorium", copy_then_plant)
    result = make_backup(config, folder, moment=MOMENT)

    assert target.read_bytes() == b"before"  # nothing was written through the link
    st = os.lstat(result.archive)
    assert not result.archive.is_symlink()
    assert (st.st_mode & 0o777, st.st_uid) == (0o600, os.geteuid())
    with tarfile.open(result.archive) as tar:
        assert "castra/praetorium.db" in tar.getnames()
    seen = as_nobody("cat", str(result.archive))
    assert seen.returncode != 0 and "Permission denied" in seen.stderr
    assert not as_nobody("cat", str(target)).stdout.startswith("\x1f\x8b")  # no gzip there


async def test_planted_archive_names_never_prune_real_backups(
    tmp_path: Path, castra_dir: Path, write_config: Callable[[str], Path], praetorium: None
) -> None:
    config_path = write_config("")
    config = load_config(config_path)
    folder = private_folder(tmp_path / "backups")
    real = [make_backup(config, folder, moment=MOMENT - timedelta(days=d)).archive for d in (2, 1)]
    planted = [folder / f"legio-backup-2099-01-0{d}T000000Z.tar.gz" for d in (1, 2, 3)]
    for path in planted:
        path.touch()
        os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
    ours_but_empty = folder / "legio-backup-2098-01-01T000000Z.tar.gz"
    ours_but_empty.touch()  # a name alone (even one of Legio's user's files) is not an archive
    link = folder / "legio-backup-2097-01-01T000000Z.tar.gz"
    link.symlink_to(real[0])

    made = legio("backup", str(folder), "--keep", "3", "-c", str(config_path), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    newest = Path(made.stdout.split("backup written: ")[1].split(" (")[0])
    for path in [*real, newest, *planted, ours_but_empty, link]:
        assert os.path.lexists(path), path  # every real backup kept, the planted left alone
    assert "removed" not in made.stdout
    assert "not Legio's" in made.stdout and planted[0].name in made.stdout
    assert archives(folder) == [*real, newest]
    last = json.loads((castra_dir / "state" / "backups" / "last.json").read_text())
    assert last["ok"] is True and last["archive"] == str(newest)

    again = legio("backup", str(folder), "--keep", "2", "-c", str(config_path), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"removed  {real[0]}" in again.stdout and f"removed  {real[1]}" in again.stdout
    kept = archives(folder)
    assert len(kept) == 2 and kept[0] == newest
    assert all(p.exists() for p in planted)


async def test_a_failed_prune_says_so_in_last_json(
    tmp_path: Path,
    castra_dir: Path,
    write_config: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = private_folder(tmp_path / "auto")
    config = load_config(write_config(f'[backup]\nevery = "daily"\nkeep = 1\ndir = "{folder}"\n'))
    async with await Praetorium.open(castra_dir / "praetorium.db") as p:
        await p.post("caesar", "kept", ["legatus"])
        old = make_backup(config, folder, moment=MOMENT).archive
        real_unlink = os.unlink

        def refused(path: Any, *args: Any, **kwargs: Any) -> None:
            if Path(path).name == old.name:  # removed by name, relative to the folder
                raise PermissionError(1, "Operation not permitted", str(path))
            real_unlink(path, *args, **kwargs)

        monkeypatch.setattr(os, "unlink", refused)
        result = await Routine(config, p, UTC).backup_now()
    assert result is not None and old.exists() and result.archive.exists()
    last = read_json(castra_dir / "state" / "backups" / "last.json")
    assert last is not None and last["ok"] is True and last["archive"] == str(result.archive)
    assert "Operation not permitted" in last["prune_error"] and old.name in last["prune_error"]
    digest = Digest(MOMENT, MOMENT, 0, (), (), (), (), last_backup=last)
    assert any("older ones stay" in line and old.name in line for line in digest_lines(digest))


def test_prune_never_removes_the_archive_just_written(
    tmp_path: Path, castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    config = load_config(write_config(""))
    (castra_dir / "praetorium.db").touch()
    folder = private_folder(tmp_path / "b")
    older = make_backup(config, folder, moment=MOMENT + timedelta(days=1)).archive
    written = make_backup(config, folder, moment=MOMENT).archive  # a clock set back
    pruned = prune(folder, 1, written=written)
    assert written.exists() and pruned.removed == [older]


def shared(tmp_path: Path, how: str) -> Path:
    """A backup folder another user can write into (or steer), made as ``how`` says."""
    if how == "parent":  # ours and private, in a folder anyone may rename it out of
        parent = tmp_path / "open"
        parent.mkdir()
        os.chmod(parent, 0o777)
        return private_folder(parent / "backups")
    folder = tmp_path / "backups"
    folder.mkdir()
    mode = {"world": 0o777, "sticky": 0o1777, "group": 0o770, "theirs": 0o700}[how]
    os.chmod(folder, mode)
    if how == "theirs":
        os.chown(folder, NOBODY.pw_uid, NOBODY.pw_gid)
    return folder


@pytest.mark.parametrize("how", ["world", "sticky", "group", "theirs", "parent"])
async def test_a_folder_other_users_can_write_is_refused_unless_allowed(
    tmp_path: Path,
    castra_dir: Path,
    write_config: Callable[[str], Path],
    praetorium: None,
    how: str,
) -> None:
    folder = shared(tmp_path, how)
    config_path = write_config(f'[backup]\ndir = "{folder}"\n')
    refused = legio("backup", "-c", str(config_path), cwd=tmp_path)
    assert refused.returncode == 1
    assert str(folder) in refused.stderr and "other users" in refused.stderr
    assert "allow_shared_folder" in refused.stderr and "Traceback" not in refused.stderr
    assert not [p for p in os.listdir(folder) if p.endswith(".tar.gz")]
    last = json.loads((castra_dir / "state" / "backups" / "last.json").read_text())
    assert last["ok"] is False and "other users" in last["error"]
    report = "\n".join(check_config(load_config(config_path), is_root=False).lines)
    assert f"✗ backups: {folder}" in report

    config_path.write_text(f'[backup]\ndir = "{folder}"\nallow_shared_folder = true\n')
    allowed = legio("backup", "-c", str(config_path), cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stderr.count("other users") == 1  # warned, once
    [archive] = archives(folder)
    assert os.stat(archive).st_mode & 0o777 == 0o600
    report = "\n".join(check_config(load_config(config_path), is_root=False).lines)
    assert f"! backups: {folder}" in report


def test_the_default_folder_is_private_and_accepted(
    castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    config = load_config(write_config(""))
    (castra_dir / "praetorium.db").touch()
    result = make_backup(config)  # castra/state/backups/, made 0700
    assert os.stat(result.archive.parent).st_mode & 0o777 == 0o700
    report = "\n".join(check_config(config, is_root=False).lines)
    assert f"✓ backups: {result.archive.parent}" in report


@pytest.mark.parametrize("owner", ["nobody", "root"])
async def test_a_backup_folder_reached_through_a_planted_link_is_refused(
    tmp_path: Path,
    castra_dir: Path,
    write_config: Callable[[str], Path],
    praetorium: None,
    owner: str,
) -> None:
    """A link planted under a shared sticky folder (``/tmp/x/legio-backups -> /victim``)
    is never followed: another instance's archives there are neither written beside nor
    pruned; ``legio check`` says ✗, even with ``allow_shared_folder``."""
    victim = private_folder(tmp_path / "victim")
    for day in (1, 2):
        make_backup(
            load_config(write_config("")), victim, moment=datetime(2026, 1, day, tzinfo=UTC)
        )
    before = sorted(os.listdir(victim))
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    link = sticky / "legio-backups"
    link.symlink_to(victim)
    if owner == "nobody":
        os.lchown(link, NOBODY.pw_uid, NOBODY.pw_gid)
    for allow in ("false", "true"):
        config = load_config(
            write_config(f'[backup]\ndir = "{link}"\nkeep = 1\nallow_shared_folder = {allow}\n')
        )
        with pytest.raises(backup.BackupError, match="link"):
            make_backup(config)
        assert "link" in (prune(config.backup.dir, 1).error or "")
        report = "\n".join(check_config(config, is_root=False).lines)
        assert f"✗ backups: {link}" in report
    assert sorted(os.listdir(victim)) == before
