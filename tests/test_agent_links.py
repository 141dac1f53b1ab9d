"""Legio never reads or writes through an agent's links: ``send_file`` sends the file it
checked (a swap later in the turn sends nothing else), and Caesar's files reach an
agent's ``inbox/`` even when the agent made ``inbox`` a link to the castra. The real PTB
on the fake Bot API, agents on the fake CLI (whose Bash runs for real)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.fence import safefs
from tests.botbench import Running, running_bot
from tests.conftest import FakeCli
from tests.legion import processes_of

PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


@pytest.fixture
async def bot(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Running]:
    async with running_bot(castra_dir, fake_cli) as running:
        yield running


def workspace(castra_dir: Path, name: str = "vorenus") -> Path:
    folder = castra_dir / "centuriones" / name / "workspace"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def send(path: str) -> str:
    return f"CALL_TOOL memoria_vorenus send_file {json.dumps({'path': path})}"


def bash(command: str) -> str:
    return f"TOOL Bash {json.dumps({'command': command})}"


async def test_a_swap_after_send_file_uploads_the_decoy_never_the_praetorium(
    bot: Running, castra_dir: Path
) -> None:
    """The attack: queue a decoy ``d/praetorium.db``, then in the same turn make ``d`` a
    link to the castra; the copy at the turn's end used to upload the real praetorium."""
    folder = workspace(castra_dir)
    (folder / "d").mkdir()
    (folder / "d" / "praetorium.db").write_bytes(b"decoy")
    castra = castra_dir.resolve()
    start = await bot.ask(
        "@vorenus "
        + "\n".join([send("d/praetorium.db"), bash(f"rm -rf d && ln -s {castra} d"), "REPLY ok"])
    )
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    await bot.api.wait_for_call("sendDocument", start=start)
    assert (folder / "d").is_symlink()  # the swap did happen
    assert [(u.filename, u.content) for u in bot.api.uploads] == [("praetorium.db", b"decoy")]


async def test_a_hard_link_to_a_protected_file_is_not_sent(bot: Running, castra_dir: Path) -> None:
    folder = workspace(castra_dir)
    os.link(castra_dir / "praetorium.db", folder / "notes.db")
    start = await bot.ask("@vorenus " + send("notes.db"))
    answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    assert "TOOL_RESULT: Error: notes.db cannot be sent" in answer.params["text"]
    assert bot.api.uploads == []


@pytest.mark.parametrize("target", ["edicta", "outside"])
async def test_an_inbox_made_a_link_is_replaced_and_nothing_is_written_through_it(
    bot: Running, castra_dir: Path, tmp_path: Path, target: str
) -> None:
    """The attack: ``inbox`` a link to ``castra/edicta`` (or anywhere), then Caesar's next
    file used to land there: a forged edict by "caesar"."""
    aim = castra_dir / "edicta" if target == "edicta" else tmp_path / "elsewhere"
    aim.mkdir(exist_ok=True)
    before = sorted(p.name for p in aim.iterdir())
    inbox = workspace(castra_dir) / "inbox"
    inbox.symlink_to(aim.resolve(), target_is_directory=True)

    start = len(bot.api.calls)
    bot.api.add_document(PDF, "orders.xml", "application/xml", caption="@vorenus read this")
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    assert sorted(p.name for p in aim.iterdir()) == before  # nothing written through it
    assert inbox.is_dir() and not inbox.is_symlink()
    assert (inbox / "1-orders.xml").read_bytes() == PDF
    [process] = processes_of(bot.fake_cli, "vorenus")
    assert f'path="{inbox.resolve() / "1-orders.xml"}"' in process.prompts[0]


async def test_a_link_in_place_of_the_copy_is_replaced_not_written_through(
    bot: Running, castra_dir: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    inbox = workspace(castra_dir) / "inbox"
    inbox.mkdir()
    (inbox / "1-orders.txt").symlink_to(victim)
    start = len(bot.api.calls)
    bot.api.add_document(b"new words", "orders.txt", "text/plain", caption="@vorenus read")
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    assert victim.read_text() == "keep me"
    assert not (inbox / "1-orders.txt").is_symlink()
    assert (inbox / "1-orders.txt").read_bytes() == b"new words"


def test_safefs_refuses_a_link_at_any_component(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_text("mine")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "f.txt").write_text("secret")
    (root / "b").symlink_to(secret, target_is_directory=True)
    (root / "a" / "l.txt").symlink_to(secret / "f.txt")
    (root / "fifo").parent.mkdir(exist_ok=True)
    os.mkfifo(root / "fifo")

    fd = safefs.open_file(root, Path("a/f.txt"))
    try:
        assert os.read(fd, 10) == b"mine"
    finally:
        os.close(fd)
    for relative in ("b/f.txt", "a/l.txt", "fifo"):
        with pytest.raises(safefs.UnsafePath):
            safefs.open_file(root, Path(relative))
    with pytest.raises(safefs.UnsafePath):
        safefs.open_dir(root, ["b"])
    with pytest.raises(safefs.UnsafePath):
        safefs.open_dir(root, [".."])
    fd = safefs.open_dir(root, ["b"], create=True)  # the link replaced by a folder
    os.close(fd)
    assert (root / "b").is_dir() and not (root / "b").is_symlink()
    assert (secret / "f.txt").read_text() == "secret"


async def test_a_hard_link_to_another_agents_notes_is_not_sent(
    bot: Running, castra_dir: Path
) -> None:
    """pullo's notes are a folder the guard protects, not a file it knows by inode: a
    hard link to one in vorenus's workspace is refused for having other links."""
    notes = castra_dir / "centuriones" / "pullo" / "commentarii"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "secret.xml").write_text("<note>pullo's secret</note>")
    os.link(notes / "secret.xml", workspace(castra_dir) / "borrowed.xml")
    start = await bot.ask("@vorenus " + send("borrowed.xml"))
    answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    assert "has other hard links" in answer.params["text"]
    assert bot.api.uploads == []
