"""A test harness: the praetorium, memoria and a SessionManager on the fake CLI.

It plays the Legatus's bookkeeping (post Caesar's nuntius, dispatch, post each answer)
and can stop and start again like a daemon restart, with the same castra and database.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from legio.app import LegioApp
from legio.audience import Quiet
from legio.config import Config, load_config
from legio.frontends.views import agent_header, reply_text
from legio.memoria import MemoriaStore
from legio.request import Asker, ForgeEvent, Reply
from legio.sessions.gatekeeper import Gatekeeper
from legio.sessions.manager import SessionManager
from legio.store.grants import ApprovalStore
from legio.store.praetorium import Nuntius, Praetorium
from tests.conftest import FakeCli
from tests.fakes.cli_log import CliProcess

NUNTIUS_ID = re.compile(r'<nuntius id="([0-9a-f-]+)"')


class Legion:
    def __init__(self, castra_dir: Path, fake_cli: FakeCli, **settings: Any) -> None:
        self.castra_dir = castra_dir
        self.fake_cli = fake_cli
        self.settings = settings
        self.reap_interval_s = float(settings.pop("reap_interval_s", 60.0))
        self.cli_path = str(settings.pop("cli_path", fake_cli.path))  # "" = the bundled CLI
        self.env: dict[str, str] = settings.pop("env", {})
        # more TOML sections ([sandbox], [approvals]...): toml_tail= or toml=
        self.toml_tail = f"{settings.pop('toml_tail', '')}\n{settings.pop('toml', '')}"
        self.asker: Any = settings.pop("asker", None)  # with an asker: the approval gate
        self.gate: Gatekeeper | None = None
        self.config: Config
        self.praetorium: Praetorium
        self.memoria: MemoriaStore
        self.manager: SessionManager

    def write_config(self) -> Path:
        lines = [f"{k} = {v!r}" for k, v in self.settings.items()]
        lines += ["[claude]", f'cli_path = "{self.cli_path}"']
        path = self.castra_dir.parent / "legio.toml"
        path.write_text("\n".join(lines).replace("'", '"') + "\n" + self.toml_tail + "\n")
        return path

    async def start(self) -> Legion:
        self.config = load_config(self.write_config())
        self.praetorium = await Praetorium.open(self.castra_dir / "praetorium.db")
        self.memoria = MemoriaStore(self.castra_dir)
        if self.asker is not None:
            self.gate = Gatekeeper(self.config, ApprovalStore(self.praetorium))
            self.gate.standing = lambda: self.asker
            await self.gate.load()
        self.manager = SessionManager(
            self.config,
            self.praetorium,
            self.memoria,
            reap_interval_s=self.reap_interval_s,
            env=self.env,
            approvals=self.gate,
        )
        return self

    async def stop(self) -> None:
        await self.manager.shutdown()
        await self.praetorium.close()

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    async def post(
        self, text: str, audience: list[str], sender: str = "caesar", project: str | None = None
    ) -> Nuntius:
        return await self.praetorium.post(sender, text, audience, project=project)

    async def say(
        self, names: list[str], text: str, *, broadcast: bool = False, project: str | None = None
    ) -> dict[str, str]:
        """Caesar's message to ``names`` (audience ``all`` if ``broadcast``; on ``project``,
        as its ``#name`` puts it), answered."""
        nuntius = await self.post(text, ["all"] if broadcast else names, project=project)
        outcomes = await self.manager.dispatch_many(names, nuntius)
        replies = {name: outcome.text for name, outcome in outcomes.items()}
        for name, reply in replies.items():
            await self.praetorium.post(name, reply, ["caesar"], reply_to=nuntius.id)
        return replies

    def processes(self, name: str) -> list[CliProcess]:
        return processes_of(self.fake_cli, name)

    def prompts(self, name: str) -> list[str]:
        return [prompt for p in self.processes(name) for prompt in p.prompts]


def processes_of(fake_cli: FakeCli, name: str) -> list[CliProcess]:
    """Fake CLI processes that ran as agent ``name`` (known by its MCP server key)."""
    key = "legatus_tools" if name == "legatus" else f"memoria_{name}"
    return [p for p in fake_cli.processes() if key in p.mcp_servers]


def fake_cli_config(castra_dir: Path, fake_cli: FakeCli, extra: str = "") -> Config:
    """A config whose agents run the fake CLI."""
    path = castra_dir.parent / "legio.toml"
    path.write_text(f'{extra}\n[claude]\ncli_path = "{fake_cli.path}"\n')
    return load_config(path)


def history_ids(prompt: str) -> list[str]:
    """Ids of the nuntii a prompt's <praetorium> block carried."""
    return NUNTIUS_ID.findall(prompt)


def rendered(app: LegioApp, reply: Reply) -> str:
    """A reply as every front-end shows it: its ⏰ mark and the agent's header, then its words."""
    return reply_text(reply, agent_header(app, reply.agent, reply.project, reply.model))


class Told(Quiet):
    """A test's front-end outside requests: notices to ``notify``, forge events to
    ``forge``, approvals asked by ``asking`` (changeable), the rest unseen."""

    def __init__(
        self,
        notify: Callable[[str], Awaitable[None]] | None = None,
        forge: Callable[[ForgeEvent], Awaitable[None]] | None = None,
        asking: Asker | None = None,
    ) -> None:
        self.notify, self.on_forge, self.asking = notify, forge, asking

    def asker(self) -> Asker | None:
        return self.asking

    async def notice(self, text: str) -> None:
        if self.notify is not None:
            await self.notify(text)

    async def forge(self, event: ForgeEvent) -> None:
        if self.on_forge is not None:
            await self.on_forge(event)
