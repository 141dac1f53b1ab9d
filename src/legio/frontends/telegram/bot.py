"""The Telegram front-end (python-telegram-bot): Caesar only, answers rendered, never blocked.

The modules of this package are named relative to it (``admission`` is
``legio.frontends.telegram.admission``):

- Only ``telegram.caesar_ids`` are served, in their private chats (and the groups of
  ``telegram.allowed_chats``; admin commands stay private): every other update is dropped
  before any handler runs (``admission``), nothing stored, the refusal logged once. A
  command for another bot is ignored. No message shows a link preview.
- Every update is stamped in arrival order before its handler runs (``LegioApp.receive``),
  so a ``/stop`` ends what came before it even if that message's handler has not started.
- Text, ``/retry``, ``/compact``, ``/context`` and the project commands run as
  non-blocking handlers, so other admin commands answer at once while agents work.
- Files (``downloads``) are stored, then routed like text (the caption is the message);
  agents' files follow their answer. Replies, quotes, edits and a topic per agent:
  ``conversation``; the topic a request's messages go to: ``lanes``. While agents work:
  ``status``, ``drafts``.
- Answers: rendered and split by ``sending``; voice notes heard first: ``hearing``.
- The forge's events (CI, reviews) posted in the agent's lane with 🛠 Fix / 💬 Address:
  ``forgeview``.
- A turn gone silent: said with Stop and Keep waiting by ``stuckview``.
- ``serving`` builds the Application (every handler) and runs the bot, stopping it in
  order: polling, grace period, interrupt, engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from telegram import Bot, BotCommand, Message, Update
from telegram.constants import ChatType
from telegram.error import TelegramError
from telegram.ext import (
    Application,
    ApplicationHandlerStop,
    ContextTypes,
)

from legio.app import Job, JobRun, LegioApp
from legio.config import Config
from legio.frontends.admin import COMMANDS, Admin, parse_retry
from legio.frontends.telegram.admission import Admission, addressed_elsewhere, forwarded_from
from legio.frontends.telegram.asking import TelegramAsker
from legio.frontends.telegram.cockpitview import offer, send_button
from legio.frontends.telegram.conversation import Conversation
from legio.frontends.telegram.diffs import diff_page, diff_pictures
from legio.frontends.telegram.downloads import UNSUPPORTED, Albums, accept, fetch, resume_pending
from legio.frontends.telegram.drafts import DraftSupport, LiveView
from legio.frontends.telegram.events import TelegramEvents
from legio.frontends.telegram.forgeview import ForgeView
from legio.frontends.telegram.hearing import hear
from legio.frontends.telegram.lanes import Lane, LaneBot, in_lane
from legio.frontends.telegram.reactions import Reactions
from legio.frontends.telegram.sending import (
    NO_PREVIEW,
    SendChains,
    chat_of,
    origin_of,
    render,
    send_pages,
    send_with_retries,
)
from legio.frontends.telegram.status import StatusBoard, Typing
from legio.frontends.telegram.steermarks import SteerMarks
from legio.frontends.telegram.stuckview import StuckView
from legio.frontends.views import agent_header, interruption_notice
from legio.request import UNWATCHED, Callbacks, Reply, Request, Watch, WorkCard
from legio.timing import begin

if TYPE_CHECKING:  # the web framework is imported only when the cockpit is on
    from legio.frontends.web.server import Cockpit

logger = logging.getLogger(__name__)

AppFactory = Callable[[], Awaitable[LegioApp]]
ARRIVALS_KEPT = 1000  # receipts of updates no handler took (edits, unknown kinds): forgotten


def makes_request(update: Update) -> bool:
    """Whether ``update`` may become a request to agents (a message that is no command)."""
    message = update.message
    if message is None:
        return False
    if message.text is not None:
        return not message.text.startswith("/")
    return message.effective_attachment is not None


# ------------------------------------------------------------------ handlers


class LegioBot:
    """The handlers; ``startup``/``shutdown`` open and close the engine (``LegioApp``)."""

    def __init__(self, config: Config, app_factory: AppFactory) -> None:
        self.config = config
        self.app_factory = app_factory
        self.caesar_ids = frozenset(config.telegram.caesar_ids)
        self._app: LegioApp | None = None
        self._admin: Admin | None = None
        self.admission = Admission(config.telegram.caesar_ids, config.telegram.allowed_chats)
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.chains = SendChains()
        self._typing: Typing | None = None
        self._bot: Bot | None = None
        self.drafts = DraftSupport(config.telegram.stream)
        self.downloads: set[asyncio.Task[Any]] = set()  # cancelled at shutdown, resumed at start
        self.albums = Albums()
        self.asker: TelegramAsker | None = None
        self.lanes: dict[str, Lane] = {}  # each working agent's request's topic (stuck turns)
        self.forge: ForgeView | None = None
        self.cockpit: Cockpit | None = None  # the web page ([web] listen)
        self.stuck: StuckView | None = None  # stuck turns (legio.frontends.telegram.stuckview)
        self.marks = SteerMarks()  # ➕ a message joined a running turn; ⏭ after it
        self.talk = Conversation(lambda: self.app, self._work, self.caesar_ids)  # replies, topics
        # each update's receipt, taken in the gate in the order updates arrive (handlers run
        # as tasks, so a later /stop may run before an earlier message's handler starts)
        self.arrivals: dict[int, int] = {}
        self.reactions: Reactions | None = None  # 👀/👌 marks, Caesar's reactions

    @property
    def app(self) -> LegioApp:
        assert self._app is not None, "LegioBot.startup() was not called"
        return self._app

    @property
    def admin(self) -> Admin:
        assert self._admin is not None, "LegioBot.startup() was not called"
        return self._admin

    async def startup(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Open the engine and show the command menu."""
        self._app = await self.app_factory()
        self._admin = Admin(self._app)
        self._bot = application.bot
        chats, bot = sorted(self.caesar_ids), application.bot
        # approvals, questions and plans as buttons
        self.asker = TelegramAsker(bot, chats, self._app, self._app.conversation)
        self.talk.cards.bot = bot
        self.reactions = Reactions(
            self.config.telegram.reactions, self._app.conversation, self.talk.cards
        )
        self.stuck = StuckView(bot, chats, self._app, self.lanes)  # Stop or Keep waiting
        chat = min(self.caesar_ids, default=None)  # CI and reviews: ✅/❌ in the agent's lane
        self.forge = ForgeView(bot, self._app, chat, self.talk.lane_for, self._work)
        self.events = TelegramEvents(
            bot,
            chats,
            self.asker,
            self.talk.cards,
            self.stuck,
            self.forge,
            self.talk.dispatched,
            self.present_job,
            self.present_request,
        )
        await self._app.attach(self.events)  # what belongs to no request, from now on
        if isinstance(application.bot, LaneBot):  # threaded mode: a topic per centurio
            application.bot.watch(self.talk.lost_topic)
            self.talk.notice_bot = application.bot
            self.talk.topics_on = bool(application.bot.bot.has_topics_enabled)
        await self.talk.setup_topics(application.bot)
        commands = [BotCommand(c.name, c.description[:256]) for c in COMMANDS]
        try:
            await application.bot.set_my_commands(commands)
        except TelegramError as e:
            logger.warning("could not set the command menu: %s", e)
        try:
            await resume_pending(application.bot, self._app.inbox)  # files a restart cut off
        except Exception:
            logger.exception("could not finish the downloads a restart interrupted")
        await self.tell_interruptions(application.bot)
        await self.app.start_jobs()  # after the interruptions were noted
        if self.config.web.listen:  # the cockpit: its web framework imported only now
            from legio.frontends.web.server import open_cockpit

            self.cockpit = await open_cockpit(self._app, self.config, application.bot.token)
        if self.cockpit is not None:  # [web]: the menu button, ↗ Open on work cards
            await offer(application.bot, sorted(self.caesar_ids), self.talk.cards, self.config)

    async def present_job(self, job: Job, run: JobRun) -> None:
        """A scheduled job's run, shown like a request in the chat it was set from."""
        chat = chat_of(job.owner_chat) or min(self.caesar_ids, default=None)
        if chat is None or self._bot is None:
            await run(UNWATCHED)
            return
        with in_lane(await self.talk.lane_for(self._bot, chat, job.target)):  # its topic
            await self._work(self._bot, chat, 0, run)

    async def present_request(self, agent: str, run: JobRun) -> None:
        """A request Caesar made on the cockpit (🛠 Fix), shown like one of his in the
        agent's lane of his private chat."""
        chat = min(self.caesar_ids, default=None)
        if chat is None or self._bot is None:
            await run(UNWATCHED)
            return
        with in_lane(await self.talk.lane_for(self._bot, chat, agent)):
            await self._work(self._bot, chat, 0, run)

    async def tell_interruptions(self, bot: Bot) -> None:
        """Tell Caesar, once, about requests the last run never answered."""
        for nuntius, agents in await self.app.notice_interruptions():
            chat = chat_of(nuntius.origin)
            served = chat in self.caesar_ids or chat in self.admission.allowed_chats
            chats = [chat] if chat is not None and served else sorted(self.caesar_ids)
            for chat_id in chats:
                try:
                    await send_with_retries(
                        bot, chat_id, interruption_notice(nuntius.seq, nuntius.text, agents)
                    )
                except TelegramError as e:
                    logger.warning("could not tell chat %s about #%s: %s", chat_id, nuntius.seq, e)

    async def stop_all(self) -> None:
        """Interrupt every agent that is working (shutdown after the grace period)."""
        if self._app is not None:
            await self._app.stop_all()

    async def shutdown(self) -> None:
        if self.cockpit is not None:
            await self.cockpit.close()  # before the engine it shows
        if self._app is not None:
            await self._app.close()
            self._app = None

    # ---------------------------------------------------------- gate

    async def gate(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Drop every update but Caesar's in his chats (``legio.frontends.telegram.admission``)."""
        if not self.admission.admits(update):
            if isinstance(update, Update) and update.callback_query is not None:
                with contextlib.suppress(TelegramError):  # a tap on Caesar's buttons
                    await update.callback_query.answer("Not yours.")
            raise ApplicationHandlerStop
        if isinstance(update, Update) and makes_request(update):  # the sign, before all else:
            marked = self.reactions is not None and self.reactions.first_sign(context.bot, update)
            if not marked:  # 👀 when reactions are on, else a typing action
                self.sign(context.bot, update)
        if isinstance(update, Update) and self._app is not None:
            self.arrivals[update.update_id] = self.app.receive(request=makes_request(update))
            while len(self.arrivals) > ARRIVALS_KEPT:  # a handler that never took its own
                self.app.settle(self.arrivals.pop(next(iter(self.arrivals))))

    def sign(self, bot: Bot, update: Update) -> None:
        """A typing action in the message's chat (and topic) at once: Legio took it."""
        message = update.message
        if message is None:
            return
        if self._typing is None:
            self._typing = Typing(bot)
        thread = message.message_thread_id if message.is_topic_message else None
        self._typing.sign(message.chat_id, thread)

    def arrival(self, update: Update) -> int | None:
        """The receipt the gate gave ``update`` (taken once)."""
        return self.arrivals.pop(update.update_id, None)

    async def _private_only(self, bot: Bot, message: Message) -> bool:
        """Admin commands answer in Caesar's private chat only; say so in a group."""
        if message.chat.type == ChatType.PRIVATE:
            return True
        await send_with_retries(
            bot, message.chat_id, "Admin commands work in the private chat with the bot only."
        )
        return False

    # ---------------------------------------------------------- Caesar

    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A message for the Legatus or the @mentioned centuriones."""
        receipt = self.arrival(update)
        try:
            await self._on_text(update, context, receipt)
        finally:
            if receipt is not None:
                self.app.settle(receipt)

    async def on_queue(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """/queue <message>: after the agent's running turn (⏭), never joining it."""
        receipt = self.arrival(update)
        try:
            await self._on_text(update, context, receipt, queue=True)
        finally:
            if receipt is not None:
                self.app.settle(receipt)

    async def on_plan(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """/plan <message>: the agent plans first; its plan comes with Go/Change/Drop.
        ``/plan``, ``/plan <agent>``, ``/plan <agent> on|off``: who plans every request first."""
        receipt = self.arrival(update)
        message = update.effective_message
        try:
            words = (message.text or "").split(maxsplit=1) if message is not None else []
            toggled = await self.admin.plan_first(words[1] if len(words) > 1 else "")
            if message is not None and toggled is not None:
                with in_lane(await self.talk.lane_of(message)):
                    await send_pages(context.bot, message.chat_id, toggled)
                return
            await self._on_text(update, context, receipt, plan=True)
        finally:
            if receipt is not None:
                self.app.settle(receipt)

    async def _on_text(
        self,
        update: Update,
        context: ContextTypes.DEFAULT_TYPE,
        receipt: int | None,
        queue: bool = False,
        plan: bool = False,
    ) -> None:
        message = update.effective_message
        if message is None or message.text is None:
            return
        words = (queue or plan) and " " in message.text
        text = message.text.split(maxsplit=1)[1] if words else message.text
        if self.asker is not None and await self.asker.take_text(message):
            if self.reactions is not None:  # taken: 👌
                await self.reactions.done(context.bot, message.chat_id, message.message_id)
            return  # a deny reason, or the answer to an agent's question
        origin = origin_of(message.chat_id, message.message_id)
        source = forwarded_from(message)
        lane, pointer = await self.talk.where(message)
        with begin("update received"), in_lane(lane):
            await self._work(
                context.bot,
                message.chat_id,
                message.message_id,
                lambda watch: self.app.handle_message(
                    Request(
                        text,
                        origin=origin,
                        forwarded_from=source,
                        pointer=pointer,
                        lane=lane.agent,
                        project=lane.project,
                        receipt=receipt,
                        queue=queue,
                        plan=plan,
                    ),
                    watch,
                ),
            )

    async def on_file(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A photo, document, audio, voice note or video (an album: all of them, as one
        request): stored, then routed like text."""
        message = update.effective_message
        receipt = self.arrival(update)
        if message is None:
            return
        self.in_flight += 1  # a shutdown waits for a download, then cancels it
        self.idle.clear()
        try:
            accepted = await accept(message, self.app.inbox)  # recorded at once: nothing is lost
            if isinstance(accepted, str):
                await send_with_retries(context.bot, message.chat_id, accepted)
                accepted = None
            parts = await self.albums.collect(message, accepted)
            files = [file for _, file in parts if file is not None]
            if not files:
                return  # an album's later part, refused, or delivered twice
            first = parts[0][0]
            fetched = await fetch(context.bot, files, self.app.inbox, self.downloads)
            if fetched is None:
                return  # cancelled by a shutdown: resumed at the next start
            received, refusals = fetched
            for refusal in refusals:
                await send_with_retries(context.bot, message.chat_id, refusal)
            if not received:
                return
            text = "\n".join(m.caption for m, _ in parts if m.caption)  # an album's captions
            lane, pointer = await self.talk.where(first)
            with in_lane(lane):
                text = await hear(context.bot, self.app.inbox, first.chat_id, received, text)  # 🎤
                await self._work(
                    context.bot,
                    first.chat_id,
                    first.message_id,
                    lambda watch: self.app.handle_message(
                        Request(
                            text,
                            origin=files[0].origin,
                            attachments=tuple(received),
                            forwarded_from=files[0].forwarded_from,
                            pointer=pointer,
                            lane=lane.agent,
                            project=lane.project,
                            receipt=receipt,
                        ),
                        watch,
                    ),
                )
        finally:
            if receipt is not None:
                self.app.settle(receipt)
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()

    async def on_retry(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """/retry [n]: run again what a restart interrupted, answered like any request."""
        message = update.effective_message
        if message is None or message.text is None:
            return
        if not await self._private_only(context.bot, message):
            return
        parts = message.text.split(maxsplit=1)
        seq = parse_retry(parts[1] if len(parts) > 1 else "")
        if isinstance(seq, str):
            await send_with_retries(context.bot, message.chat_id, seq)
            return
        self.sign(context.bot, update)  # a request, as a message is
        await self._work(
            context.bot,
            message.chat_id,
            message.message_id,
            lambda watch: self.app.retry(seq, watch),
        )

    async def on_publish(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """/publish <agent> <project>: what would be posted, with 🚀 Post / ✖ Cancel."""
        message = update.effective_message
        if message is None or message.text is None:
            return
        if addressed_elsewhere(message.text, context.bot.username):
            return
        if not await self._private_only(context.bot, message):
            return
        parts = message.text.split(maxsplit=1)
        publishing = self.talk.cards.publishing
        await publishing.command(context.bot, message.chat_id, parts[1] if len(parts) > 1 else "")

    async def _work(
        self,
        bot: Bot,
        chat_id: int,
        reply_to: int,
        run: Callable[[Watch], Awaitable[list[Reply]]],
    ) -> None:
        """Run agents under drafts or a status message; send each reply as soon as it exists."""
        if self._typing is None:
            self._typing = Typing(bot)
        self.in_flight += 1
        self.idle.clear()
        if self.reactions is not None:  # 👀 (once: a text's came at admission)
            self.reactions.taken(bot, chat_id, reply_to)
        replies: list[Reply] = []
        sends: list[asyncio.Task[None]] = []
        live = LiveView(
            bot,
            chat_id,
            self.drafts,
            StatusBoard(bot, chat_id),
            self._typing.shown,
            render,
            functools.partial(agent_header, self.app),
        )
        live.lanes = self.lanes  # where a stuck turn of its agents is said
        asking = self.asker.within(live.lane) if self.asker else None  # in its topic
        try:
            async with live:

                async def send(reply: Reply) -> None:
                    await live.finish(reply.agent)
                    text = lambda: self.talk.deliver(bot, chat_id, reply, reply_to)  # noqa: E731
                    sends.append(self.chains.enqueue(chat_id, reply.agent, text))
                    if reply.files:  # after the text, in the agent's order
                        files = lambda: self.talk.deliver_files(bot, chat_id, reply)  # noqa: E731
                        sends.append(self.chains.enqueue(chat_id, reply.agent, files))

                async def card(card: WorkCard) -> None:  # silently, after its agent's answer
                    show = lambda: self.talk.cards.send(bot, chat_id, card)  # noqa: E731
                    sends.append(self.chains.enqueue(chat_id, card.agent, show))

                try:
                    marks = self.marks.shower(bot, chat_id, reply_to)  # ➕ joined a turn
                    watch: Watch = Callbacks(live.update, live.stream, send, card, asking, marks)
                    seen = self.cockpit.observe(watch) if self.cockpit else watch  # the page too
                    replies = await run(seen)
                finally:
                    for result in await asyncio.gather(*sends, return_exceptions=True):
                        if isinstance(result, BaseException):
                            logger.error("a reply could not be sent", exc_info=result)
                    if self.reactions is not None:  # 👌 once answered
                        await self.reactions.answered(bot, chat_id, reply_to, replies)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()

    async def on_cockpit(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """``/cockpit``: a button that opens the cockpit (in Caesar's private chat)."""
        message = update.effective_message
        if message is None or not await self._private_only(context.bot, message):
            return
        await send_button(message, self.config.web.public_url if self.cockpit else "")

    async def on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """An admin command: answered at once, even while agents work."""
        message = update.effective_message
        if message is None or message.text is None:
            return
        if addressed_elsewhere(message.text, context.bot.username):
            return  # /cmd@other_bot: for another bot in the same chat
        if not await self._private_only(context.bot, message):
            return
        if self._typing is None:
            self._typing = Typing(context.bot)
        slow = message.text.lstrip().lower().startswith("/compact")  # a model turn
        receipt = self.arrival(update)
        async with self._typing.shown(message.chat_id) if slow else contextlib.nullcontext():
            pages = await self.admin.run(message.text, receipt)
        await send_pages(context.bot, message.chat_id, pages, diff_pictures, diff_page)  # /diff

    async def on_callback(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A button tap: an approval, an agent's question, Stop, or a work card's."""
        receipt = self.arrival(update)
        query = update.callback_query
        stuck = query is not None and self.stuck is not None and StuckView.takes(query)
        mine = query is not None and (query.data or "").startswith(("card:", "pub:"))
        forge = query is not None and self.forge is not None and self.forge.owns(query.data)
        if (mine or forge) and receipt is not None:
            self.app.settle(receipt)  # a tap that stops nothing
        if query is not None and SteerMarks.takes(query):
            if receipt is not None:
                self.app.settle(receipt)
            await self.marks.on_tap(query)  # ⏭ after this turn
        elif query is not None and stuck and self.stuck is not None:
            await self.stuck.on_tap(query, receipt)
        elif query is not None and mine:
            await self.talk.cards.on_tap(query)
        elif query is not None and forge and self.forge is not None:
            await self.forge.on_tap(query)  # 🛠 Fix / 💬 Address
        elif query is not None and self.asker is not None:
            await self.asker.on_tap(query, receipt)

    async def on_reaction(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Caesar reacted to a message of Legio's (``reactions``)."""
        receipt = self.arrival(update)
        if receipt is not None:
            self.app.settle(receipt)  # a reaction stops nothing
        if self.reactions is not None:
            await self.reactions.on_reaction(context.bot, update)

    async def on_other(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Stickers, locations, contacts…: say what the bot can take."""
        receipt = self.arrival(update)
        if receipt is not None:
            self.app.settle(receipt)
        message = update.effective_message
        if message is not None:
            await send_with_retries(context.bot, message.chat_id, UNSUPPORTED)

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Log with the traceback, then tell Caesar briefly."""
        logger.error("error while handling an update", exc_info=context.error)
        user = update.effective_user if isinstance(update, Update) else None
        chat = update.effective_chat if isinstance(update, Update) else None
        if chat is not None and user is not None and user.id in self.caesar_ids:
            name = type(context.error).__name__
            with contextlib.suppress(TelegramError):
                await context.bot.send_message(
                    chat.id,
                    f"⚠️ Something went wrong ({name}); the details are in Legio's log.",
                    link_preview_options=NO_PREVIEW,
                )
