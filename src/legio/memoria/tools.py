"""The memoria tools agents call, as in-process SDK MCP servers, scoped by closure.

``build_memoria_full_server(store)`` is the Legatus's: edicta (list, read, publish,
revoke), acta (list, read, publish), any centurio's commentarii (these tools take
``centurio_name``) and ``search_memoria`` — 11 tools.

``build_memoria_centurio_server(store, name)`` is one centurio's: edicta read-only,
acta (list, read, publish with the author set to ``name`` by the server), and its own
commentarii. The centurio's name is captured in the closures: no tool has a
``centurio_name`` parameter, so no argument can reach another centurio's notes.

Every failure (a bad name, a missing entry, a document over the size budget) comes
back as a tool error with a message the model can act on; nothing raises into the
session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from legio.errors import MemoriaError
from legio.memoria.store import Document, Listing, MemoriaStore, check_text, slugify
from legio.names import LEGATUS
from legio.toolkit import Result, guarded, mcp_server, result, said, schema, tool

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import McpSdkServerConfig, SdkMcpTool


@dataclass(frozen=True)
class MemoriaServer:
    """An SDK MCP server and its tools (the Legatus merges the tools into its own server)."""

    name: str
    tools: list[SdkMcpTool[Any]]
    config: McpSdkServerConfig


# Every field is text, its type said in its description and checked by ``_text`` (which
# names the field; the SDK's own check would refuse ``title: 5`` without naming it).
NAME = said("entry name: lowercase letters, digits, '-' or '_' (e.g. 'deploy-rules') (a string)")
TITLE = said("a short title (a string)")
BODY = said("the full text (Markdown is fine) (a string)")
CENTURIO = said("the centurio whose commentarii to use (e.g. 'vorenus') (a string)")
QUERY = said("words to look for (a string)")


def _day(doc: Document) -> str:
    return doc.updated.strftime("%Y-%m-%d")


def _format_listing(listing: Listing, kind: str, *, show_revoked: bool = False) -> str:
    active = [d for d in listing.documents if not d.revoked]
    lines = [f"- {d.name}: {d.title} (by {d.author}, {_day(d)})" for d in active]
    out = "\n".join(lines) if lines else f"No {kind} yet."
    revoked = [d for d in listing.documents if d.revoked]
    if show_revoked and revoked:
        out += "\nRevoked (no longer in force):\n" + "\n".join(
            f"- {d.name}: {d.title} (revoked by {d.revoked_by})" for d in revoked
        )
    if listing.problems:
        out += "\nUnreadable files:\n" + "\n".join(f"- {p}" for p in listing.problems)
    return out


def _format_document(doc: Document, kind: str) -> str:
    head = f"{kind} {doc.name}: {doc.title}\nBy {doc.author}"
    if doc.updated_by:
        head += f", last edited by {doc.updated_by}"
    head += f"; created {doc.created:%Y-%m-%d %H:%M} UTC, updated {doc.updated:%Y-%m-%d %H:%M} UTC"
    if doc.revoked:
        head += f"\nREVOKED by {doc.revoked_by} on {doc.revoked_at:%Y-%m-%d}: no longer in force."
    return f"{head}\n\n{doc.body}"


def _text(args: dict[str, Any], field: str) -> str:
    """The string argument ``field``; a ``MemoriaError`` naming it if missing or not text."""
    if field not in args:
        raise MemoriaError(f"{field} is missing: give the {field} as a string")
    value = args[field]
    check_text(**{field: value})
    assert isinstance(value, str)
    return value


def _entry_name(args: dict[str, Any]) -> str:
    given = args.get("name")
    if given is not None:
        check_text(name=given)
    name = str(given or "").strip() or slugify(_text(args, "title"))
    if not name:
        raise MemoriaError("give a name (lowercase letters, digits, '-' or '_') or a title")
    return name


# ------------------------------------------------------------------ tool factories


def _edicta_read_tools(store: MemoriaStore) -> list[SdkMcpTool[Any]]:
    @tool(
        "list_edicta",
        "List the edicta: Caesar's standing rules for the whole legion. Check them before "
        "acting on anything they might govern. Revoked edicta are listed separately.",
        schema({}),
    )
    @guarded(MemoriaError)
    async def list_edicta(args: dict[str, Any]) -> Result:
        listing = await asyncio.to_thread(store.list_edicta)
        return result(_format_listing(listing, "edicta", show_revoked=True))

    @tool(
        "read_edictum",
        "Read one edictum in full, by the name list_edicta shows.",
        schema({"name": NAME}),
    )
    @guarded(MemoriaError)
    async def read_edictum(args: dict[str, Any]) -> Result:
        doc = await asyncio.to_thread(store.read_edictum, _text(args, "name"))
        return result(_format_document(doc, "Edictum"))

    return [list_edicta, read_edictum]


def _acta_tools(store: MemoriaStore, author: str | None) -> list[SdkMcpTool[Any]]:
    """List/read/publish acta; ``author`` fixed by the server (None: the Legatus)."""

    @tool(
        "list_acta",
        "List the acta: knowledge shared by every agent of the legion (decisions, facts "
        "about Caesar's projects). Read one with read_actum.",
        schema({}),
    )
    @guarded(MemoriaError)
    async def list_acta(args: dict[str, Any]) -> Result:
        return result(_format_listing(await asyncio.to_thread(store.list_acta), "acta"))

    @tool(
        "read_actum",
        "Read one actum in full, by the name list_acta shows.",
        schema({"name": NAME}),
    )
    @guarded(MemoriaError)
    async def read_actum(args: dict[str, Any]) -> Result:
        doc = await asyncio.to_thread(store.read_actum, _text(args, "name"))
        return result(_format_document(doc, "Actum"))

    @tool(
        "publish_actum",
        "Publish knowledge every agent should have, or update an actum by giving its "
        "existing name. The name may be left empty to derive it from the title.",
        schema({"name": NAME, "title": TITLE, "body": BODY}, ["title", "body"]),
    )
    @guarded(MemoriaError)
    async def publish_actum(args: dict[str, Any]) -> Result:
        name = _entry_name(args)
        doc = await asyncio.to_thread(
            store.publish_actum, name, _text(args, "title"), _text(args, "body"), author or LEGATUS
        )
        return result(f"Published actum '{doc.name}'.")

    return [list_acta, read_actum, publish_actum]


def _commentarii_tools(store: MemoriaStore, owner: str | None) -> list[SdkMcpTool[Any]]:
    """List/read/write commentarii: ``owner``'s own (captured here, no ``centurio_name``
    parameter exists), or, with ``owner=None``, any centurio's by ``centurio_name``."""
    scope = {} if owner else {"centurio_name": CENTURIO}
    whose = "your own" if owner else "a centurio's"

    def centurio(args: dict[str, Any]) -> str:
        return owner or _text(args, "centurio_name")

    @tool(
        "list_commentarii",
        f"List {whose} commentarii: notes kept across sessions, oldest first.",
        schema(scope),
    )
    @guarded(MemoriaError)
    async def list_commentarii(args: dict[str, Any]) -> Result:
        listing = await asyncio.to_thread(store.list_commentarii, centurio(args))
        return result(_format_listing(listing, "commentarii"))

    @tool(
        "read_commentarium",
        f"Read one of {whose} commentarii in full, by the name list_commentarii shows.",
        schema({**scope, "name": NAME}),
    )
    @guarded(MemoriaError)
    async def read_commentarium(args: dict[str, Any]) -> Result:
        doc = await asyncio.to_thread(store.read_commentarium, centurio(args), _text(args, "name"))
        return result(_format_document(doc, "Commentarium"))

    @tool(
        "write_commentarium",
        f"Add a note to {whose} commentarii, to remember across sessions: conventions, "
        "decisions, open threads. Notes are append-only: write a new one to correct an old one.",
        schema({**scope, "title": TITLE, "body": BODY}),
    )
    @guarded(MemoriaError)
    async def write_commentarium(args: dict[str, Any]) -> Result:
        name = centurio(args)
        doc = await asyncio.to_thread(
            store.write_commentarium,
            name,
            _text(args, "title"),
            _text(args, "body"),
            owner or LEGATUS,
        )
        return result(f"Added commentarium '{doc.name}'" + ("." if owner else f" for {name}."))

    return [list_commentarii, read_commentarium, write_commentarium]


