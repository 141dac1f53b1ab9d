"""The attachment tables and the castra file store, without Telegram."""

from __future__ import annotations

import base64
import io
import sqlite3
from pathlib import Path

import pytest
from PIL import Image

from legio.errors import AttachmentError, DuplicateOrigin
from legio.media.images import MAX_IMAGE_BASE64, check_image, image_source
from legio.request import PendingFile
from legio.store.attachments import AttachmentStore
from legio.store.files import FileStore
from legio.store.praetorium import Praetorium


def pending(origin: str = "telegram:1:2", sha256: str | None = None, part: int = 0) -> PendingFile:
    return PendingFile(
        origin=origin,
        text="@vorenus look",
        kind="document",
        mime_type="application/pdf",
        name="Report_2026.pdf" if part == 0 else f"Annex_{part}.pdf",
        size=10,
        sha256=sha256,
        file_id=f"file-{part + 1}",
        file_unique_id=f"uniq{part + 1}",
        part=part,
    )


async def test_the_columns_of_the_attachment_tables(tmp_path: Path) -> None:
    await (await Praetorium.open(tmp_path / "p.db")).close()
    with sqlite3.connect(tmp_path / "p.db") as db:
        columns = [r[1] for r in db.execute("PRAGMA table_info(attachments)")]
        assert columns == [
            "id",
            "nuntius_seq",
            "direction",
            "kind",
            "mime_type",
            "name",
            "size",
            "sha256",
            "file_unique_id",
            "created_at",
            "source_path",
        ]
        fks = db.execute("PRAGMA foreign_key_list(attachments)").fetchall()
        assert [(f[2], f[3], f[4]) for f in fks] == [("nuntii", "nuntius_seq", "seq")]
        plan = " ".join(
            str(r)
            for r in db.execute(
                "EXPLAIN QUERY PLAN SELECT * FROM attachments WHERE nuntius_seq = 1"
            )
        )
        assert "idx_attachments_nuntius" in plan


async def test_a_pending_file_joins_its_nuntius_in_the_same_insert(tmp_path: Path) -> None:
    async with await Praetorium.open(tmp_path / "p.db") as praetorium:
        store = AttachmentStore(praetorium)
        await store.stage(pending())
        await store.stage(pending())  # a redelivery changes nothing
        assert [p.sha256 for p in await store.pending()] == [None]
        await store.downloaded(pending(), "ab" * 32, 12)
        nuntius = await praetorium.post(
            "caesar", "@vorenus look", ["vorenus"], origin="telegram:1:2"
        )
        assert await store.pending() == []
        [attachment] = await store.of_nuntius(nuntius.seq)
        assert (attachment.name, attachment.size, attachment.direction) == (
            "Report_2026.pdf",
            12,
            "in",
        )
        with pytest.raises(DuplicateOrigin):
            await praetorium.post("caesar", "@vorenus look", ["vorenus"], origin="telegram:1:2")
        assert len(await store.of_nuntius(nuntius.seq)) == 1
        assert [a.id for a in await store.search_names("report_2026.PDF")] == [attachment.id]
        assert await store.search_names("%") == []  # LIKE wildcards are plain characters
        other = await praetorium.post("caesar", "no file", ["legatus"], origin="telegram:1:3")
        assert await store.of_nuntius(other.seq) == []


async def test_the_files_of_an_album_join_their_one_nuntius_in_order(tmp_path: Path) -> None:
    async with await Praetorium.open(tmp_path / "p.db") as praetorium:
        store = AttachmentStore(praetorium)
        for part in (2, 0, 1):
            await store.stage(pending(part=part))
        assert [p.part for p in await store.pending()] == [0, 1, 2]
        for part in (0, 1):
            await store.downloaded(pending(part=part), f"{part}" * 64, 12)
        await store.drop_pending("telegram:1:2", 2)  # refused: the others stay
        nuntius = await praetorium.post("caesar", "look", ["vorenus"], origin="telegram:1:2")
        assert await store.pending() == []
        names = [a.name for a in await store.of_nuntius(nuntius.seq)]
        assert names == ["Report_2026.pdf", "Annex_1.pdf"]


