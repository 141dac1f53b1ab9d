"""Seed 001's memoria tool tables, checked through the SDK's MCP bridge (real SDK, fake CLI)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    ToolResultBlock,
    UserMessage,
)

from legio.memoria.store import MemoriaError, MemoriaStore
from legio.memoria.tools import (
    MemoriaServer,
    build_memoria_centurio_server,
    build_memoria_full_server,
    memoria_centurio_tools,
)
from tests.conftest import FakeCli

CENTURIO_TOOLS = [
    "list_edicta",
    "read_edictum",
    "list_acta",
    "read_actum",
    "publish_actum",
    "list_commentarii",
    "read_commentarium",
    "write_commentarium",
]
FULL_TOOLS = [
    "list_edicta",
    "read_edictum",
    "publish_edictum",
    "revoke_edictum",
    "list_acta",
    "read_actum",
    "publish_actum",
    "list_commentarii",
    "read_commentarium",
    "write_commentarium",
    "search_memoria",
]


@pytest.fixture
def store(castra_dir: Path) -> MemoriaStore:
    return MemoriaStore(castra_dir)


class Agent:
    """A real ClaudeSDKClient whose fake model calls the given server's tools."""

    def __init__(self, fake_cli: FakeCli, server: MemoriaServer) -> None:
        self.server = server
        options = ClaudeAgentOptions(
            cli_path=str(fake_cli.path),
            permission_mode="bypassPermissions",
            mcp_servers={server.name: server.config},
        )
        self.client = ClaudeSDKClient(options)

    async def __aenter__(self) -> Agent:
        await self.client.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.disconnect()

    async def call(self, tool: str, **args: Any) -> tuple[str, bool]:
        """Run one tool call as the model would; return (text, is_error)."""
        await self.client.query(f"CALL_TOOL {self.server.name} {tool} {json.dumps(args)}")
        results = []
        async for message in self.client.receive_response():
            if isinstance(message, UserMessage) and isinstance(message.content, list):
                results += [b for b in message.content if isinstance(b, ToolResultBlock)]
            if isinstance(message, ResultMessage):
                assert not message.is_error
        [result] = results
        content = result.content
        text = (
            content
            if isinstance(content, str)
            else "".join(c.get("text", "") for c in content or [])
        )
        return text, bool(result.is_error)


async def test_servers_list_exactly_the_seed_tool_tables(
    store: MemoriaStore, fake_cli: FakeCli
) -> None:
    vorenus = build_memoria_centurio_server(store, "vorenus")
    full = build_memoria_full_server(store)
    async with Agent(fake_cli, vorenus) as agent:
        await agent.call("list_edicta")
    async with Agent(fake_cli, full) as agent:
        await agent.call("list_edicta")
    centurio_process, full_process = fake_cli.processes()
    assert centurio_process.listed_tools() == {"memoria_vorenus": CENTURIO_TOOLS}
    assert full_process.listed_tools() == {"memoria": FULL_TOOLS}


async def test_an_actum_published_by_one_centurio_is_read_by_another(
    store: MemoriaStore, fake_cli: FakeCli
) -> None:
    async with Agent(fake_cli, build_memoria_centurio_server(store, "vorenus")) as vorenus:
        text, error = await vorenus.call(
            "publish_actum", title="Deploy checklist", body="1. tests\n2. <tag> & push"
        )
        assert (text, error) == ("Published actum 'deploy-checklist'.", False)
        forged, error = await vorenus.call("publish_actum", title="x", body="y", author="caesar")
        assert error
        assert "Additional properties are not allowed ('author' was unexpected)" in forged
    async with Agent(fake_cli, build_memoria_centurio_server(store, "pullo")) as pullo:
        listing, _ = await pullo.call("list_acta")
        assert "- deploy-checklist: Deploy checklist (by vorenus" in listing
        text, error = await pullo.call("read_actum", name="deploy-checklist")
    assert not error
    assert text.startswith("Actum deploy-checklist: Deploy checklist\nBy vorenus")
    assert text.endswith("1. tests\n2. <tag> & push")
    assert store.read_actum("deploy-checklist").author == "vorenus"


async def test_a_centurio_cannot_reach_another_centurios_commentarii(
    store: MemoriaStore, fake_cli: FakeCli
) -> None:
    secret = store.write_commentarium("pullo", "Private", "pullo's secret", "pullo")
    async with Agent(fake_cli, build_memoria_centurio_server(store, "vorenus")) as vorenus:
        attempts = [
            await vorenus.call("list_commentarii", centurio_name="pullo"),
            await vorenus.call("read_commentarium", centurio_name="pullo", name=secret.name),
            await vorenus.call("read_commentarium", name=f"../pullo/commentarii/{secret.name}"),
            await vorenus.call("read_commentarium", name=f"..%2Fpullo%2F{secret.name}"),
            await vorenus.call("read_commentarium", name=secret.name),
            await vorenus.call(
                "read_actum", name=f"../centuriones/pullo/commentarii/{secret.name}"
            ),
        ]
        own, error = await vorenus.call("list_commentarii")
    for text, is_error in attempts:
        assert is_error, text
        assert "pullo's secret" not in text
    assert "is not valid" in attempts[2][0]
    assert "there is no commentarium named" in attempts[4][0]
    assert (own, error) == ("No commentarii yet.", False)


