"""``MemoriaStore``: edicta, acta and commentarii as one XML file per entry.

- edicta ``castra/edicta/<name>.xml``: Caesar's standing rules. Revoking keeps the
  file and marks it revoked (by whom, when); a revoked edictum is listed as such and
  no longer served as an active rule. Publishing it again makes it active again.
- acta ``castra/acta/<name>.xml``: shared knowledge; publishing creates or updates,
  keeping the first author and the creation time, recording the last editor.
- commentarii ``castra/centuriones/<centurio>/commentarii/<entry>.xml``: a centurio's
  notes, append-only: a write always adds a new entry (``os.link`` refuses to replace
  an existing file), never alters or deletes one.

Every document is built and parsed with lxml. Text is stored as the author wrote it:
``<``, ``&`` and ``]]>`` are escaped by the serializer, ``\\r`` as ``&#13;``, and each
character XML 1.0 cannot hold (C0 controls but tab/newline/CR, lone surrogates,
U+FFFE/U+FFFF) as an empty element ``<c u="hex"/>`` inside the text, turned back into
the character on reading. Writes are atomic: temp file, fsync, rename, fsync of the
folder. Every read-modify-write (publishing over an entry, revoking, adding a
commentarium after counting them) holds a lock for that file (or that centurio's
folder), shared by every ``MemoriaStore`` of the process: agents' tools call the store
from threads, and two of them writing at once must both land. Sizes are counted in
UTF-8 bytes; a centurio keeps at most ``max_commentarii`` entries (``[memoria]``).
Names are ``[a-z0-9][a-z0-9_-]{0,63}`` (or a slug of the title); anything else
is refused before a path is built, so no name reaches outside its folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import unicodedata
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from lxml import etree

from legio.castra import PROMPT_FILE, Castra, validate_centurio_name
from legio.errors import MemoriaError
from legio.timing import now

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
DEFAULT_MAX_BYTES = 64 * 1024
DEFAULT_MAX_COMMENTARII = 1000
TITLE_MAX = 200
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

LAYERS = {"edicta": "edictum", "acta": "actum", "commentarii": "commentarium"}


@dataclass(frozen=True)
class Document:
    """One memoria entry."""

    layer: str
    name: str
    title: str
    author: str
    created: datetime
    updated: datetime
    body: str
    updated_by: str | None = None
    revoked_by: str | None = None
    revoked_at: datetime | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_by is not None


@dataclass
class Listing:
    """The readable documents of a layer and the files that are not.

    Edicta and acta are sorted by name, commentarii by creation time.
    """

    documents: list[Document] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def validate_name(name: object, what: str = "name") -> str:
    """Return ``name`` if it is a valid entry name; raise ``MemoriaError`` otherwise."""
    if not isinstance(name, str) or not NAME.match(name):
        raise MemoriaError(
            f"{what} {name!r} is not valid: use 1-64 characters, lowercase letters, digits, "
            "'-' or '_', starting with a letter or digit (no dots, slashes or spaces)"
        )
    return name


def check_text(**fields: object) -> None:
    """Raise ``MemoriaError`` naming the first of ``fields`` that is not a string."""
    for field_name, value in fields.items():
        if not isinstance(value, str):
            raise MemoriaError(
                f"{field_name} must be text (a string), got {type(value).__name__}: "
                f"give the {field_name} as a string"
            )


def slugify(title: str) -> str:
    """A valid entry name made from a title ('' if nothing usable is left)."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-_")
    return slug[:64].rstrip("-_")


# ------------------------------------------------------------------ XML text


def set_text(element: etree._Element, text: str) -> None:
    """Put ``text`` into ``element``, XML-invalid characters as ``<c u="hex"/>``."""
    parts = _INVALID_XML.split(text)
    element.text = parts[0]
    for char, part in zip(_INVALID_XML.findall(text), parts[1:], strict=True):
        marker = etree.SubElement(element, "c", u=f"{ord(char):x}")
        marker.tail = part


def get_text(element: etree._Element) -> str:
    """The text ``set_text`` stored."""
    out = [element.text or ""]
    for child in element:
        if child.tag == "c":
            out.append(chr(int(child.get("u", "fffd"), 16)))
        out.append(child.tail or "")
    return "".join(out)


# ------------------------------------------------------------------ locks

_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the process-wide lock of ``path`` (a file, or a folder of commentarii)."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(path.absolute(), threading.Lock())
    with lock:
        yield


# ------------------------------------------------------------------ the store


