"""Approvals and agents' questions as Telegram buttons (``TelegramAsker``). One message per
request, in each of Caesar's chats: which agent (⚔️ name), what it wants (the CLI's tool
name and the command, path or URL itself, never only the agent's description of it; a
long one keeps its start and end and comes whole as a file; sent as plain text) and the
buttons **Allow once · Allow for this session · Always · Deny · Deny and stop**. A text
message *replying* to it denies with that text as the reason the model reads. A tap
answers the callback query and edits the message to show the decision; a timeout or a
cancelled turn edits it too. Button data carry the request id and a random nonce: forged
or unknown data, a replay after the decision, and buttons of an earlier run ("expired")
change nothing and say so. Strangers' taps never reach here (``telegram.py``'s gate
answers them "not yours").

An agent's question (``AskUserQuestion``) becomes one message per question with its
options as buttons (toggles and a Done button when several may be chosen); Caesar's
next plain text message answers whatever is still open, and a *reply* to a question's
message answers that question alone. An agent's plan (``ExitPlanMode``) comes as its own
message (``planview``: the plan rendered, ✅ Go · ✏️ Change · ✖ Drop on its last part),
recorded as carrying the plan's nuntius; a reply to it is the changes while it waits, and
once it is decided goes to that agent as a new request (``conversation``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from telegram import (
    Bot,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    Message,
)
from telegram.error import TelegramError

from legio.app import LegioApp
from legio.doors.talkdoor import ConversationDoor
from legio.frontends.numbers import digits
from legio.frontends.telegram.lanes import Lane, in_lane
from legio.frontends.telegram.planview import (
    UNDECIDED,
    decided_plan,
    decision_line,
    plan_pages,
)
from legio.frontends.views import stop_text
from legio.request import ApprovalRequest, Asker, Decision, QuestionRequest
from legio.shell.rules import SHOWN_MAX, shorten_middle
from legio.visible import visible

logger = logging.getLogger(__name__)

CHOICES = {
    "o": ("once", "Allow once", "✅ Allowed once"),
    "s": ("session", "Allow for this session", "✅ Allowed for this session"),
    "a": ("always", "Always", "✅ Always allowed (/approvals lists it, /revoke ends it)"),
    "d": ("deny", "Deny", "❌ Denied"),
    "x": ("stop", "Deny and stop", "⛔ Denied, and the turn stopped"),
}
OPTION_MAX = 40
DECIDED_KEPT = 500


@dataclass
class _Pending:
    nonce: str
    future: asyncio.Future[Any]
    messages: list[tuple[int, int]] = field(default_factory=list)  # (chat, message id)
    text: str = ""


@dataclass
class _Question:
    request: QuestionRequest
    nonce: str
    future: asyncio.Future[dict[str, str] | None]
    answers: dict[int, str] = field(default_factory=dict)
    picked: dict[int, list[str]] = field(default_factory=dict)
    messages: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    buttons: dict[tuple[int, int], Any] = field(default_factory=dict)  # a plan's last part


def approval_text(request: ApprovalRequest) -> str:
    """The approval message: the call itself first, the agent's description after, marked."""
    minutes = f"{request.timeout_s / 60:g}"
    whole = request.full_target or request.target
    shown = shorten_middle(whole)
    attached = "\n(The whole command is in the file below.)" if too_long(request) else ""
    said = ""
    if request.description.strip():
        said = (
            f"\n\nThe agent describes it as (its own words, not checked): {request.description!r}"
        )
    return (
        f"⚔️ {request.agent} asks to use {request.tool}:\n{shown}{attached}{said}\n\n"
        f"{request.why_asked()} No answer in {minutes} min counts as Deny; "
        "reply to this message to deny with a reason."
    )


def too_long(request: ApprovalRequest) -> bool:
    """Whether the message shows only the start and end of the call (the file has it all)."""
    return len(visible(request.full_target or request.target)) > SHOWN_MAX


def approval_keyboard(request_id: int, nonce: str) -> InlineKeyboardMarkup:
    def button(code: str) -> InlineKeyboardButton:
        return InlineKeyboardButton(
            CHOICES[code][1], callback_data=f"ap:{request_id}:{nonce}:{code}"
        )

    return InlineKeyboardMarkup(
        [[button("o"), button("s")], [button("a"), button("d"), button("x")]]
    )