def _legatus_only_tools(store: MemoriaStore) -> list[SdkMcpTool[Any]]:
    @tool(
        "publish_edictum",
        "Publish (or replace) an edictum, a standing rule for the whole legion. Only when "
        "Caesar asks for a rule to be set.",
        schema({"name": NAME, "title": TITLE, "body": BODY}, ["title", "body"]),
    )
    @guarded(MemoriaError)
    async def publish_edictum(args: dict[str, Any]) -> Result:
        name = _entry_name(args)
        doc = await asyncio.to_thread(
            store.publish_edictum, name, _text(args, "title"), _text(args, "body"), LEGATUS
        )
        return result(f"Published edictum '{doc.name}'; it is in force.")

    @tool(
        "revoke_edictum",
        "Revoke an edictum: it stays on record but is no longer in force. Only when Caesar asks.",
        schema({"name": NAME}),
    )
    @guarded(MemoriaError)
    async def revoke_edictum(args: dict[str, Any]) -> Result:
        doc = await asyncio.to_thread(store.revoke_edictum, _text(args, "name"), LEGATUS)
        return result(f"Revoked edictum '{doc.name}'.")

    @tool(
        "search_memoria",
        "Search edicta, acta and every centurio's commentarii for entries containing all the "
        "given words (case-insensitive).",
        schema({"query": QUERY}),
    )
    @guarded(MemoriaError)
    async def search_memoria(args: dict[str, Any]) -> Result:
        query = _text(args, "query")

        def run() -> list[Document]:
            return list(store.search(query, store.castra.roster().names))

        found = await asyncio.to_thread(run)
        if not found:
            return result(f"Nothing in memoria matches {args['query']!r}.")
        lines = [f"- {d.layer}/{d.name}: {d.title} (by {d.author}, {_day(d)})" for d in found[:30]]
        return result("\n".join(lines))

    return [publish_edictum, revoke_edictum, search_memoria]


