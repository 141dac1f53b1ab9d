"""The one scaffold of in-process tools (``legio.toolkit``): what a tool answers, how a
failure comes back to the model in words, and how its arguments are declared — used by
memoria, the forge, the Legatus's toolbox and job tools, and ``send_file``."""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from claude_agent_sdk import SdkMcpTool

from legio.errors import LegioError, MemoriaError, PraetoriumError
from legio.forge.forgetools import forge_tools
from legio.legatus.scheduling import job_tools
from legio.legatus.toolbox import legatus_tools
from legio.memoria.store import MemoriaStore
from legio.memoria.tools import memoria_centurio_tools, memoria_full_tools
from legio.sessions.outbox import send_file_tool
from legio.toolkit import Result, guarded, integer, result, said, schema, string, strings


def test_a_result_is_one_text_block_marked_when_it_failed() -> None:
    assert result("done") == {"content": [{"type": "text", "text": "done"}]}
    assert result("no", error=True) == {
        "content": [{"type": "text", "text": "no"}],
        "is_error": True,
    }


async def test_a_guarded_handler_answers_its_errors_in_words() -> None:
    @guarded(MemoriaError)
    async def handler(args: dict[str, Any]) -> Result:
        if args.get("fail") == "memoria":
            raise MemoriaError("there is no edictum named 'x'")
        if args.get("fail") == "other":
            raise ValueError("a bug")
        return result("fine")

    assert await handler({}) == result("fine")
    assert await handler({"fail": "memoria"}) == result(
        "Error: there is no edictum named 'x'", error=True
    )
    with pytest.raises(ValueError, match="a bug"):  # a bug is not dressed up as the model's mistake
        await handler({"fail": "other"})


async def test_a_guarded_handler_runs_inside_its_context() -> None:
    seen: list[str] = []

    @contextmanager
    def patience() -> Iterator[None]:
        seen.append("in")
        try:
            yield
        finally:
            seen.append("out")

    @guarded(LegioError, around=patience)
    async def handler(args: dict[str, Any]) -> Result:
        seen.append("run")
        raise LegioError("the forge's rate limit: until 12:00")

    assert await handler({}) == result("Error: the forge's rate limit: until 12:00", error=True)
    assert seen == ["in", "run", "out"]


def test_a_schema_declares_exactly_its_fields() -> None:
    assert schema({"name": said("a name (a string)")}) == {
        "type": "object",
        "properties": {"name": {"description": "a name (a string)"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    made = schema(
        {"q": string("words"), "limit": integer("how many"), "to": strings("names")}, ["q"]
    )
    assert made["required"] == ["q"]
    assert made["properties"]["to"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "names",
    }


def every_tool(castra_dir: Path) -> list[SdkMcpTool[Any]]:
    async def repo_of(project: str) -> str:
        return "caesar/app"

    async def confirm(*what: str) -> bool:
        return False

    class Seen:
        async def seen_issue(self, agent: str, project: str) -> int:
            return 0

        async def saw_issue(self, agent: str, project: str, number: int) -> None:
            return None

    async def owner_chat() -> str | None:
        return None

    store = MemoriaStore(castra_dir)
    sessions: Any = types.SimpleNamespace(projects=types.SimpleNamespace(listing=lambda: "app"))
    nothing: Any = object()
    return [
        *memoria_full_tools(store),
        *memoria_centurio_tools(store, "vorenus"),
        *forge_tools(nothing, "app", repo_of, "vorenus", Seen(), confirm),
        *legatus_tools(nothing, nothing, sessions, nothing),
        *job_tools(
            nothing, list, ZoneInfo("Europe/Rome"), lambda: datetime.now(UTC), list, 5, owner_chat
        ),
        send_file_tool(nothing, "vorenus", nothing),
    ]


def test_every_tool_takes_exactly_the_arguments_it_declares(castra_dir: Path) -> None:
    """An agent's stray argument is refused by the schema rather than silently ignored."""
    tools = every_tool(castra_dir)
    assert len(tools) == 37
    for made in tools:
        declared = made.input_schema
        assert isinstance(declared, dict)
        assert declared["type"] == "object", made.name
        assert declared["additionalProperties"] is False, made.name
        assert set(declared["required"]) <= set(declared["properties"]), made.name
        for field in declared["properties"].values():
            assert field["description"], made.name


async def test_the_toolbox_says_a_praetorium_error_to_the_legatus(castra_dir: Path) -> None:
    class Broken:
        async def search(self, query: str, viewer: str, limit: int) -> list[object]:
            raise PraetoriumError("that search could not be read: unterminated string")

    sessions: Any = types.SimpleNamespace(projects=types.SimpleNamespace(listing=lambda: "app"))
    nothing: Any = object()
    broken: Any = Broken()
    [search] = [
        t for t in legatus_tools(broken, nothing, sessions, nothing) if t.name == "search_history"
    ]
    assert await search.handler({"query": '"bridge'}) == result(
        "Error: that search could not be read: unterminated string", error=True
    )