async def test_a_centurio_has_no_edicta_write_tools(store: MemoriaStore, fake_cli: FakeCli) -> None:
    async with Agent(fake_cli, build_memoria_centurio_server(store, "vorenus")) as vorenus:
        for tool in ("publish_edictum", "revoke_edictum", "search_memoria"):
            text, error = await vorenus.call(tool, name="x", title="x", body="x")
            assert error
            assert "No such tool available" in text
    assert store.list_edicta().documents == []


async def test_the_full_server_governs_edicta_and_every_commentarii(
    store: MemoriaStore, fake_cli: FakeCli
) -> None:
    async with Agent(fake_cli, build_memoria_full_server(store)) as legatus:
        text, error = await legatus.call(
            "publish_edictum", name="brevity", title="Be brief", body="Answer in five lines."
        )
        assert (text, error) == ("Published edictum 'brevity'; it is in force.", False)
        text, _ = await legatus.call(
            "write_commentarium", centurio_name="pullo", title="Brief", body="Look into FTS5."
        )
        assert text.startswith("Added commentarium '") and text.endswith("' for pullo.")
        notes, _ = await legatus.call("list_commentarii", centurio_name="pullo")
        assert ": Brief (by legatus" in notes
        found, _ = await legatus.call("search_memoria", query="fts5")
        assert "commentarii/" in found and "Brief" in found
        missing, error = await legatus.call("list_commentarii", centurio_name="brutus")
        assert error
        assert "there is no centurio named 'brutus'" in missing
        await legatus.call("revoke_edictum", name="brevity")
    async with Agent(fake_cli, build_memoria_centurio_server(store, "vorenus")) as vorenus:
        listing, _ = await vorenus.call("list_edicta")
        rule, _ = await vorenus.call("read_edictum", name="brevity")
    assert (
        listing
        == "No edicta yet.\nRevoked (no longer in force):\n- brevity: Be brief (revoked by legatus)"
    )
    assert "REVOKED by legatus" in rule


async def test_tool_errors_never_end_the_session(store: MemoriaStore, fake_cli: FakeCli) -> None:
    async with Agent(fake_cli, build_memoria_centurio_server(store, "vorenus")) as vorenus:
        text, error = await vorenus.call("read_actum", name="nothing-here")
        assert error
        assert text == "Error: there is no actum named 'nothing-here'; list_acta shows what exists"
        text, error = await vorenus.call("read_actum")
        assert error
        assert "'name' is a required property" in text
        text, error = await vorenus.call("publish_actum", title="!!!", body="x")
        assert error
        assert "give a name" in text
        text, error = await vorenus.call("list_acta")
    assert (text, error) == ("No acta yet.", False)


def test_a_server_for_an_unknown_centurio_is_refused(store: MemoriaStore) -> None:
    with pytest.raises(MemoriaError, match="no centurio named 'brutus'"):
        build_memoria_centurio_server(store, "brutus")


async def test_a_tool_call_with_a_non_string_field_is_a_tool_error_naming_it(
    store: MemoriaStore, fake_cli: FakeCli
) -> None:
    async with Agent(fake_cli, build_memoria_full_server(store)) as legatus:
        text, error = await legatus.call("publish_actum", title=5, body="x")
        assert error, text
        assert "title" in text and "string" in text, text
        text, error = await legatus.call(
            "write_commentarium", centurio_name="pullo", title="t", body=["a"]
        )
        assert error, text
        assert "body" in text and "string" in text, text
        text, error = await legatus.call("publish_edictum", name=7, title="t", body="b")
        assert error, text
        assert "name" in text, text
        text, error = await legatus.call("search_memoria", query={"q": 1})
        assert error, text
        assert "query" in text, text
        text, error = await legatus.call("list_acta")
    assert (text, error) == ("No acta yet.", False)


async def test_many_agents_writing_at_once_through_the_tools_all_land(castra_dir: Path) -> None:
    store = MemoriaStore(castra_dir, max_commentarii=30)
    pullo = {t.name: t for t in memoria_centurio_tools(store, "pullo")}
    vorenus = {t.name: t for t in memoria_centurio_tools(store, "vorenus")}
    writes = [
        pullo["write_commentarium"].handler({"title": "Same", "body": f"n{i}"}) for i in range(40)
    ]
    publishes = [
        tools["publish_actum"].handler({"name": "plan", "title": "Plan", "body": f"v{i}"})
        for i in range(20)
        for tools in (pullo, vorenus)
    ]
    results = await asyncio.gather(*writes, *publishes)
    refused = [r["content"][0]["text"] for r in results[:40] if r.get("is_error")]
    assert len(refused) == 10
    assert refused[0].startswith("Error: pullo's commentarii are full: 30 entries")
    assert len(store.list_commentarii("pullo").documents) == 30
    assert not any(r.get("is_error") for r in results[40:])
    plan = store.read_actum("plan")
    assert plan.author in ("pullo", "vorenus")
