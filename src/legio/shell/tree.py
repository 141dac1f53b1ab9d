"""tree-sitter-bash nodes read as bash reads them: a word's literal text (None when it
holds an expansion or a glob), a node's descendants outside substitutions, the
redirections tree-sitter-bash reads otherwise than bash, and backslash-newlines joined."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node

GLOB = re.compile(r"(?<!\\)(\*|\?|\[[^\]]+\])")


def misread_redirect(node: Node) -> bool:
    """Where tree-sitter-bash reads a redirection otherwise than bash: ``0</dev/null git
    push`` (the ``0`` taken for the program, ``git push`` for more targets) or ``sh
    0<<<'…'`` (the ``0`` taken for an argument)."""
    if node.type == "file_redirect":
        targets = [c for i, c in enumerate(node.children) if node.field_name_for_child(i)]
        if len([t for t in targets if t.type != "file_descriptor"]) > 1:
            return True
    children = node.children
    for before, after in itertools.pairwise(children):
        redirect = after.type.endswith("_redirect") or after.type == "redirect"
        if redirect and before.end_byte == after.start_byte:
            inner = before.children[-1] if before.child_count else before
            if inner.type in ("number", "word") and (inner.text or b"").isdigit():
                return True
    return False


def node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="surrogateescape")


def numeric_index(node: Node) -> bool:
    """Whether a subscript's index is a plain number (no arithmetic that could set)."""
    index = node.child_by_field_name("index")
    return index is not None and node_text(index).isdigit()


def descendants(node: Node) -> Iterator[Node]:
    """Every node below ``node``, but not inside a substitution (that is read as a program)."""
    for child in node.children:
        yield child
        if child.type not in ("command_substitution", "process_substitution"):
            yield from descendants(child)


def literal(node: Node) -> str | None:
    """The text a word stands for when it holds no expansion; else None."""
    kind = node.type
    text = node.text.decode("utf-8", errors="surrogateescape") if node.text else ""
    if kind == "word":
        return None if GLOB.search(text) else re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)
    if kind == "raw_string":
        return text[1:-1]
    if kind == "string":
        if any(c.type not in ('"', "string_content") for c in node.children):
            return None
        return re.sub(r'\\([$`"\\])', r"\1", text[1:-1]).replace("\\\n", "")
    if kind in ("number", "string_content"):
        return text
    if kind == "concatenation":
        parts = [literal(c) for c in node.children]
        return None if any(p is None for p in parts) else "".join(str(p) for p in parts)
    return None


def variants(source: str) -> list[str]:
    """The text as written, and as the shell reads it with backslash-newlines joined."""
    joined = join_continuations(source)
    return [source] if joined == source else [source, joined]


def join_continuations(source: str) -> str:
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(source):
        c = source[i]
        if c == "\\" and quote != "'" and source[i + 1 : i + 2] == "\n":
            i += 2
            continue
        if c == "\\" and quote != "'":
            out.append(source[i : i + 2])
            i += 2
            continue
        if c in "'\"" and (not quote or quote == c):
            quote = "" if quote else c
        out.append(c)
        i += 1
    return "".join(out)