class MemoriaStore:
    """Reads and writes memoria under a castra folder."""

    def __init__(
        self,
        castra_root: Path,
        max_document_bytes: int = DEFAULT_MAX_BYTES,
        max_commentarii: int = DEFAULT_MAX_COMMENTARII,
    ) -> None:
        self.castra = Castra(castra_root)
        self.max_document_bytes = max_document_bytes
        self.max_commentarii = max_commentarii

    # ---------------------------------------------------------- paths

    def _folder(self, layer: str, centurio: str | None = None) -> Path:
        if layer == "commentarii":
            assert centurio is not None
            return self.castra.commentarii_dir(centurio)
        return self.castra.edicta_dir if layer == "edicta" else self.castra.acta_dir

    def _path(self, layer: str, name: str, centurio: str | None = None) -> Path:
        return self._folder(layer, centurio) / f"{validate_name(name)}.xml"

    def check_centurio(self, centurio: object) -> str:
        """Return ``centurio`` if it names an existing centurio; raise ``MemoriaError``."""
        problem = validate_centurio_name(centurio) if isinstance(centurio, str) else "not a name"
        if problem or not isinstance(centurio, str):
            raise MemoriaError(f"centurio_name {centurio!r} is not valid: {problem}")
        if not (self.castra.centurio_dir(centurio) / PROMPT_FILE).is_file():
            roster = ", ".join(self.castra.roster().names) or "none"
            raise MemoriaError(f"there is no centurio named {centurio!r} (centuriones: {roster})")
        return centurio

    # ---------------------------------------------------------- documents on disk

    def _serialize(self, doc: Document) -> bytes:
        root = etree.Element(LAYERS[doc.layer], name=doc.name)
        if doc.layer == "edicta":
            root.set("status", "revoked" if doc.revoked else "active")
        set_text(etree.SubElement(root, "title"), doc.title)
        etree.SubElement(root, "author").text = doc.author
        if doc.updated_by:
            etree.SubElement(root, "updated_by").text = doc.updated_by
        etree.SubElement(root, "created").text = doc.created.isoformat()
        etree.SubElement(root, "updated").text = doc.updated.isoformat()
        if doc.revoked_by and doc.revoked_at:
            etree.SubElement(root, "revoked", by=doc.revoked_by, at=doc.revoked_at.isoformat())
        set_text(etree.SubElement(root, "body"), doc.body)
        return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)

    def _parse(self, layer: str, path: Path) -> Document:
        where = path.relative_to(self.castra.root)
        try:
            root = etree.parse(
                str(path), etree.XMLParser(resolve_entities=False, no_network=True)
            ).getroot()
        except OSError as e:
            raise MemoriaError(f"{where} cannot be read: {e}") from e
        except etree.XMLSyntaxError as e:
            raise MemoriaError(f"{where} is not valid XML ({e}); fix or delete the file") from e
        try:
            if root.tag != LAYERS[layer]:
                raise ValueError(f"root element <{root.tag}>, expected <{LAYERS[layer]}>")

            def child(tag: str) -> etree._Element:
                found = root.find(tag)
                if found is None:
                    raise ValueError(f"no <{tag}> element")
                return found

            revoked = root.find("revoked")
            updated_by = root.find("updated_by")
            return Document(
                layer=layer,
                name=path.stem,
                title=get_text(child("title")),
                author=child("author").text or "",
                created=datetime.fromisoformat(child("created").text or ""),
                updated=datetime.fromisoformat(child("updated").text or ""),
                body=get_text(child("body")),
                updated_by=updated_by.text if updated_by is not None else None,
                revoked_by=revoked.get("by") if revoked is not None else None,
                revoked_at=(
                    datetime.fromisoformat(revoked.get("at", "")) if revoked is not None else None
                ),
            )
        except ValueError as e:
            raise MemoriaError(f"{where} is not a valid {LAYERS[layer]} document: {e}") from e

    def _check_size(self, doc: Document) -> None:
        size = len(doc.title.encode("utf-8", "surrogatepass")) + len(
            doc.body.encode("utf-8", "surrogatepass")
        )
        if size > self.max_document_bytes:
            raise MemoriaError(
                f"{LAYERS[doc.layer]} {doc.name!r} would be {size:,} bytes; the limit is "
                f"{self.max_document_bytes:,} bytes per document. Shorten it or split it "
                "into several entries."
            )
        if len(doc.title) > TITLE_MAX:
            raise MemoriaError(
                f"the title is {len(doc.title)} characters; keep it under {TITLE_MAX}"
            )

    def _write(self, path: Path, data: bytes, *, replace: bool) -> None:
        """Write atomically; with ``replace=False`` fail (FileExistsError) if ``path`` exists."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if replace:
                os.replace(tmp, path)
            else:
                os.link(tmp, path)  # atomic, and refuses to overwrite
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def _read(self, layer: str, name: str, centurio: str | None = None) -> Document:
        path = self._path(layer, name, centurio)
        if not path.is_file():
            raise MemoriaError(
                f"there is no {LAYERS[layer]} named {name!r}; list_{layer} shows what exists"
            )
        return self._parse(layer, path)

    def _list(self, layer: str, centurio: str | None = None) -> Listing:
        listing = Listing()
        folder = self._folder(layer, centurio)
        paths = sorted(folder.glob("*.xml")) if folder.is_dir() else []
        for path in paths:
            if path.name.startswith(".") or not NAME.match(path.stem):
                continue
            try:
                listing.documents.append(self._parse(layer, path))
            except MemoriaError as e:
                listing.problems.append(str(e))
        if layer == "commentarii":  # a journal: oldest first
            listing.documents.sort(key=lambda d: (d.created, d.name))
        return listing

    def _publish(self, layer: str, name: str, title: str, body: str, author: str) -> Document:
        check_text(title=title, body=body)
        path = self._path(layer, name)
        with locked(path):
            return self._publish_locked(layer, path, name, title, body, author)

    def _publish_locked(
        self, layer: str, path: Path, name: str, title: str, body: str, author: str
    ) -> Document:
        stamp = now()
        previous = self._parse(layer, path) if path.is_file() else None
        doc = Document(
            layer=layer,
            name=name,
            title=title,
            author=previous.author if previous else author,
            created=previous.created if previous else stamp,
            updated=stamp,
            body=body,
            updated_by=author if previous and previous.author != author else None,
        )
        self._check_size(doc)
        self._write(path, self._serialize(doc), replace=True)
        return doc

    # ---------------------------------------------------------- edicta

    def publish_edictum(self, name: str, title: str, body: str, author: str) -> Document:
        """Create or replace an edictum (it is active afterwards)."""
        return self._publish("edicta", name, title, body, author)

    def read_edictum(self, name: str) -> Document:
        return self._read("edicta", name)

    def list_edicta(self) -> Listing:
        return self._list("edicta")

    def revoke_edictum(self, name: str, by: str) -> Document:
        """Mark an edictum revoked, keeping its text."""
        path = self._path("edicta", name)
        with locked(path):
            doc = self.read_edictum(name)
            if doc.revoked:
                raise MemoriaError(f"edictum {name!r} was already revoked by {doc.revoked_by}")
            revoked = Document(**{**doc.__dict__, "revoked_by": by, "revoked_at": now()})
            self._write(path, self._serialize(revoked), replace=True)
        return revoked

    # ---------------------------------------------------------- acta

    def publish_actum(self, name: str, title: str, body: str, author: str) -> Document:
        """Create or update an actum (the first author and creation time are kept)."""
        return self._publish("acta", name, title, body, author)

    def read_actum(self, name: str) -> Document:
        return self._read("acta", name)

    def list_acta(self) -> Listing:
        return self._list("acta")

    # ---------------------------------------------------------- commentarii

    def write_commentarium(self, centurio: str, title: str, body: str, author: str) -> Document:
        """Add a new entry to a centurio's commentarii; existing entries are never touched."""
        check_text(title=title, body=body)
        self.check_centurio(centurio)
        folder = self._folder("commentarii", centurio)
        with locked(folder):
            self._check_room(centurio, folder)
            return self._add_commentarium(centurio, title, body, author)

    def _check_room(self, centurio: str, folder: Path) -> None:
        count = sum(1 for p in folder.glob("*.xml") if NAME.match(p.stem)) if folder.is_dir() else 0
        if count >= self.max_commentarii:
            raise MemoriaError(
                f"{centurio}'s commentarii are full: {count:,} entries, the most "
                f"[memoria] max_commentarii allows ({self.max_commentarii:,}). No note was "
                "added; tell Caesar, who can raise the limit or move old entries away."
            )

    def _add_commentarium(self, centurio: str, title: str, body: str, author: str) -> Document:
        stamp = now()
        base = f"{stamp:%Y%m%d-%H%M%S}-{slugify(title) or 'note'}"[:60].rstrip("-_")
        for attempt in range(1, 1000):
            name = base if attempt == 1 else f"{base}-{attempt}"
            doc = Document("commentarii", name, title, author, stamp, stamp, body)
            self._check_size(doc)
            try:
                self._write(
                    self._path("commentarii", name, centurio), self._serialize(doc), replace=False
                )
            except FileExistsError:
                continue
            return doc
        raise MemoriaError("too many commentarii with the same title in the same second")

    def read_commentarium(self, centurio: str, name: str) -> Document:
        return self._read("commentarii", name, self.check_centurio(centurio))

    def list_commentarii(self, centurio: str) -> Listing:
        return self._list("commentarii", self.check_centurio(centurio))

    # ---------------------------------------------------------- search

    def search(self, query: str, centuriones: list[str]) -> Iterator[Document]:
        """Documents whose title or body contains every word of ``query`` (case-insensitive)."""
        words = query.lower().split()
        if not words:
            raise MemoriaError("the search query is empty: give one or more words")
        listings = [self.list_edicta(), self.list_acta()]
        listings += [self.list_commentarii(c) for c in centuriones]
        for listing in listings:
            for doc in listing.documents:
                haystack = f"{doc.title}\n{doc.body}".lower()
                if all(w in haystack for w in words):
                    yield doc
