"""An agent's plan in Telegram: its own message, ``📋 vorenus's plan:`` and the plan
as plain text (in parts when long), with **✅ Go · ✏️ Change · ✖ Drop** on its last part;
once decided, that part says what Caesar chose and its buttons go. ``asking`` sends it,
waits for the tap or the reply (the changes), and records which messages carry the plan.

The plan is never rendered as Markdown: what Caesar approves is every character the agent
wrote. Markdown would drop HTML comments, link reference definitions and HTML blocks (and
the lines after one), hide link targets behind their words and text in spoilers; so the
text is sent as it is, with no entities, through ``legio.visible.visible`` (zero-width
and bidirectional characters shown as ``⟨U+XXXX⟩``), as the console shows it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, MessageEntity
from telegram.error import TelegramError

from legio.frontends.telegram.sending import plain_pages
from legio.request import QuestionRequest
from legio.visible import visible

FOOTER = (
    "✅ Go: it carries the plan out · ✏️ Change: reply to this message with your changes · "
    "✖ Drop: it stops, nothing changed."
)
# what the last part says once decided, by the option tapped (Go, Change, Drop)
DECIDED = (
    "✅ Go: it carries the plan out.",
    "✏️ Change: it asks you what to change.",
    "✖ Dropped: nothing was changed.",
)
UNDECIDED = {  # why a plan ended without Caesar's choice (the request's outcome)
    "timeout": "⌛ No answer in time: dropped, nothing was changed.",
    "cancelled": "✖ The turn was stopped: nothing was changed.",
}
Page = tuple[str, InlineKeyboardMarkup | None, list[MessageEntity]]


def _labels(request: QuestionRequest) -> list[str]:
    item = request.questions[0] if request.questions else {}
    return [str(o.get("label", "")) for o in item.get("options") or [] if isinstance(o, dict)]


def plan_pages(request: QuestionRequest, base: str) -> list[Page]:
    """The plan's messages (text, buttons on the last, entities); ``base``: its buttons'
    callback data before the option's number (``asking``'s question format)."""
    item = request.questions[0] if request.questions else {}
    chunks = plain_pages(f"{visible(str(item.get('question', '')))}\n\n{FOOTER}")
    buttons = [
        InlineKeyboardButton(label, callback_data=f"{base}:{number}")
        for number, label in enumerate(_labels(request))
    ]
    keyboard = InlineKeyboardMarkup([buttons])
    last = len(chunks) - 1
    return [(text, keyboard if i == last else None, []) for i, text in enumerate(chunks)]


def decision_line(request: QuestionRequest, answer: str) -> str:
    """What Caesar decided, as the plan's last part says it."""
    labels = _labels(request)
    if answer in labels and labels.index(answer) < len(DECIDED):
        return DECIDED[labels.index(answer)]
    return f"✏️ Change: {answer[:500]}"


async def decided_plan(bot: Bot, chat_id: int, message_id: int, shown: Any, line: str) -> None:
    """The plan's last part (``shown``: its text and entities) with ``line`` below and no
    buttons; only the buttons removed if Telegram refuses the longer text."""
    text, entities = shown
    try:
        await bot.edit_message_text(
            f"{text}\n\n{line}", chat_id, message_id, entities=entities or None, reply_markup=None
        )
    except TelegramError:
        with contextlib.suppress(TelegramError):
            await bot.edit_message_reply_markup(chat_id, message_id, reply_markup=None)
