"""The Legatus's own tools (besides the full memoria server), under ``legatus_tools``.

- ``get_history(limit)`` and ``search_history(query, limit)``: the praetorium;
- ``post_nuntius(text, audience)``: leave a message in the praetorium (centuriones get
  it with their next request);
- ``dispatch(centuriones, text)``: ask centuriones, in parallel, by the same path as
  Caesar's @mentions; their answers come back as the tool result and are stored
  addressed to the Legatus;
- ``list_centuriones()``: roster, state and usage; ``reset_centurio(name)``.

Failures are tool errors with a message the model can act on. The tools get what they
use passed in (the praetorium, the castra, the sessions, the dispatcher): they never
reach back into the Legatus.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from legio.castra import Castra
from legio.errors import PraetoriumError
from legio.names import BROADCAST, LEGATUS
from legio.sessions.history import format_line
from legio.sessions.manager import SessionManager
from legio.sessions.turn import Outcome
from legio.store.praetorium import Praetorium
from legio.toolkit import (
    Result,
    guarded,
    integer,
    result,
    schema,
    string,
    strings,
    tool,
    tool_error,
)

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import SdkMcpTool

HISTORY_MAX = 200

Dispatch = Callable[[list[str], str, str | None], Awaitable[dict[str, Outcome]]]


def _limit(args: dict[str, Any], default: int) -> int:
    try:
        value = int(args.get("limit") or default)
    except (TypeError, ValueError):
        value = default
    return max(1, min(HISTORY_MAX, value))


def legatus_tools(
    praetorium: Praetorium, castra: Castra, sessions: SessionManager, dispatch_to: Dispatch
) -> list[SdkMcpTool[Any]]:
    """The six Legatus tools; ``dispatch_to(names, text, project)`` asks centuriones for it."""

    @tool(
        "get_history",
        "Read the latest nuntii of the praetorium (every message between Caesar and the "
        "agents), oldest first. Use it when Caesar refers to something not in front of you.",
        schema({"limit": integer("how many (1-200, default 20)")}, required=[]),
    )
    async def get_history(args: dict[str, Any]) -> Result:
        nuntii = await praetorium.get_history(_limit(args, 20))
        if not nuntii:
            return result("The praetorium is empty.")
        return result("\n".join(format_line(n) for n in reversed(nuntii)))

    @tool(
        "search_history",
        "Full-text search of the praetorium, best matches first. Plain words match all of "
        'them; put a phrase in "double quotes"; OR between words matches either.',
        schema(
            {
                "query": string("words to look for"),
                "limit": integer("how many (1-200, default 10)"),
            },
            required=["query"],
        ),
    )
    @guarded(PraetoriumError)
    async def search_history(args: dict[str, Any]) -> Result:
        hits = await praetorium.search(args["query"], LEGATUS, _limit(args, 10))
        if not hits:
            return result(f"No nuntius matches {args['query']!r}.")
        return result("\n".join(f"{format_line(h.nuntius, 120)}\n   {h.snippet}" for h in hits))

    @tool(
        "post_nuntius",
        "Leave a nuntius in the praetorium without asking anyone to answer: addressed "
        "centuriones (or 'all') receive it with their next request. To get an answer now, "
        "use dispatch instead.",
        schema({"text": string("the message"), "audience": strings("centurio names, or ['all']")}),
    )
    @guarded(PraetoriumError)
    async def post_nuntius(args: dict[str, Any]) -> Result:
        roster = castra.roster()
        audience = [str(a).lower() for a in args["audience"]]
        unknown = [a for a in audience if a not in roster.centuriones and a != BROADCAST]
        if unknown or not audience:
            valid = ", ".join(roster.names) or "none"
            return tool_error(f"unknown audience {unknown}; centuriones: {valid}, or 'all'")
        nuntius = await praetorium.post(LEGATUS, args["text"], audience)
        return result(f"Posted nuntius #{nuntius.seq} to {', '.join(audience)}.")

    @tool(
        "dispatch",
        "Ask one or more centuriones to do something and wait for their answers (they "
        "work in parallel). Give each the full context it needs: it sees only messages "
        "addressed to it.",
        schema(
            {
                "centuriones": strings("names from the roster, e.g. ['vorenus']"),
                "text": string("the request"),
                "project": string(
                    "optional: a project of Caesar's (without #; now: "
                    f"{sessions.projects.listing()}); each centurio then works in its own "
                    "copy of it, on its own branch"
                ),
            },
            required=["centuriones", "text"],
        ),
    )
    async def dispatch(args: dict[str, Any]) -> Result:
        roster = castra.roster()
        names = list(dict.fromkeys(str(n).lower().lstrip("@") for n in args["centuriones"]))
        unknown = [n for n in names if n not in roster.centuriones]
        if unknown or not names:
            valid = ", ".join(roster.names) or "none"
            return tool_error(f"no centurio named {unknown}; the centuriones are: {valid}")
        if not str(args["text"]).strip():
            return tool_error("the request text is empty")
        project = str(args.get("project") or "").strip().lstrip("#").lower() or None
        if project is not None and project not in sessions.projects.names():
            listing = sessions.projects.listing()
            return tool_error(f"no project named {project!r}; the projects: {listing}")
        outcomes = await dispatch_to(names, args["text"], project)
        parts = [f"## {name}\n{outcomes[name].text}" for name in names]
        failed = all(o.kind != "answer" for o in outcomes.values())
        return result("\n\n".join(parts), error=failed)

    @tool(
        "list_centuriones",
        "The centuriones: name, description, current state, and usage so far.",
        schema({}),
    )
    async def list_centuriones(args: dict[str, Any]) -> Result:
        roster = castra.roster()
        totals = await praetorium.records.usage_totals()
        lines = []
        for status in sessions.status(roster.names):
            usage = totals.get(status.name)
            spent = f", {usage.turns} turns, ${usage.cost_usd:.4f}" if usage else ""
            description = roster.centuriones[status.name].description
            lines.append(f"- {status.name}: {description} ({status.state}{spent})")
        if roster.problems:
            lines.append("Not usable: " + "; ".join(roster.problems))
        return result("\n".join(lines) or "There are no centuriones.")

    @tool(
        "reset_centurio",
        "Forget a centurio's conversation: its next request starts a fresh session with "
        "recent history. Only when Caesar asks, or when it is clearly stuck.",
        schema({"name": string("the centurio's name")}),
    )
    async def reset_centurio(args: dict[str, Any]) -> Result:
        name = str(args["name"]).lower()
        roster = castra.roster()
        if name not in roster.centuriones:
            return tool_error(f"no centurio named {name!r}; centuriones: {', '.join(roster.names)}")
        await sessions.reset(name)
        return result(f"Reset {name}: its next request starts a fresh session.")

    return [get_history, search_history, post_nuntius, dispatch, list_centuriones, reset_centurio]
