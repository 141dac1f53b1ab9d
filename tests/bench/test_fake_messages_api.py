"""The real bundled Claude CLI runs against the fake Messages API, and only against it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    TextBlock,
    create_sdk_mcp_server,
    tool,
)

from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi


def real_cli_options(api: FakeMessagesApi, home: Path, **kw: Any) -> ClaudeAgentOptions:
    """Options for the bundled CLI (cli_path unset), confined to the fake API."""
    return ClaudeAgentOptions(
        model=PINNED_MODEL,
        permission_mode="bypassPermissions",
        env=api.safe_cli_env(home),
        setting_sources=[],
        tools=[],
        cwd=str(home),
        **kw,
    )


async def answer(client: ClaudeSDKClient, prompt: str) -> tuple[str, ResultMessage]:
    await client.query(prompt)
    text, result = "", None
    async for message in client.receive_response():
        if isinstance(message, AssistantMessage):
            text += "".join(b.text for b in message.content if isinstance(b, TextBlock))
        elif isinstance(message, ResultMessage):
            result = message
    assert result is not None
    return text, result


async def test_real_cli_turn_tool_call_and_resume(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    @tool("add", "Add two numbers", {"a": float, "b": float})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return {"content": [{"type": "text", "text": f"sum={args['a'] + args['b']:g}"}]}

    with FakeMessagesApi() as api:
        servers = {"calc": create_sdk_mcp_server("calc", tools=[add])}
        options = real_cli_options(
            api,
            tmp_path,
            system_prompt="You add.",
            mcp_servers=servers,
            allowed_tools=["mcp__calc__add"],
        )
        async with ClaudeSDKClient(options) as client:
            text, first = await answer(client, "hello there")
            assert text == "ECHO: hello there"
            assert not first.is_error
            _, second = await answer(client, 'CALL_TOOL mcp__calc__add {"a": 1, "b": 2}')
        assert calls == [{"a": 1, "b": 2}]
        assert second.result is not None and second.result.startswith("TOOL_RESULT: sum=3")
        seen = len(api.requests)
        assert seen >= 3
        assert {r["model"] for r in api.requests} == {PINNED_MODEL}
        assert "You add." in str(api.requests[0].get("system"))

        resumed = real_cli_options(api, tmp_path, resume=first.session_id, system_prompt="You add.")
        async with ClaudeSDKClient(resumed) as client:
            text, third = await answer(client, "REPLY resumed")
        assert text == "resumed"
        assert third.session_id == first.session_id
        history = str(api.requests[-1]["messages"])
        assert "hello there" in history
        assert "sum=3" in history
