"""What belongs to no request, in Telegram: the bot's ``Events`` (``legio.audience``),
attached once at start-up. Each kind goes to the part that shows it: approvals outside a
request and notices to the asker, a dispatch's answer to its agent's topic, cards to the
card desk, forge events to their one line, a stuck turn with its buttons, a failed backup
or the digest, and a scheduled job's run or a request made on the cockpit (its 🛠 Fix)
shown like a request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from telegram import Bot

from legio.app import Job, JobRun
from legio.audience import Operation, Quiet
from legio.frontends.telegram.asking import TelegramAsker
from legio.frontends.telegram.cardview import CardDesk
from legio.frontends.telegram.forgeview import ForgeView
from legio.frontends.telegram.opsview import show_operation
from legio.frontends.telegram.stuckview import StuckView
from legio.request import Asker, ForgeEvent, Stuck, WorkCard


@dataclass
class TelegramEvents(Quiet):
    """The Telegram bot's parts, told what belongs to no request."""

    bot: Bot
    chats: list[int]  # Caesar's private chats
    asking: TelegramAsker
    cards: CardDesk
    stuck_view: StuckView
    forge_view: ForgeView
    on_dispatch: Callable[[str, str], Awaitable[None]]  # its agent's topic
    present: Callable[[Job, JobRun], Awaitable[None]]  # a job's run, like a request
    present_request: Callable[[str, JobRun], Awaitable[None]]  # in its agent's lane

    def asker(self) -> Asker | None:
        return self.asking

    async def notice(self, text: str) -> None:
        await self.asking.notify(text)

    async def dispatched(self, agent: str, text: str) -> None:
        await self.on_dispatch(agent, text)

    async def card(self, card: WorkCard, new: bool) -> None:
        await self.cards.update(card, new)

    async def forge(self, event: ForgeEvent) -> None:
        await self.forge_view.on_event(event)

    async def stuck(self, stuck: Stuck) -> None:
        await self.stuck_view.show(stuck)

    async def operation(self, event: Operation) -> None:
        await show_operation(self.bot, self.chats, event)

    async def job(self, job: Job, run: JobRun) -> bool:
        await self.present(job, run)
        return True

    async def requested(self, agent: str, run: JobRun) -> bool:
        await self.present_request(agent, run)
        return True