async def test_a_pending_file_of_an_older_praetorium_is_kept_by_the_upgrade(
    tmp_path: Path,
) -> None:
    from legio.store import migrations as module

    path = tmp_path / "p.db"
    saved = list(module.MIGRATIONS)
    newer = ("m010_album_parts", "m011_pending_forwards")  # an older praetorium had neither
    module.MIGRATIONS[:] = [m for m in saved if m[0] not in newer]
    try:
        async with await Praetorium.open(path) as old:
            await old.connection.execute(
                "INSERT INTO attachments_pending (origin, text, kind, mime_type, name, size, "
                "sha256, created_at) VALUES ('telegram:1:7', 'see', 'document', "
                "'application/pdf', 'old.pdf', 3, ?, '2026-01-01')",
                ("c" * 64,),
            )
    finally:
        module.MIGRATIONS[:] = saved
    async with await Praetorium.open(path) as praetorium:
        store = AttachmentStore(praetorium)
        [kept] = await store.pending()
        assert (kept.origin, kept.part, kept.name, kept.sha256, kept.forwarded_from) == (
            "telegram:1:7",
            0,
            "old.pdf",
            "c" * 64,
            None,
        )
        nuntius = await praetorium.post("caesar", "see", ["legatus"], origin="telegram:1:7")
        assert [a.name for a in await store.of_nuntius(nuntius.seq)] == ["old.pdf"]


async def test_an_older_praetorium_upgrades_and_keeps_its_nuntii(tmp_path: Path) -> None:
    from legio.store import migrations as module

    path = tmp_path / "p.db"
    saved = list(module.MIGRATIONS)
    module.MIGRATIONS[:] = [
        m
        for m in saved
        if m[0] not in ("m006_attachments", "m010_album_parts", "m011_pending_forwards")
    ]
    try:
        async with await Praetorium.open(path) as old:
            first = await old.post("caesar", "ave", ["legatus"], origin="telegram:1:1")
    finally:
        module.MIGRATIONS[:] = saved
    async with await Praetorium.open(path) as praetorium:
        assert await praetorium.get(first.id) == first
        assert await AttachmentStore(praetorium).of_nuntius(first.seq) == []


def test_the_file_store_is_content_addressed_and_deduplicated(tmp_path: Path) -> None:
    files = FileStore(tmp_path)
    source = tmp_path / "a.txt"
    source.write_bytes(b"same bytes")
    first = files.add_copy(source, "a.txt", "text/plain")
    second = files.add_copy(source, "b.txt", "text/plain")
    assert first == second
    assert first.path.name == f"{first.sha256}.txt"
    assert sorted(p.name for p in (tmp_path / "attachments").iterdir()) == [first.path.name]


def test_a_huge_image_is_downscaled_within_the_api_limits(tmp_path: Path) -> None:
    path = tmp_path / "huge.png"
    noise = Image.effect_noise((8200, 200), 120).convert("RGB")
    noise.save(path, format="PNG")
    assert path.stat().st_size * 4 / 3 > MAX_IMAGE_BASE64 or noise.size[0] > 8000
    source = image_source(path)
    assert len(source["data"]) <= MAX_IMAGE_BASE64
    with Image.open(io.BytesIO(base64.b64decode(source["data"]))) as image:
        assert max(image.size) <= 8000
        assert source["media_type"] == Image.MIME[str(image.format)]


def test_an_unreadable_image_says_so_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.jpg"
    path.write_bytes(b"\xff\xd8\xff\xe0 truncated")
    with pytest.raises(AttachmentError) as caught:
        check_image(path, "broken.jpg")
    assert str(caught.value).startswith("broken.jpg is not a readable image (")
    assert "\n" not in str(caught.value)


def test_a_window_shows_a_file_as_an_element_with_the_viewers_copy(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from lxml import etree

    from legio.sessions.delivery import window_elements
    from legio.sessions.history import format_history_xml
    from legio.store.attachments import Attachment
    from legio.store.praetorium import Nuntius

    name = 'a "quoted" <b>.png'
    attachment = Attachment(1, 7, "in", "photo", "image/png", name, 5, "ab" * 32)
    nuntius = Nuntius("id-7", 7, "caesar", "look </nuntius>", ("vorenus",), datetime.now(UTC))
    workspace = tmp_path / "workspace"
    assert window_elements({7: [attachment]}, workspace, "vorenus")[7][0].get("path") is None
    (workspace / "inbox").mkdir(parents=True)
    (workspace / "inbox" / f"7-{name}").write_bytes(b"12345")
    elements = window_elements({7: [attachment]}, workspace, "vorenus")
    xml = format_history_xml([nuntius], "vorenus", attachments=elements)
    [element] = etree.fromstring(xml).iter("nuntius")
    assert element.text == "look </nuntius>"
    [file] = list(element)
    assert (file.tag, file.get("kind"), file.get("name")) == ("attachment", "photo", name)
    assert file.get("path") == str(workspace / "inbox" / f"7-{name}")
