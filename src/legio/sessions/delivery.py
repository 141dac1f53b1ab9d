"""What an agent gets of the files of the nuntius it answers, and of those in its window.

For each file of the nuntius: a copy in the agent's workspace (``inbox/<seq>-<name>``,
readable by its Read tool and its sandbox) named in the message as
``<attachment kind=… name=… path=…/>``; for an image also an image content block in
that query, once (``legio.media.images`` fits it to the Messages API). History windows show
the element only, never the bytes.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree

from legio.fence import safefs
from legio.media.images import PictureTooLarge, image_source
from legio.sessions.history import xml_safe
from legio.store.attachments import Attachment
from legio.store.files import IMAGE_KINDS, FileStore

logger = logging.getLogger(__name__)

INBOX = "inbox"


def inbox_path(workspace: Path, seq: int, name: str) -> Path:
    return workspace / INBOX / f"{seq}-{name}"


def inbox_names(attachments: Sequence[Attachment]) -> list[str]:
    """Each file's name in the inbox: its own, or ``scan (2).pdf`` for the second file
    of one message (an album) named ``scan.pdf``, so that no copy replaces another."""
    used: set[str] = set()
    names = []
    for attachment in attachments:
        name, number = attachment.name, 1
        stem, dot, ext = name.rpartition(".")
        while name in used:
            number += 1
            name = f"{stem} ({number}).{ext}" if dot and stem else f"{attachment.name} ({number})"
        used.add(name)
        names.append(name)
    return names


def copy_to_inbox(source: Path, workspace: Path, seq: int, name: str) -> Path:
    """Copy a stored file into the agent's ``inbox/`` (atomically; once), never through a
    link the agent made: ``inbox`` is reached by descriptor (a link in its place is
    replaced by a real folder) and the copy renamed over its name (``legio.fence.safefs``)."""
    target = inbox_path(workspace, seq, name)
    dir_fd = safefs.open_dir(workspace, [INBOX], create=True)
    try:
        if safefs.entry_size(dir_fd, target.name) == source.stat().st_size:
            return target
        safefs.write_copy(dir_fd, target.name, source)
    finally:
        os.close(dir_fd)
    return target


def attachment_element(attachment: Attachment, path: Path | str | None) -> etree._Element:
    """``<attachment kind=… name=… [path=…]/>`` for a history window or a message."""
    element = etree.Element("attachment", kind=attachment.kind, name=xml_safe(attachment.name))
    if path is not None:
        element.set("path", xml_safe(str(path)))
    element.set("mime_type", attachment.mime_type)
    element.set("size", str(attachment.size))
    if attachment.direction == "out":
        element.set("sent", "true")
    return element


def _render(element: etree._Element) -> str:
    return etree.tostring(element, encoding="unicode")


def window_elements(
    attachments: Mapping[int, Sequence[Attachment]], workspace: Path, viewer: str
) -> dict[int, list[etree._Element]]:
    """For a history window: each nuntius's files as elements, with the path where the
    viewer finds a copy (its inbox, or the file it sent itself), never the bytes."""
    out: dict[int, list[etree._Element]] = {}
    for seq, files in attachments.items():
        elements = []
        for attachment, name in zip(files, inbox_names(files), strict=True):
            copy = inbox_path(workspace, seq, name)
            path: Path | str | None = copy if copy.exists() else None
            if path is None and attachment.direction == "out" and attachment.source_path:
                path = attachment.source_path
            elements.append(attachment_element(attachment, path))
        out[seq] = elements
    return out


@dataclass
class Delivery:
    """What one query carries for the files of the nuntius it answers."""

    note: str = ""
    images: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class Pictures:
    """Image blocks for the model, made once per stored file and shared by every agent
    that gets it (``@all``, albums: one decode, not one per agent), the last ``keep``
    kept; two agents asking at once wait for the same one."""

    def __init__(self, files: FileStore, keep: int = 8) -> None:
        self.files = files
        self.keep = keep
        self.made = 0  # how many were made (not found): for tests and benchmarks
        self._blocks: OrderedDict[str, asyncio.Future[dict[str, str]]] = OrderedDict()

    async def source(self, path: Path, name: str) -> dict[str, str]:
        key = str(path)
        block = self._blocks.get(key)
        if block is None:
            self.made += 1
            block = asyncio.ensure_future(asyncio.to_thread(image_source, path, name))
            self._blocks[key] = block
            while len(self._blocks) > self.keep:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(key)
        return await asyncio.shield(block)  # one agent's cancelled turn leaves it to the rest


async def prepare_delivery(
    pictures: Pictures, attachments: Sequence[Attachment], workspace: Path, seq: int
) -> Delivery:
    """Copy the nuntius's files into the agent's inbox; image blocks for its images."""
    files = pictures.files
    delivery = Delivery()
    lines = []
    for attachment, name in zip(attachments, inbox_names(attachments), strict=True):
        stored = files.find(attachment.sha256, attachment.name, attachment.mime_type)
        if stored is None:
            delivery.problems.append(f"{attachment.name} is missing from the castra")
            lines.append(_render(attachment_element(attachment, None)))
            continue
        try:
            copy: Path | None = await asyncio.to_thread(copy_to_inbox, stored, workspace, seq, name)
        except OSError as e:
            logger.warning("cannot copy %s into %s/inbox: %s", attachment.name, workspace, e)
            delivery.problems.append(f"{attachment.name} could not be copied into your inbox")
            copy = None
        lines.append(_render(attachment_element(attachment, copy)))
        if attachment.kind in IMAGE_KINDS:
            try:
                source = await pictures.source(stored, attachment.name)
            except PictureTooLarge as e:
                delivery.problems.append(str(e))
                continue
            except Exception as e:
                logger.warning("cannot show %s to the model: %s", attachment.name, e)
                delivery.problems.append(f"{attachment.name} could not be shown as an image")
                continue
            delivery.images.append({"type": "image", "source": source})
    if lines:
        shown = " (the images are also shown to you)" if delivery.images else ""
        delivery.note = (
            f"Caesar attached these files; copies are in your workspace{shown}. "
            "Read them with the Read tool:\n" + "\n".join(lines)
        )
        if delivery.problems:
            delivery.note += "\n(" + "; ".join(delivery.problems) + ")"
    return delivery