class _InLane:
    """A ``TelegramAsker`` for one request, asking in the request's topic."""

    def __init__(self, asker: TelegramAsker, lane: Lane | None) -> None:
        self.asker, self.lane = asker, lane

    async def approve(self, request: ApprovalRequest) -> Decision:
        return await self.asker.approve(request, self.lane)

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        return await self.asker.answer(request, self.lane)


class TelegramAsker:
    """Asks Caesar in Telegram; register with ``LegioApp.set_asker``."""

    def __init__(
        self, bot: Bot, chat_ids: list[int], app: LegioApp, facts: ConversationDoor | None = None
    ) -> None:
        self.bot = bot
        self.chat_ids = chat_ids
        self.app = app
        self.facts = facts  # which messages carry a plan's nuntius
        self._approvals: dict[int, _Pending] = {}
        self._decided: dict[int, str] = {}
        self._questions: dict[int, _Question] = {}
        self._closed: dict[tuple[int, int], int] = {}  # messages of questions no longer open

    # ---------------------------------------------------------- approvals

    def within(self, lane: Lane | None) -> Asker:
        """This asker for one request: its approvals and questions in its topic."""
        return _InLane(self, lane)

    async def approve(self, request: ApprovalRequest, lane: Lane | None = None) -> Decision:
        loop = asyncio.get_running_loop()
        pending = _Pending(secrets.token_hex(4), loop.create_future(), text=approval_text(request))
        self._approvals[request.id] = pending
        keyboard = approval_keyboard(request.id, pending.nonce)
        try:
            for chat_id in self.chat_ids:
                try:
                    with in_lane(lane):  # the request's topic
                        sent = await self.bot.send_message(
                            chat_id, pending.text, reply_markup=keyboard
                        )
                        pending.messages.append((chat_id, sent.message_id))
                        if too_long(request):
                            await self._send_whole(chat_id, sent.message_id, request)
                except TelegramError as e:
                    logger.warning("could not ask chat %s about %s: %s", chat_id, request.id, e)
            decision: Decision = await pending.future
            return decision
        except asyncio.CancelledError:
            if request.outcome == "timeout":
                minutes = f"{request.timeout_s / 60:g}"
                await self._settle(pending, f"⌛ No answer within {minutes} min: denied.")
            else:
                await self._cancelled(request.id, pending)
            raise
        finally:
            self._approvals.pop(request.id, None)
            self._decided[request.id] = request.outcome or "decided"
            while len(self._decided) > DECIDED_KEPT:  # older ones are found in the praetorium
                self._decided.pop(next(iter(self._decided)))

    async def _send_whole(self, chat_id: int, message_id: int, request: ApprovalRequest) -> None:
        """The whole call as a text file, replying to its approval message."""
        whole = (request.full_target or request.target).encode("utf-8", errors="replace")
        await self.bot.send_document(
            chat_id,
            InputFile(whole, filename=f"{request.agent}-{request.tool}-{request.id}.txt"),
            caption=f"The whole {request.tool} call {request.agent} asks to run "
            f"({len(whole)} bytes).",
            reply_to_message_id=message_id,
        )

    async def _settle(self, pending: _Pending, line: str) -> None:
        for chat_id, message_id in pending.messages:
            with contextlib.suppress(TelegramError):
                await self.bot.edit_message_text(
                    f"{pending.text}\n\n{line}", chat_id, message_id, reply_markup=None
                )

    async def _cancelled(self, request_id: int, pending: _Pending) -> None:
        done = InlineKeyboardMarkup(
            [[InlineKeyboardButton("✖ cancelled", callback_data=f"ap:{request_id}:-:-")]]
        )
        for chat_id, message_id in pending.messages:
            with contextlib.suppress(TelegramError):
                await self.bot.edit_message_reply_markup(chat_id, message_id, reply_markup=done)

    async def _tap_approval(self, query: CallbackQuery, parts: list[str]) -> None:
        request_id = digits(parts[1]) if len(parts) == 4 else None
        if request_id is None:
            await query.answer("Unknown button.")
            return
        nonce, code = parts[2], parts[3]
        pending = self._approvals.get(request_id)
        if pending is None:
            if request_id in self._decided:
                await query.answer("Already decided.")
                return
            status = await self.app.approval_status(request_id)
            if status == "expired":
                await query.answer(
                    "Expired: Legio restarted while this waited. /retry runs it again."
                )
                with contextlib.suppress(TelegramError):
                    await query.edit_message_reply_markup(reply_markup=None)
            elif status is None:
                await query.answer("Unknown button.")
            else:
                await query.answer("Already decided.")
            return
        if nonce != pending.nonce or code not in CHOICES or pending.future.done():
            await query.answer(
                "Unknown button." if not pending.future.done() else "Already decided."
            )
            return
        choice, _, shown = CHOICES[code]
        pending.future.set_result(Decision(choice))  # type: ignore[arg-type]
        await query.answer(shown)
        await self._settle(pending, shown)

    # ---------------------------------------------------------- questions

    async def answer(
        self, request: QuestionRequest, lane: Lane | None = None
    ) -> dict[str, str] | None:
        loop = asyncio.get_running_loop()
        question = _Question(request, secrets.token_hex(4), loop.create_future())
        self._questions[request.id] = question
        try:
            if request.plan:
                await self._send_plan(question, lane)
            for index in range(len(request.questions) if not request.plan else 0):
                text, keyboard = self._question_message(question, index)
                for chat_id in self.chat_ids:
                    try:
                        with in_lane(lane):
                            sent = await self.bot.send_message(chat_id, text, reply_markup=keyboard)
                        question.messages.setdefault(index, []).append((chat_id, sent.message_id))
                    except TelegramError as e:
                        logger.warning("could not ask chat %s a question: %s", chat_id, e)
            return await question.future
        except asyncio.CancelledError:
            if request.plan:  # its last part says why it ended
                line = UNDECIDED.get(request.outcome or "", UNDECIDED["cancelled"])
                for (chat_id, message_id), shown in question.buttons.items():
                    await decided_plan(self.bot, chat_id, message_id, shown, line)
                raise
            for messages in question.messages.values():
                for chat_id, message_id in messages:
                    with contextlib.suppress(TelegramError):
                        await self.bot.edit_message_reply_markup(
                            chat_id, message_id, reply_markup=None
                        )
            raise
        finally:
            self._questions.pop(request.id, None)
            for messages in question.messages.values():  # a reply to one is no answer now
                self._closed.update(dict.fromkeys(messages, request.id))
            while len(self._closed) > DECIDED_KEPT:
                self._closed.pop(next(iter(self._closed)))

    async def _send_plan(self, question: _Question, lane: Lane | None) -> None:
        """An agent's plan: its message (in parts if long), the buttons on the last,
        recorded as carrying the plan's nuntius (a reply to it points there)."""
        request = question.request
        base = f"q:{request.id}:{question.nonce}:0"
        for chat_id in self.chat_ids:
            sent: list[int] = []
            try:
                with in_lane(lane):
                    for text, keyboard, page in plan_pages(request, base):
                        message = await self.bot.send_message(
                            chat_id, text, entities=page or None, reply_markup=keyboard
                        )
                        sent.append(message.message_id)
                        question.messages.setdefault(0, []).append((chat_id, message.message_id))
                        if keyboard is not None:
                            question.buttons[chat_id, message.message_id] = (text, page)
            except TelegramError as e:
                logger.warning("could not show chat %s a plan: %s", chat_id, e)
            if sent and request.seq is not None and self.facts is not None:
                try:
                    await self.facts.carried(request.seq, chat_id, sent)
                except Exception:
                    logger.exception("could not record the plan's messages")

    def _question_message(
        self, question: _Question, index: int
    ) -> tuple[str, InlineKeyboardMarkup | None]:
        item = question.request.questions[index]
        options = [o for o in item.get("options") or [] if isinstance(o, dict)]
        lines = [f"⚔️ {question.request.agent} asks: {str(item.get('question', ''))[:3500]}"]
        lines += [
            f"• {str(o.get('label', ''))[:OPTION_MAX]} — {str(o.get('description', ''))[:200]}"
            for o in options
        ]
        lines.append("Tap an answer, or write your own.")
        if index in question.answers:
            lines.append(f"\n✅ {question.answers[index]}")
            return "\n".join(lines), None
        picked = question.picked.get(index, [])
        base = f"q:{question.request.id}:{question.nonce}:{index}"
        rows = []
        for number, option in enumerate(options):
            label = str(option.get("label", ""))[:OPTION_MAX]
            mark = "☑ " if label in picked else ""
            rows.append([InlineKeyboardButton(mark + label, callback_data=f"{base}:{number}")])
        if item.get("multiSelect"):
            rows.append([InlineKeyboardButton("Done", callback_data=f"{base}:d")])
        return "\n".join(lines), InlineKeyboardMarkup(rows)

    async def _refresh(self, question: _Question, index: int) -> None:
        if question.request.plan:  # its last part says what Caesar decided
            line = decision_line(question.request, question.answers[index])
            for (chat_id, message_id), shown in question.buttons.items():
                await decided_plan(self.bot, chat_id, message_id, shown, line)
            return
        text, keyboard = self._question_message(question, index)
        for chat_id, message_id in question.messages.get(index, []):
            with contextlib.suppress(TelegramError):
                await self.bot.edit_message_text(text, chat_id, message_id, reply_markup=keyboard)

    async def _settle_question(self, question: _Question) -> None:
        items = question.request.questions
        if len(question.answers) == len(items) and not question.future.done():
            question.future.set_result(
                {str(items[i].get("question", "")): a for i, a in question.answers.items()}
            )

    async def _tap_question(self, query: CallbackQuery, parts: list[str]) -> None:
        number = digits(parts[1]) if len(parts) == 5 else None
        question = self._questions.get(number) if number is not None else None
        if question is None:
            await query.answer("This question is no longer open.")
            return
        index = digits(parts[3])
        if parts[2] != question.nonce or index is None:
            await query.answer("Unknown button.")
            return
        items = question.request.questions
        if index >= len(items) or index in question.answers:
            await query.answer(
                "Already answered." if index in question.answers else "Unknown button."
            )
            return
        options = [str(o.get("label", "")) for o in items[index].get("options") or []]
        picked = question.picked.setdefault(index, [])
        if parts[4] == "d":
            question.answers[index] = ", ".join(picked) if picked else "(nothing chosen)"
        elif (choice := digits(parts[4])) is not None and choice < len(options):
            label = options[choice]
            if items[index].get("multiSelect"):
                picked.remove(label) if label in picked else picked.append(label)
            else:
                question.answers[index] = label
        else:
            await query.answer("Unknown button.")
            return
        await self._refresh(question, index)
        await query.answer()
        await self._settle_question(question)

    async def take_text(self, message: Message) -> bool:
        """Caesar's text as a deny reason (a reply to an approval) or a question's answer."""
        text = message.text or ""
        reply_to = message.reply_to_message
        if reply_to is not None:
            key = (message.chat_id, reply_to.message_id)
            for pending in self._approvals.values():
                if key in pending.messages:
                    if not pending.future.done():
                        pending.future.set_result(Decision("deny", text))
                        await self._settle(pending, f"❌ Denied: {text[:500]}")
                    return True
            for question in list(self._questions.values()):  # a reply to one: its answer
                if any(key in shown for shown in question.messages.values()):
                    await self._fill(question, text)
                    return True
            if key in self._closed:  # decided: a reply to it is a new request
                return False
        for question in list(self._questions.values()):
            if await self._fill(question, text):
                return True
        return False

    async def _fill(self, question: _Question, text: str) -> bool:
        """``text`` answers each of ``question``'s items still open; False if none was."""
        open_ = [i for i in range(len(question.request.questions)) if i not in question.answers]
        for index in open_:
            question.answers[index] = text
            await self._refresh(question, index)
        if open_:
            await self._settle_question(question)
        return bool(open_)

    # ---------------------------------------------------------- notices

    async def notify(self, text: str) -> None:
        """Tell Caesar something nobody asked for (budget warnings, plan limits)."""
        for chat_id in self.chat_ids:
            try:
                await self.bot.send_message(chat_id, text)
            except TelegramError as e:
                logger.warning("could not tell chat %s: %s", chat_id, e)

    # ---------------------------------------------------------- taps

    async def on_tap(self, query: CallbackQuery, receipt: int | None = None) -> None:
        """A button tap from Caesar (the gate has dropped everyone else's); ``receipt``:
        when it arrived (a Stop ends what was asked before it)."""
        parts = (query.data or "").split(":")
        if parts[0] == "ap":
            await self._tap_approval(query, parts)
        elif parts[0] == "q":
            await self._tap_question(query, parts)
        elif parts[0] == "stop" and len(parts) == 2:
            stopped = await self.app.stop([parts[1]], receipt)
            await query.answer(
                stop_text(stopped, parts[1]) if stopped else f"{parts[1]} is not working."
            )
        else:
            await query.answer("Unknown button.")