# ------------------------------------------------------------------ servers


def memoria_full_tools(store: MemoriaStore) -> list[SdkMcpTool[Any]]:
    """The Legatus's 11 memoria tools."""
    publish_edictum, revoke_edictum, search = _legatus_only_tools(store)
    return [
        *_edicta_read_tools(store),
        publish_edictum,
        revoke_edictum,
        *_acta_tools(store, None),
        *_commentarii_tools(store, None),
        search,
    ]


def memoria_centurio_tools(store: MemoriaStore, centurio: str) -> list[SdkMcpTool[Any]]:
    """One centurio's 8 memoria tools, scoped to ``centurio``."""
    store.check_centurio(centurio)
    return [
        *_edicta_read_tools(store),
        *_acta_tools(store, centurio),
        *_commentarii_tools(store, centurio),
    ]


def build_memoria_full_server(store: MemoriaStore, name: str = "memoria") -> MemoriaServer:
    tools = memoria_full_tools(store)
    return MemoriaServer(name, tools, mcp_server(name, tools))


def build_memoria_centurio_server(
    store: MemoriaStore, centurio: str, extra: Sequence[SdkMcpTool[Any]] = ()
) -> MemoriaServer:
    """One centurio's server: its memoria tools, plus ``extra`` (e.g. ``send_file``)."""
    name = f"memoria_{centurio}"
    tools = [*memoria_centurio_tools(store, centurio), *extra]
    return MemoriaServer(name, tools, mcp_server(name, tools))
