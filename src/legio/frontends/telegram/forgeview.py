"""The forge in Telegram: one line in the agent's lane per forge event, with 🛠 Fix (CI
red) or 💬 Address (changes requested).

``ForgeView.on_event`` is subscribed with ``LegioApp.follow_forge`` at start-up. Its line
(``legio.frontends.forgelines.event_line``) goes to Caesar's private chat, in the agent's
topic when topics are on. A tap on the button sends the agent an ordinary request on the
project, in its lane (``LegioApp.forge_request``: the failing jobs' log tails or the
reviewers' comments, bounded, escaped and marked as the forge's words), run like any
request. Button data ``fx:<n>`` point at events kept in memory (the last ``KEPT``); a
button from before a restart says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from legio.app import LegioApp
from legio.frontends.forgelines import event_line
from legio.frontends.telegram.lanes import Lane, in_lane
from legio.frontends.telegram.mergeview import MergeDesk, merge_button
from legio.frontends.telegram.sending import send_with_retries
from legio.request import ForgeEvent, Reply, Watch

logger = logging.getLogger(__name__)

KEPT = 200
PREFIX = "fx"
BUTTONS = {"ci_failed": "🛠 Fix", "changes_requested": "💬 Address"}
Work = Callable[[Bot, int, int, Callable[[Watch], Awaitable[list[Reply]]]], Awaitable[None]]
LaneFor = Callable[[Bot, int, str], Awaitable[Lane]]


class ForgeView:
    """See the module docstring."""

    def __init__(
        self, bot: Bot, app: LegioApp, chat_id: int | None, lane_for: LaneFor, work: Work
    ) -> None:
        self.bot = bot
        self.app = app
        self.room = app.work  # its events' requests (legio.doors.workdoor)
        self.chat_id = chat_id
        self.lane_for = lane_for
        self.work = work
        self.events: OrderedDict[str, ForgeEvent] = OrderedDict()
        self._ids = itertools.count(1)
        self.running: set[asyncio.Task[None]] = set()  # requests sent without a tap
        self.merging = MergeDesk(self.room)  # ✅ Merge on a ✅ CI line

    @staticmethod
    def owns(data: str | None) -> bool:
        return (data or "").startswith(PREFIX + ":") or MergeDesk.owns(data)

    async def on_event(self, event: ForgeEvent) -> None:
        """Post the event's line in the agent's lane (with its button, if any)."""
        if self.chat_id is None:
            return
        markup = None
        label = BUTTONS.get(event.kind)
        auto = event.kind == "changes_requested" and self.room.forge_follows_reviews()
        if label is not None and not auto:
            key = str(next(self._ids))
            self.events[key] = event
            while len(self.events) > KEPT:
                self.events.popitem(last=False)
            button = InlineKeyboardButton(label, callback_data=f"{PREFIX}:{key}")
            markup = InlineKeyboardMarkup([[button]])
        elif event.kind == "ci_passed":  # ✅ Merge: asks once more, showing the title
            markup = InlineKeyboardMarkup([[merge_button(event.project, event.number)]])
        lane = await self.lane_for(self.bot, self.chat_id, event.agent)
        with in_lane(lane):
            try:
                await send_with_retries(
                    self.bot, self.chat_id, event_line(event), reply_markup=markup
                )
            except TelegramError as e:
                logger.warning("could not post a forge event (%s): %s", event.kind, e)
                return
            if auto:  # [forge] follow_reviews: Address without a tap (not holding CI up)
                task = asyncio.create_task(self._address(self.chat_id, event))
                self.running.add(task)
                task.add_done_callback(self.running.discard)

    async def _address(self, chat_id: int, event: ForgeEvent) -> None:
        request = self.room.forge_request(event)
        with in_lane(await self.lane_for(self.bot, chat_id, event.agent)):
            await self.work(
                self.bot, chat_id, 0, lambda watch: self.app.handle_message(request, watch)
            )

    async def on_tap(self, query: CallbackQuery) -> None:
        """🛠 Fix / 💬 Address: the agent gets the request, in its lane, on the project."""
        if MergeDesk.owns(query.data):
            await self.merging.on_tap(query)
            return
        key = (query.data or "").partition(":")[2]
        event = self.events.pop(key, None)
        if event is None or query.message is None:
            await query.answer("This button is from before a restart, or was used already.")
            return
        await query.answer(f"Sent to {event.agent}.")
        chat_id = query.message.chat.id
        with contextlib.suppress(TelegramError):
            await query.edit_message_reply_markup(None)  # one tap, one request
        lane = await self.lane_for(self.bot, chat_id, event.agent)
        request = self.room.forge_request(event)
        with in_lane(lane):
            await self.work(
                self.bot,
                chat_id,
                query.message.message_id,
                lambda watch: self.app.handle_message(request, watch),
            )
