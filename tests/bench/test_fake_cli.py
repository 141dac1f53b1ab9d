"""The fake Claude CLI behaves like the real one towards the real ClaudeSDKClient."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    CLIJSONDecodeError,
    ProcessError,
    ResultMessage,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    create_sdk_mcp_server,
    tool,
)

from tests.conftest import FakeCli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "claude-cli-2.1.330"


def make_calc(calls: list[dict[str, Any]]) -> Any:
    @tool("add", "Add two numbers", {"a": float, "b": float})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return {"content": [{"type": "text", "text": f"sum={args['a'] + args['b']:g}"}]}

    return create_sdk_mcp_server("calc", tools=[add])


def options(fake_cli: FakeCli, **kw: Any) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(
        cli_path=str(fake_cli.path), permission_mode="bypassPermissions", **kw
    )


async def turn(client: ClaudeSDKClient, prompt: str) -> list[Any]:
    await client.query(prompt)
    return [m async for m in client.receive_response()]


def text_of(messages: list[Any]) -> str:
    return "".join(
        b.text
        for m in messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, TextBlock)
    )


def result_of(messages: list[Any]) -> ResultMessage:
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert len(results) == 1
    return results[0]


async def test_two_queries_and_a_real_tool_handler(fake_cli: FakeCli) -> None:
    calls: list[dict[str, Any]] = []
    async with ClaudeSDKClient(
        options(fake_cli, system_prompt="You are Vorenus.", mcp_servers={"calc": make_calc(calls)})
    ) as client:
        first = await turn(client, "hello there")
        second = await turn(client, 'CALL_TOOL calc add {"a": 1, "b": 2}')
    assert text_of(first) == "ECHO: hello there"
    assert calls == [{"a": 1, "b": 2}]
    blocks = [b for m in second if isinstance(m, AssistantMessage) for b in m.content]
    assert isinstance(blocks[1], ToolUseBlock)
    assert blocks[1].name == "mcp__calc__add"
    results = [
        b for m in second for b in getattr(m, "content", []) if isinstance(b, ToolResultBlock)
    ]
    assert results[0].content == "sum=3"
    assert result_of(second).result == "TOOL_RESULT: sum=3"
    [process] = fake_cli.processes()
    assert process.system_prompt == "You are Vorenus."
    assert process.mcp_servers == ["calc"]
    assert process.prompts == ["hello there", 'CALL_TOOL calc add {"a": 1, "b": 2}']


async def test_a_tool_turn_has_the_recorded_message_order(fake_cli: FakeCli) -> None:
    """Message types and order of a tool turn, held against the real CLI's recording."""

    def shape(messages: list[dict[str, Any]]) -> list[str]:
        out = []
        after_permission = False
        for m in messages:
            if after_permission and m.get("subtype") == "session_state_changed":
                after_permission = False
                continue  # the "running" that follows a permission prompt
            kind = m.get("type")
            if kind == "control_request":
                sub = m["request"]["subtype"]
                if sub == "can_use_tool":  # only asked with a permission prompt tool
                    continue
                kind = f"control_request/{sub}"
                if sub == "mcp_message":
                    kind += "/" + m["request"]["message"]["method"]
            elif kind == "system":
                kind = f"system/{m['subtype']}" + (f"/{m['state']}" if "state" in m else "")
                if kind == "system/session_state_changed/requires_action":
                    after_permission = True
                    continue
            elif kind == "assistant":
                kind = "assistant/" + m["message"]["content"][0]["type"]
            elif kind == "control_response":
                continue
            out.append(kind)
        return out

    recorded = [
        json.loads(line) for line in (FIXTURE / "cli-to-sdk.jsonl").read_text().splitlines()
    ]
    first_result = next(i for i, m in enumerate(recorded) if m.get("type") == "result")
    expected = [k for k in shape(recorded[: first_result + 2]) if "mcp_message/" not in k]
    async with ClaudeSDKClient(options(fake_cli, mcp_servers={"calc": make_calc([])})) as client:
        await turn(client, 'CALL_TOOL calc add {"a": 1, "b": 2}')
    [process] = fake_cli.processes()
    actual = [k for k in shape(process.sent) if "mcp_message/" not in k]
    assert actual == expected
    handshake = [k for k in shape(process.sent) if "mcp_message/" in k]
    assert handshake == [k for k in shape(recorded) if "mcp_message/" in k][:4]


async def test_usage_models_a_cached_growing_context(fake_cli: FakeCli) -> None:
    async with ClaudeSDKClient(options(fake_cli)) as client:
        first = result_of(await turn(client, "x" * 400))
        second = result_of(await turn(client, "y" * 40))
    assert first.usage is not None and second.usage is not None
    assert first.usage["input_tokens"] == 100
    assert first.usage["cache_read_input_tokens"] == 0
    assert second.usage["input_tokens"] == 10
    assert second.usage["cache_read_input_tokens"] >= 100
    assert (second.total_cost_usd or 0) > (first.total_cost_usd or 0)


