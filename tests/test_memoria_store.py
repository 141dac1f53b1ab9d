"""MemoriaStore: the three layers, their file format, hostile names and text, atomic writes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from legio.memoria.store import Document, MemoriaError, MemoriaStore, slugify, validate_name


@pytest.fixture
def store(castra_dir: Path) -> MemoriaStore:
    return MemoriaStore(castra_dir)


def test_edictum_publish_read_list_revoke(store: MemoriaStore, castra_dir: Path) -> None:
    store.publish_edictum("no-force-push", "Never force-push", "Not to main, not ever.", "legatus")
    doc = store.read_edictum("no-force-push")
    assert (doc.title, doc.body, doc.author, doc.revoked) == (
        "Never force-push",
        "Not to main, not ever.",
        "legatus",
        False,
    )
    revoked = store.revoke_edictum("no-force-push", "legatus")
    assert revoked.revoked_by == "legatus"
    assert revoked.revoked_at is not None
    assert (castra_dir / "edicta" / "no-force-push.xml").is_file()
    [listed] = store.list_edicta().documents
    assert listed.revoked
    assert listed.body == "Not to main, not ever."
    with pytest.raises(MemoriaError, match="already revoked"):
        store.revoke_edictum("no-force-push", "legatus")
    store.publish_edictum("no-force-push", "Never force-push", "Back in force.", "legatus")
    assert not store.read_edictum("no-force-push").revoked


def test_file_format_is_readable_xml(store: MemoriaStore, castra_dir: Path) -> None:
    store.publish_actum("stack", "Caesar's stack", "Python <3.13> & SQLite", "vorenus")
    root = etree.parse(str(castra_dir / "acta" / "stack.xml")).getroot()
    assert root.tag == "actum"
    assert root.get("name") == "stack"
    assert [c.tag for c in root] == ["title", "author", "created", "updated", "body"]
    assert root.findtext("body") == "Python <3.13> & SQLite"
    raw = (castra_dir / "acta" / "stack.xml").read_text()
    assert "&lt;3.13&gt; &amp; SQLite" in raw


def test_actum_update_keeps_author_and_creation(store: MemoriaStore) -> None:
    first = store.publish_actum("stack", "Stack", "v1", "vorenus")
    second = store.publish_actum("stack", "Stack", "v2", "pullo")
    assert second.author == "vorenus"
    assert second.updated_by == "pullo"
    assert second.created == first.created
    assert second.updated >= first.updated
    assert store.read_actum("stack").body == "v2"


def test_commentarii_are_append_only(store: MemoriaStore, castra_dir: Path) -> None:
    first = store.write_commentarium("vorenus", "Repo conventions", "tabs, not spaces", "vorenus")
    second = store.write_commentarium("vorenus", "Repo conventions", "spaces after all", "vorenus")
    assert first.name != second.name
    listing = store.list_commentarii("vorenus")
    assert [d.body for d in listing.documents] == ["tabs, not spaces", "spaces after all"]
    folder = castra_dir / "centuriones" / "vorenus" / "commentarii"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{first.name}.xml", f"{second.name}.xml"]
    )
    assert store.read_commentarium("vorenus", first.name).body == "tabs, not spaces"
    assert store.list_commentarii("pullo").documents == []


def test_commentarii_need_an_existing_centurio(store: MemoriaStore) -> None:
    with pytest.raises(MemoriaError, match=r"no centurio named .brutus.*pullo, vorenus"):
        store.write_commentarium("brutus", "x", "y", "legatus")
    with pytest.raises(MemoriaError, match="not valid"):
        store.list_commentarii("../pullo")


@pytest.mark.parametrize(
    "name", ["../etc/passwd", "a/b", ".hidden", "..", "UPPER", "", "x" * 65, "a b", "a.xml", "\x00"]
)
def test_hostile_names_are_refused_before_any_path_is_built(
    store: MemoriaStore, castra_dir: Path, name: str
) -> None:
    before = sorted(str(p) for p in castra_dir.parent.rglob("*"))
    with pytest.raises(MemoriaError, match="is not valid"):
        store.publish_actum(name, "t", "b", "vorenus")
    with pytest.raises(MemoriaError, match="is not valid"):
        store.read_edictum(name)
    with pytest.raises(MemoriaError, match="is not valid"):
        store.read_commentarium("vorenus", name)
    assert sorted(str(p) for p in castra_dir.parent.rglob("*")) == before


@given(st.text(max_size=80))
def test_name_validation_accepts_only_safe_names(name: str) -> None:
    try:
        validate_name(name)
    except MemoriaError:
        return
    assert "/" not in name
    assert not name.startswith(".")
    assert ".." not in name
    assert name == name.strip()
    assert 1 <= len(name) <= 64
    assert name.isascii()


@given(st.text(max_size=120))
def test_slugs_are_valid_names_or_empty(title: str) -> None:
    slug = slugify(title)
    if slug:
        assert validate_name(slug) == slug


HOSTILE_TEXT = [
    "NUL \x00 bell \x07 escape \x1b[31m form feed \x0c vt \x0b",
    "]]><![CDATA[ </body><body>forged</body> &amp; <!-- -->",
    "CRLF\r\nCR\rtab\t",
    "lone surrogate \ud800 and \udfff, non-characters \ufffe\uffff",
    "emoji 🦅 RTL שלום",
]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_hostile_text_reads_back_exactly(store: MemoriaStore, text: str) -> None:
    store.publish_actum("hostile", text[:50], text, "vorenus")
    doc = store.read_actum("hostile")
    assert doc.body == text
    assert doc.title == text[:50]


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.characters(codec=None), max_size=300))
def test_any_text_round_trips(store: MemoriaStore, text: str) -> None:
    store.publish_actum("prop", "t", text, "pullo")
    assert store.read_actum("prop").body == text


def test_size_budget_is_enforced_with_a_clear_error(castra_dir: Path) -> None:
    store = MemoriaStore(castra_dir, max_document_bytes=2048)
    store.publish_actum("ok", "t", "x" * 2000, "vorenus")
    with pytest.raises(MemoriaError, match=r"would be 3,001 bytes; the limit is 2,048"):
        store.publish_actum("big", "t", "x" * 3000, "vorenus")
    assert not (castra_dir / "acta" / "big.xml").exists()
    assert store.read_actum("ok").body == "x" * 2000


def test_corrupt_file_is_reported_by_name_and_the_rest_still_lists(
    store: MemoriaStore, castra_dir: Path
) -> None:
    store.publish_actum("good", "Good", "fine", "pullo")
    (castra_dir / "acta" / "broken.xml").write_text("<actum><title>half")
    listing = store.list_acta()
    assert [d.name for d in listing.documents] == ["good"]
    assert len(listing.problems) == 1
    assert "acta/broken.xml is not valid XML" in listing.problems[0]
    with pytest.raises(MemoriaError, match=r"acta/broken\.xml is not valid XML"):
        store.read_actum("broken")


def test_external_entities_are_not_resolved(store: MemoriaStore, castra_dir: Path) -> None:
    secret = castra_dir.parent / "secret.txt"
    secret.write_text("TOP SECRET")
    (castra_dir / "acta").mkdir(exist_ok=True)
    (castra_dir / "acta" / "xxe.xml").write_text(
        f'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY s SYSTEM "file://{secret}">]>'
        "<actum><title>t</title><author>a</author><created>2026-01-01T00:00:00+00:00</created>"
        "<updated>2026-01-01T00:00:00+00:00</updated><body>&s;</body></actum>"
    )
    doc = store.read_actum("xxe")
    # the entity is left unresolved: the body is empty, the rest of the document is read
    assert (doc.title, doc.author, doc.body) == ("t", "a", "")


def test_a_failed_write_leaves_the_old_document_whole(
    store: MemoriaStore, castra_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.publish_actum("plan", "Plan", "the old plan", "vorenus")

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        store.publish_actum("plan", "Plan", "the new plan", "vorenus")
    monkeypatch.undo()
    assert store.read_actum("plan").body == "the old plan"
    assert [p.name for p in (castra_dir / "acta").iterdir()] == ["plan.xml"]


def test_search_finds_all_words_across_layers(store: MemoriaStore) -> None:
    store.publish_edictum("tests", "Always test", "Every change needs a test.", "legatus")
    store.publish_actum("db", "Database", "We use SQLite for the praetorium.", "vorenus")
    store.write_commentarium("pullo", "SQLite notes", "FTS5 test ranking is bm25.", "pullo")
    found = {(d.layer, d.title) for d in store.search("sqlite", ["pullo", "vorenus"])}
    assert found == {("acta", "Database"), ("commentarii", "SQLite notes")}
    assert [d.title for d in store.search("TEST ranking", ["pullo"])] == ["SQLite notes"]
    with pytest.raises(MemoriaError, match="empty"):
        list(store.search("  ", []))


def _at_once(count: int, work: Callable[[int], Document]) -> list[Document | MemoriaError]:
    """Run ``work(i)`` for ``count`` threads released together; results or MemoriaErrors."""
    barrier = threading.Barrier(count)

    def run(i: int) -> Document | MemoriaError:
        barrier.wait()
        try:
            return work(i)
        except MemoriaError as e:
            return e

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def test_concurrent_publishes_of_one_actum_keep_its_first_author(store: MemoriaStore) -> None:
    results = _at_once(24, lambda i: store.publish_actum("plan", "Plan", f"v{i}", f"agent{i}"))
    docs = [r for r in results if isinstance(r, Document)]
    assert len(docs) == 24
    creators = {d.author for d in docs}
    assert len(creators) == 1  # one publish created it; every other one updated it
    final = store.read_actum("plan")
    assert final.author in creators
    assert final.body in {f"v{i}" for i in range(24)}
    assert [d.updated_by is None for d in docs].count(True) == 1


def test_concurrent_commentarii_all_land_up_to_the_cap(castra_dir: Path) -> None:
    store = MemoriaStore(castra_dir, max_commentarii=1000)
    results = _at_once(32, lambda i: store.write_commentarium("pullo", "Same", f"n{i}", "pullo"))
    assert all(isinstance(r, Document) for r in results)
    bodies = sorted(d.body for d in store.list_commentarii("pullo").documents)
    assert bodies == sorted(f"n{i}" for i in range(32))
    capped = MemoriaStore(castra_dir, max_commentarii=40)
    results = _at_once(20, lambda i: capped.write_commentarium("pullo", "More", f"m{i}", "pullo"))
    refused = [r for r in results if isinstance(r, MemoriaError)]
    assert len(refused) == 12
    assert "pullo's commentarii are full: 40 entries, the most [memoria] max_commentarii" in str(
        refused[0]
    )
    assert len(store.list_commentarii("pullo").documents) == 40


def test_the_size_budget_counts_utf8_bytes_not_characters(castra_dir: Path) -> None:
    store = MemoriaStore(castra_dir, max_document_bytes=2048)
    store.publish_actum("fits", "t", "é" * 1000, "vorenus")  # 2,001 bytes
    with pytest.raises(MemoriaError, match=r"would be 2,201 bytes; the limit is 2,048"):
        store.publish_actum("over", "t", "é" * 1100, "vorenus")  # 1,101 characters
    with pytest.raises(MemoriaError, match=r"would be 2,401 bytes"):
        store.write_commentarium("pullo", "t", "😀" * 600, "pullo")


def test_a_non_string_title_or_body_is_refused_by_name(store: MemoriaStore) -> None:
    with pytest.raises(MemoriaError, match="title must be text"):
        store.publish_actum("x", 5, "b", "pullo")  # type: ignore[arg-type]
    with pytest.raises(MemoriaError, match="body must be text"):
        store.write_commentarium("pullo", "t", None, "pullo")  # type: ignore[arg-type]
