"""Read what the fake Claude CLI logged: one record per CLI process it ran as."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAKE_CLI = Path(__file__).with_name("fake_claude.py")


@dataclass
class CliProcess:
    """One run of the fake CLI: how it was started and everything it was sent."""

    pid: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    session_id: str
    resumed: bool
    prompts: list[str] = field(default_factory=list)  # as the model reads them (see raw)
    raw_prompts: list[str] = field(default_factory=list)  # byte for byte as Legio sent them
    images: list[list[dict[str, Any]]] = field(default_factory=list)  # per prompt: image blocks
    prompt_times: list[float] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)  # messages that joined a running turn
    result_times: list[float] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)

    def option(self, name: str) -> str | None:
        """The value of a ``--name value`` or ``--name=value`` argument."""
        for i, arg in enumerate(self.argv):
            if arg == name and i + 1 < len(self.argv):
                return self.argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
        return None

    @property
    def system_prompt(self) -> str | None:
        return self.option("--system-prompt")

    def listed_tools(self) -> dict[str, list[str]]:
        """Per SDK MCP server, the tool names its ``tools/list`` answer gave the CLI."""
        requests = {
            m["request_id"]: m["request"].get("server_name")
            for m in self.sent
            if m.get("type") == "control_request"
            and m["request"].get("subtype") == "mcp_message"
            and m["request"]["message"].get("method") == "tools/list"
        }
        tools: dict[str, list[str]] = {}
        for m in self.received:
            response = m.get("response", {}) if m.get("type") == "control_response" else {}
            server = requests.get(response.get("request_id"))
            if server:
                result = response["response"]["mcp_response"]["result"]
                tools[server] = [t["name"] for t in result["tools"]]
        return tools

    @property
    def mcp_servers(self) -> list[str]:
        raw = self.option("--mcp-config")
        return list(json.loads(raw)["mcpServers"]) if raw else []


def read_cli_logs(log_dir: Path) -> list[CliProcess]:
    """Every fake CLI process that logged into ``log_dir``, oldest first."""
    processes: list[tuple[float, CliProcess]] = []
    for path in log_dir.glob("*.jsonl"):
        process: CliProcess | None = None
        started = 0.0
        for line in path.read_text().splitlines():
            record = json.loads(line)
            event = record["event"]
            if event == "start":
                started = record["t"]
                process = CliProcess(
                    pid=int(path.stem),
                    argv=record["argv"],
                    env=record["env"],
                    cwd=record["cwd"],
                    session_id=record["session_id"],
                    resumed=record["resumed"],
                )
            elif process is None:
                continue
            elif event == "prompt":
                process.prompts.append(record["text"])
                process.raw_prompts.append(record.get("raw", record["text"]))
                process.images.append(record.get("images", []))
                process.prompt_times.append(record["t"])
            elif event == "folded":
                process.folded.append(record["text"])
            elif event == "in":
                process.received.append(record["data"])
            elif event == "out":
                process.sent.append(record["data"])
                if record["data"].get("type") == "result":
                    process.result_times.append(record["t"])
        if process is not None:
            processes.append((started, process))
    return [p for _, p in sorted(processes, key=lambda item: item[0])]
