"""Telegram's gestures for the bot: replies, quotes, edits, and a topic per agent.

- **Where a message points** (``pointer_of``): a reply to a message Legio sent or
  received is a reply to the nuntius it carries (every part of a split answer and each
  file are recorded by ``deliver``); Caesar's selected part (Telegram's ``quote``) is
  what he points at; a reply to a message Legio has no record of carries Telegram's copy
  of its words. A reply to a service message (a topic's creation, a pin) points at nothing.
- **Edits** (``on_edit``): Caesar's edited text or caption goes to ``LegioApp.edit_message``:
  a queued request is corrected, an answered one gets a correction, answered where the
  original was asked.
- **Topics** (``setup_topics``, threaded mode: ``getMe().has_topics_enabled``): each
  centurio gets one topic in each of Caesar's private chats, made once (recorded in the
  praetorium), made again when Telegram says it is gone and it is needed; a centurio added
  later gets one the next time topics are checked (each request). A message in an agent's
  topic goes to that agent (``lane``); one in any other topic to the Legatus, answered
  there. Every send of the request follows it there (``legio.frontends.telegram.lanes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from telegram import Bot, Message, Update
from telegram.constants import ChatType
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from legio.app import LegioApp, Topic
from legio.doors.talkdoor import ConversationDoor
from legio.doors.workdoor import WorkDoor
from legio.frontends.telegram.cardview import CardDesk
from legio.frontends.telegram.lanes import Lane, in_lane
from legio.frontends.telegram.sending import (
    origin_of,
    render,
    send_files,
    send_markdown,
    send_with_retries,
)
from legio.frontends.views import agent_header, reply_text
from legio.names import LEGATUS
from legio.request import Pointer, Reply

logger = logging.getLogger(__name__)

Work = Callable[..., Awaitable[None]]  # LegioBot._work(bot, chat_id, reply_to, run)
TOPIC_INTRO = "⚔️ {name}{description}\nWrite here to talk to {name}; its answers come here."


def is_service(message: Message) -> bool:
    """A message Telegram made itself (a topic's creation, a pin…): nothing to point at."""
    return bool(
        message.forum_topic_created
        or message.pinned_message
        or not (message.text or message.caption or message.effective_attachment)
    )


class Conversation:
    """Replies, edits and topics for ``LegioBot`` (see the module docstring)."""

    def __init__(self, app: Callable[[], LegioApp], work: Work, caesar_ids: frozenset[int]):
        self._app = app
        self._work = work
        self.caesar_ids = caesar_ids
        self.topics_on = False
        self._told_lost: set[tuple[int, int]] = set()
        self._topic_lock = asyncio.Lock()
        self.notice_bot: Bot | None = None  # says when a topic is gone
        self.cards = CardDesk(app, caesar_ids)  # work cards after turns on projects
        self.cards.lane_for = self.lane_for
        self.cards.work = work

    @property
    def app(self) -> LegioApp:
        return self._app()

    @property
    def facts(self) -> ConversationDoor:
        """The door's room for what Telegram's messages carry, topics and edits."""
        return self._app().conversation

    @property
    def room(self) -> WorkDoor:
        return self._app().work

    # ---------------------------------------------------------- answers, recorded

    async def deliver(self, bot: Bot, chat_id: int, reply: Reply, reply_to: int | None) -> None:
        """Send an answer; record which messages carry it (a reply to one points at it)."""
        text = reply_text(reply, agent_header(self.app, reply.agent, reply.project, reply.model))
        sent = await send_markdown(bot, chat_id, text, reply_to)
        if reply.seq is not None and sent:
            await self.facts.carried(reply.seq, chat_id, sent)

    async def deliver_files(self, bot: Bot, chat_id: int, reply: Reply) -> None:
        sent = await send_files(bot, chat_id, reply.agent, reply.files)
        if reply.seq is not None and sent:
            await self.facts.carried(reply.seq, chat_id, sent)

    async def dispatched(self, agent: str, text: str) -> None:
        """A centurio's answer to the Legatus's dispatch, shown silently in its own topic
        (threaded mode only: without topics the Legatus's answer says what it needs)."""
        bot = self.notice_bot
        if not self.topics_on or bot is None:
            return
        header = f"⚔️ {agent} — for the Legatus\n━━━━━━━━━━━━\n"
        for chat_id in sorted(self.caesar_ids):
            lane = await self.lane_for(bot, chat_id, agent)
            if lane.thread_id is None:
                continue
            with in_lane(lane):
                for chunk, entities in render(header + text):
                    await send_with_retries(
                        bot, chat_id, chunk, entities=entities or None, disable_notification=True
                    )

    # ---------------------------------------------------------- replies

    async def where(self, message: Message) -> tuple[Lane, Pointer | None]:
        """The lane ``message`` was written in, and what it points at."""
        lane = await self.lane_of(message)
        return lane, await self.pointer_of(message, lane)

    async def pointer_of(self, message: Message, lane: Lane | None = None) -> Pointer | None:
        """What ``message`` replies to, and the topic it is in (``lane``), as the engine
        understands them (or None)."""
        pointer = await self._replied(message)
        if lane is None or lane.name is None:
            return pointer
        return dataclasses.replace(pointer or Pointer(), topic=lane.name)

    async def _replied(self, message: Message) -> Pointer | None:
        quote = message.quote.text if message.quote else None
        target = message.reply_to_message
        if target is None:
            return Pointer(text=quote) if quote and message.external_reply else None
        if is_service(target) or (
            message.is_topic_message and (target.message_id == message.message_thread_id)
        ):
            return None  # in a topic, Telegram makes every message a "reply" to its start
        chat = message.chat_id
        seq = await self.facts.seq_of_message(chat, target.message_id)
        if seq is None:  # Caesar's own earlier message: its nuntius came from it
            seq = await self.facts.seq_of_origin(origin_of(chat, target.message_id))
        if seq is not None:
            return Pointer(seq=seq, quote=quote)
        words = target.text or target.caption or ""
        who = target.from_user.full_name if target.from_user else None
        if target.sender_chat is not None:
            who = target.sender_chat.title or who
        return Pointer(text=quote or words, sender=who) if (quote or words) else None

    # ---------------------------------------------------------- edits

    async def on_edit(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Caesar edited a message: the request it made is corrected (``Legatus.edit``)."""
        message = update.edited_message
        if message is None:
            return
        text = message.text or message.caption
        if text is None or text.lstrip().startswith("/"):
            return  # a command was answered already; a file without a caption has no words
        origin = origin_of(message.chat_id, message.message_id)
        lane = await self.lane_of(message)
        with in_lane(lane):
            await self._work(
                context.bot,
                message.chat_id,
                message.message_id,
                lambda watch: self.app.edit_message(origin, text, watch),
            )

    # ---------------------------------------------------------- topics

    async def lane_of(self, message: Message) -> Lane:
        """The lane ``message`` was written in: its topic and that topic's agent."""
        private = message.chat.type == ChatType.PRIVATE
        if private and self.topics_on:  # a centurio added since, a topic Caesar deleted
            await self.setup_topics(message.get_bot(), [message.chat_id])
        thread = message.message_thread_id if message.is_topic_message else None
        if thread is None:
            return Lane(message.chat_id)
        project = await self.facts.project_of_topic(message.chat_id, thread)
        start = message.reply_to_message  # in a topic: its creation, with its name
        made = start.forum_topic_created if start is not None else None
        name = made.name if made is not None else None
        if not private:
            return Lane(message.chat_id, thread, None, project, name)
        topics = await self.facts.topics(message.chat_id)
        agent = next((t.agent for t in topics if t.thread_id == thread), None)
        return Lane(message.chat_id, thread, agent, project, agent or name)

    async def on_project(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """``/project <name>`` in a topic: every request there is on that project;
        ``/project off`` ends it; ``/project`` says which."""
        message = update.effective_message
        if message is None or message.text is None:
            return
        words = message.text.split()[1:]
        thread = message.message_thread_id if message.is_topic_message else None
        names = self.room.project_names()
        listing = ", ".join(f"#{n}" for n in names) or "none ([projects.<name>] in legio.toml)"
        if thread is None:
            text = f"/project works inside a topic: its requests are then on a project ({listing})."
        elif not words:
            bound = await self.facts.project_of_topic(message.chat_id, thread)
            text = (
                f"This topic is on #{bound}."
                if bound
                else f"This topic is on no project ({listing})."
            )
        elif words[0].lower() in ("off", "none"):
            await self.facts.bind_project(message.chat_id, thread, None)
            text = "This topic is on no project now."
        elif (name := words[0].lstrip("#").lower()) in names:
            await self.facts.bind_project(message.chat_id, thread, name)
            text = (
                f"Every request in this topic is on #{name} now (a #name in a message still wins)."
            )
        else:
            text = f"{words[0]!r} is not a project. The projects: {listing}."
        with in_lane(Lane(message.chat_id, thread)):
            await send_with_retries(context.bot, message.chat_id, text)

    async def lane_for(self, bot: Bot, chat_id: int, agent: str) -> Lane:
        """Agent ``agent``'s own topic in ``chat_id`` (made if needed), else the chat."""
        if not self.topics_on or agent == LEGATUS or chat_id not in self.caesar_ids:
            return Lane(chat_id)
        await self.setup_topics(bot, [chat_id])
        for topic in await self.facts.topics(chat_id):
            if topic.agent == agent:
                return Lane(chat_id, topic.thread_id, agent)
        return Lane(chat_id)

    async def setup_topics(self, bot: Bot, chats: list[int] | None = None) -> None:
        """Give each centurio its topic in each of Caesar's private chats (once)."""
        if not self.topics_on:
            return
        async with self._topic_lock:
            roster = self.app.roster()
            for chat_id in chats or sorted(self.caesar_ids):
                have = {t.agent for t in await self.facts.topics(chat_id)}
                for name in roster.names:
                    if name not in have:
                        await self._make_topic(bot, chat_id, name)

    async def _make_topic(self, bot: Bot, chat_id: int, name: str) -> None:
        try:
            topic = await bot.create_forum_topic(chat_id, name)
        except TelegramError as e:
            logger.warning("could not make %s's topic in chat %s: %s", name, chat_id, e)
            return
        thread = topic.message_thread_id
        await self.facts.set_topic(Topic(chat_id, name, thread, name))
        prompt = self.app.roster().centuriones.get(name)
        description = f" — {prompt.description}" if prompt and prompt.description else ""
        intro = TOPIC_INTRO.format(name=name, description=description)
        with contextlib.suppress(TelegramError):  # a topic shows once it holds a message
            await send_with_retries(
                bot, chat_id, intro, message_thread_id=thread, disable_notification=True
            )
        logger.info("made %s's topic in chat %s (thread %s)", name, chat_id, thread)

    async def lost_topic(self, lane: Lane) -> None:
        """Telegram no longer knows ``lane``'s topic (Caesar deleted it): forget it (made
        again when next needed) and say so, once per topic."""
        if lane.thread_id is None:
            return
        await self.facts.forget_topic(lane.chat_id, lane.thread_id)
        key = (lane.chat_id, lane.thread_id)
        if key in self._told_lost:
            return
        self._told_lost.add(key)
        who = f"{lane.agent}'s topic" if lane.agent else "That topic"
        if self.notice_bot is None:
            return
        with in_lane(None), contextlib.suppress(TelegramError):
            await send_with_retries(
                self.notice_bot,
                lane.chat_id,
                f"⚠️ {who} is gone, so its answers come here in the main chat; "
                "it is made again when it is next needed.",
            )
