"""Which model and effort each agent runs on: its session's and one request's.

``/model vorenus opus`` and ``/effort vorenus high`` choose for the agent's session until
changed back with ``default``; they are kept in the praetorium (``agent_choices``), so a
restart keeps them. ``@vorenus:opus …`` chooses for that one request: the turn runs on
that model (``ClaudeSDKClient.set_model``, a control request to the running CLI) and the
next turn switches back. A request's model is kept in the praetorium (``request_models``):
``/retry`` after a restart runs it on that model again (``recall``), and 🔀 Try again's
"same model" is the one it was asked on (``asked``). A name is a key of ``legio.toml``'s
``[models]`` (id and price); an unknown one is refused with the list. Effort is the CLI's
``--effort``, fixed when its process starts: a changed effort restarts the CLI, resuming
the same session.

When no model is configured, the bundled CLI runs on its own default (an opus model,
PROTOCOLS.md): switching back from a one-request model then sets ``RESTORE`` explicitly.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime

from legio.config import Config
from legio.sessions.client import AgentSession
from legio.sessions.spec import AgentSpec
from legio.store.praetorium import Praetorium

logger = logging.getLogger(__name__)

EFFORTS = ("low", "medium", "high")
DEFAULT = "default"  # /model vorenus default: back to its prompt's or legio.toml's model
ONCE_KEPT = 1000  # one-request models whose turn has not come yet
RESTORE = "opus"  # the [models] entry the CLI's own default is (when none is configured)


class Choices:
    """Every agent's chosen model and effort; see the module docstring."""

    def __init__(self, config: Config, praetorium: Praetorium) -> None:
        self.config = config
        self.praetorium = praetorium
        self._models: dict[str, str] = {}  # agent -> [models] name, for its session
        self._efforts: dict[str, str] = {}  # agent -> effort, for its session
        self._once: dict[tuple[str, int], str] = {}  # (agent, nuntius seq) -> [models] name

    @property
    def names(self) -> list[str]:
        return list(self.config.models)

    def refusal(self, name: str) -> str | None:
        """Why ``name`` is no model Legio knows (with the list), or None."""
        if name.lower() in self.config.models:
            return None
        known = ", ".join(self.names) or "none"
        return (
            f"No model named {name[:40]!r}. Known models: {known} "
            "(add more under [models] in legio.toml)."
        )

    async def load(self) -> None:
        """Read the choices a restart kept."""
        async with self.praetorium.connection.execute(
            "SELECT agent, model, effort FROM agent_choices"
        ) as cursor:
            for row in await cursor.fetchall():
                if row["model"] and row["model"] in self.config.models:
                    self._models[row["agent"]] = row["model"]
                if row["effort"] in EFFORTS:
                    self._efforts[row["agent"]] = row["effort"]

    async def choose(self, agent: str, model: str | None = None, effort: str | None = None) -> None:
        """``agent``'s session model and/or effort (``DEFAULT``: none chosen), kept."""
        if model is not None:
            if model == DEFAULT:
                self._models.pop(agent, None)
            else:
                self._models[agent] = model.lower()
        if effort is not None:
            if effort == DEFAULT:
                self._efforts.pop(agent, None)
            else:
                self._efforts[agent] = effort
        await self.praetorium.connection.execute(
            "INSERT INTO agent_choices (agent, model, effort, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (agent) DO UPDATE SET model = excluded.model, "
            "effort = excluded.effort, updated_at = excluded.updated_at",
            (
                agent,
                self._models.get(agent),
                self._efforts.get(agent),
                datetime.now(UTC).isoformat(),
            ),
        )
        await self.praetorium.connection.commit()

    async def once(self, agent: str, seq: int, model: str) -> None:
        """``agent``'s turn for nuntius ``seq`` runs on ``model`` (a [models] name), kept."""
        self._once[(agent, seq)] = model.lower()
        while len(self._once) > ONCE_KEPT:  # requests stopped before their turn came
            self._once.pop(next(iter(self._once)))
        await self.praetorium.connection.execute(
            "INSERT OR REPLACE INTO request_models (seq, agent, model) VALUES (?, ?, ?)",
            (seq, agent, model.lower()),
        )
        await self.praetorium.connection.commit()

    async def asked(self, agent: str, seq: int) -> str | None:
        """The model ``agent`` was asked to answer nuntius ``seq`` on (a [models] name
        legio.toml still has), or None: its session's."""
        async with self.praetorium.connection.execute(
            "SELECT model FROM request_models WHERE seq = ? AND agent = ?", (seq, agent)
        ) as cursor:
            row = await cursor.fetchone()
        name = str(row["model"]) if row is not None else None
        return name if name in self.config.models else None

    async def recall(self, agent: str, seq: int) -> None:
        """Run ``agent``'s next turn for nuntius ``seq`` on the model it was asked on
        (``/retry``: a restart or a hold lost it)."""
        name = await self.asked(agent, seq)
        if name is not None:
            self._once[(agent, seq)] = name

    def chosen(self, agent: str) -> tuple[str | None, str | None]:
        """``agent``'s session model name and effort, if chosen."""
        return self._models.get(agent), self._efforts.get(agent)

    def apply(self, spec: AgentSpec, seq: int) -> AgentSpec:
        """``spec`` with this turn's model and effort: the request's, else the session's,
        else its own (frontmatter, legio.toml)."""
        name = self._once.pop((spec.name, seq), None) or self._models.get(spec.name)
        model = self.config.models[name].id if name in self.config.models else spec.model
        effort = self._efforts.get(spec.name, spec.effort)
        return dataclasses.replace(spec, model=model, effort=effort)

    def short(self, model: str | None) -> str | None:
        """The [models] name of model id ``model`` (the id itself if it has none)."""
        if model is None:
            return None
        for name, choice in self.config.models.items():
            if model in (choice.id, name):
                return name
        return model

    async def switch(self, session: AgentSession, spec: AgentSpec) -> None:
        """Put the live ``session`` on ``spec``'s model before its query (a control
        request: the CLI keeps running); back to an explicit model from a one-turn one."""
        if session.model == spec.model:
            return
        target = spec.model
        if target is None:  # the CLI's own default: named explicitly (PROTOCOLS.md)
            restore = self.config.models.get(RESTORE)
            target = restore.id if restore is not None else RESTORE
        if session.model == target:
            return
        await session.client.set_model(target)
        logger.info("%s: model %s -> %s", spec.name, session.model, target)
        session.model = target

    async def command(self, kind: str, args: str, agents: list[str]) -> str:
        """``/model <agent> <name>|default`` or ``/effort <agent> low|medium|high|default``
        (``kind``: "model" or "effort"); with only an agent, its choice now."""
        words = args.split()
        options = [*(self.names if kind == "model" else EFFORTS), DEFAULT]
        usage = f"/{kind} <agent> {'|'.join(options)}"
        if not words:
            return f"Usage: {usage} (agents: {', '.join(agents)})."
        agent = words[0].lower()
        if agent not in agents:
            shown = words[0][:40]
            return f"No agent named {shown!r}. Use {usage} with one of: {', '.join(agents)}."
        model, effort = self.chosen(agent)
        now = model if kind == "model" else effort
        if len(words) == 1:
            return f"{agent}'s {kind}: {now or 'its default'}. Change it with {usage}."
        value = words[1].lower()
        if kind == "model" and value != DEFAULT and self.refusal(value):
            return f"{self.refusal(value)} Use {usage}."
        if kind == "effort" and value not in options:
            return f"No effort {words[1][:20]!r}: use {usage}."
        if kind == "model":
            await self.choose(agent, model=value)
        else:
            await self.choose(agent, effort=value)
        if value == DEFAULT:
            return f"{agent} is back on its default {kind}."
        when = "its next request" if kind == "model" else "its next request (its CLI restarts)"
        return f"{agent}'s {kind} is now {value}, from {when} on; it stays after a restart."