async def test_usage_directive_sets_reported_usage(fake_cli: FakeCli) -> None:
    async with ClaudeSDKClient(options(fake_cli)) as client:
        result = result_of(await turn(client, "USAGE 5 120000 300 7"))
    assert result.usage is not None
    assert (result.usage["input_tokens"], result.usage["cache_read_input_tokens"]) == (5, 120000)
    assert result.usage["cache_creation_input_tokens"] == 300


async def test_resume_continues_the_session_and_unknown_id_fails_fast(fake_cli: FakeCli) -> None:
    async with ClaudeSDKClient(options(fake_cli)) as client:
        session_id = result_of(await turn(client, "remember the eagle")).session_id
    async with ClaudeSDKClient(options(fake_cli, resume=session_id)) as client:
        result = result_of(await turn(client, "what did I say?"))
    assert result.session_id == session_id
    assert result.usage is not None and result.usage["cache_read_input_tokens"] > 0
    first, resumed = fake_cli.processes()
    assert resumed.resumed and not first.resumed
    assert f"--resume={session_id}" in resumed.argv
    client = ClaudeSDKClient(options(fake_cli, resume="00000000-0000-0000-0000-000000000000"))
    with pytest.raises(ProcessError, match="No conversation found"):
        await client.connect()
    await client.disconnect()


async def test_error_result_is_a_message_and_the_session_goes_on(fake_cli: FakeCli) -> None:
    async with ClaudeSDKClient(options(fake_cli)) as client:
        failed = result_of(await turn(client, "ERROR overloaded"))
        after = await turn(client, "again")
    assert failed.is_error
    assert failed.result == "API Error: overloaded"
    assert text_of(after) == "ECHO: again"


async def test_thinking_block_and_stderr(fake_cli: FakeCli) -> None:
    lines: list[str] = []
    async with ClaudeSDKClient(options(fake_cli, stderr=lines.append)) as client:
        messages = await turn(client, "THINK pondering\nSTDERR something odd\nREPLY done")
    thinking = [
        b
        for m in messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, ThinkingBlock)
    ]
    assert thinking[0].thinking == "pondering"
    assert text_of(messages) == "done"
    assert "something odd" in lines


async def test_exit_mid_answer_raises_process_error(fake_cli: FakeCli) -> None:
    client = ClaudeSDKClient(options(fake_cli))
    await client.connect()
    await client.query("EXIT 3")
    with pytest.raises(ProcessError) as caught:
        [m async for m in client.receive_response()]
    assert caught.value.exit_code == 3
    await client.disconnect()


async def test_broken_json_raises_decode_error(fake_cli: FakeCli) -> None:
    client = ClaudeSDKClient(options(fake_cli))
    await client.connect()
    await client.query("BROKEN_JSON")
    with pytest.raises(CLIJSONDecodeError):
        [m async for m in client.receive_response()]
    await client.disconnect()


async def test_interrupt_ends_a_sleeping_turn_like_the_real_cli(fake_cli: FakeCli) -> None:
    async with ClaudeSDKClient(options(fake_cli)) as client:
        await client.query("SLEEP 30\nslow one")
        messages: list[Any] = []
        async for message in client.receive_response():
            messages.append(message)
            if isinstance(message, dict) or len(messages) == 1:
                await client.interrupt()
        interrupted = result_of(messages)
        after = await turn(client, "after interrupt")
    assert interrupted.is_error
    assert interrupted.subtype == "error_during_execution"
    assert (
        text_of(after)
        == "ECHO: SLEEP 30\nslow one\n\n[Request interrupted by user]\n\nafter interrupt"
    )


async def test_history_blocks_are_not_directives(fake_cli: FakeCli) -> None:
    prompt = '<praetorium recent="true" viewer="vorenus">\nEXIT 9\n</praetorium>\n\nhello'
    async with ClaudeSDKClient(options(fake_cli)) as client:
        messages = await turn(client, prompt)
    assert text_of(messages) == "ECHO: hello"
    assert fake_cli.processes()[0].prompts == [prompt]


async def test_partial_messages_stream_the_text_before_the_assistant_message(
    fake_cli: FakeCli,
) -> None:
    async with ClaudeSDKClient(options(fake_cli, include_partial_messages=True)) as client:
        messages = await turn(client, "STREAM 4 0.01 one two three four")
    events = [m.event for m in messages if isinstance(m, StreamEvent)]
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert len(deltas) == 4 and "".join(deltas) == "one two three four"
    last_event = max(i for i, m in enumerate(messages) if isinstance(m, StreamEvent))
    first_assistant = min(i for i, m in enumerate(messages) if isinstance(m, AssistantMessage))
    assert last_event < first_assistant
    assert text_of(messages) == "one two three four"


async def test_without_partial_messages_there_are_no_stream_events(fake_cli: FakeCli) -> None:
    async with ClaudeSDKClient(options(fake_cli)) as client:
        messages = await turn(client, "STREAM 4 0.01 one two three four")
    assert not [m for m in messages if isinstance(m, StreamEvent)]
    assert text_of(messages) == "one two three four"
