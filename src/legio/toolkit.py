"""The scaffold of every in-process tool an agent calls (memoria, the forge, the Legatus's
toolbox, its job tools, ``send_file``): what a handler returns, how its failures come
back, how its arguments are declared.

- ``result(text)`` is an MCP tool result: one text block; ``tool_error(message)`` the
  same marked as an error, "Error: <message>", which the model reads and acts on.
- ``guarded(*errors)`` wraps a handler so that those exceptions (each a ``LegioError``
  whose message is meant for a reader) come back as ``tool_error``, never raised into
  the session; ``around`` is a context the handler runs in (the forge's patience).
- ``schema(fields, required)`` is a tool's input: an object of exactly those fields
  (all required unless named), each made by ``said`` (a description alone: the handler
  checks the type and names the field, where a declared type would be refused without
  naming it), ``string``, ``integer`` or ``strings`` (a list of strings).
- ``tool`` and ``mcp_server`` are the SDK's ``@tool`` and ``create_sdk_mcp_server``, the
  SDK imported when they are first called: tools are made with a session's options, when
  its CLI starts (``legio.sessions.opening.load_sdk``), so the daemon starts without it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import wraps
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from claude_agent_sdk import McpSdkServerConfig, SdkMcpTool

Result = dict[str, Any]
Handler = Callable[[dict[str, Any]], Awaitable[Result]]
Field = dict[str, Any]
Schema = dict[str, Any]


def result(text: str, *, error: bool = False) -> Result:
    """An MCP tool result: one text block, marked as an error if ``error``."""
    answer: Result = {"content": [{"type": "text", "text": text}]}
    if error:
        answer["is_error"] = True
    return answer


def tool_error(message: str) -> Result:
    """A failure the model reads: ``Error: <message>``, marked as an error."""
    return result(f"Error: {message}", error=True)


def guarded(
    *errors: type[Exception], around: Callable[[], AbstractContextManager[object]] | None = None
) -> Callable[[Handler], Handler]:
    """A handler whose ``errors`` come back as ``tool_error(str(e))``, run inside
    ``around()`` when given."""

    def wrap(func: Handler) -> Handler:
        @wraps(func)
        async def run(args: dict[str, Any]) -> Result:
            try:
                with around() if around is not None else nullcontext():
                    return await func(args)
            except errors as e:
                return tool_error(str(e))

        return run

    return wrap


def said(description: str) -> Field:
    """A field with a description only: its type is said there and checked by the handler."""
    return {"description": description}


def string(description: str) -> Field:
    return {"type": "string", "description": description}


def integer(description: str) -> Field:
    return {"type": "integer", "description": description}


def strings(description: str) -> Field:
    """A list of strings."""
    return {"type": "array", "items": {"type": "string"}, "description": description}


def schema(fields: Mapping[str, Field], required: Sequence[str] | None = None) -> Schema:
    """A tool's input: an object of exactly ``fields``; ``required``: those (default all)."""
    return {
        "type": "object",
        "properties": dict(fields),
        "required": list(fields) if required is None else list(required),
        "additionalProperties": False,
    }


def tool(name: str, description: str, input_schema: Schema) -> Callable[[Handler], SdkMcpTool[Any]]:
    """The SDK's ``@tool`` decorator (the SDK imported now, if no CLI started yet)."""
    from claude_agent_sdk import tool as sdk_tool

    return sdk_tool(name, description, input_schema)


def mcp_server(name: str, tools: Sequence[SdkMcpTool[Any]]) -> McpSdkServerConfig:
    """An in-process MCP server of ``tools`` (``create_sdk_mcp_server``)."""
    from claude_agent_sdk import create_sdk_mcp_server

    return create_sdk_mcp_server(name, tools=list(tools))
