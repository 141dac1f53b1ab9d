"""↩️ Undo and 🔀 Try again on a work card in Telegram (``CardDesk`` hands the taps here).

Undo of a branch that is only in the project goes at once (nothing is lost: the turn's
work is kept for 14 days, ``/undo`` brings it back); of a branch on the forge, a second
question names its pull request first (``card:undoyes:<id>`` undoes, ``card:undono:<id>``
keeps). ``card:undo:<id>`` may come from a 👎 on the card too. Try again asks on which
model first (``card:again:<id>:`` the same one, ``card:again:<id>:<name>`` a ``[models]``
entry, for that one request), answers with the new branch, then runs the turn's request
again under a live view, in the lane.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message
from telegram.error import TelegramError

from legio.doors.workdoor import WorkDoor
from legio.errors import ProjectError
from legio.frontends.telegram.sending import send_with_retries
from legio.request import Request, WorkCard

Run = Callable[[Message, Request], Awaitable[None]]


def undo_buttons(card: WorkCard) -> list[InlineKeyboardButton]:
    return [
        InlineKeyboardButton("↩️ Undo", callback_data=f"card:undo:{card.id}"),
        InlineKeyboardButton("🔀 Try again", callback_data=f"card:again:{card.id}"),
    ]


async def on_undo(
    room: WorkDoor, query: CallbackQuery, message: Message, card: WorkCard, confirmed: bool
) -> None:
    """↩️ Undo (``confirmed``: the published branch's second question answered yes)."""
    bot, chat_id = message.get_bot(), message.chat_id
    if (query.data or "").startswith("card:undono:"):
        await query.answer("Kept: not undone.")
        with contextlib.suppress(TelegramError):
            await message.edit_reply_markup(None)
        return
    asked = await room.undo_ask(card.id)
    if asked.refusal:
        await query.answer("Not undone.")
        await send_with_retries(bot, chat_id, f"Not undone: {asked.refusal}")
        return
    if asked.published and not confirmed:
        await query.answer()
        text = (
            f"↩️ {asked.branch} is on the forge: {asked.published}. Undo card {card.id} "
            "here anyway? Its work is kept for 14 days; the pull request keeps showing it "
            "until the next 🚀 Publish, which asks before it force-pushes."
        )
        markup = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton("↩️ Yes, undo it", callback_data=f"card:undoyes:{card.id}"),
                    InlineKeyboardButton("Keep it", callback_data=f"card:undono:{card.id}"),
                ]
            ]
        )
        await send_with_retries(bot, chat_id, text, reply_markup=markup)
        return
    await query.answer("Undoing…")
    if confirmed:
        with contextlib.suppress(TelegramError):
            await message.edit_reply_markup(None)  # one tap, one undo
    try:
        said = await room.undo(card.id, confirmed=confirmed)
    except ProjectError as e:
        said = f"Not undone: {e}"
    await send_with_retries(bot, chat_id, said)


async def on_again(
    room: WorkDoor,
    query: CallbackQuery,
    message: Message,
    card: WorkCard,
    run: Run,
    choice: str | None = None,
) -> None:
    """🔀 Try again: on which model (``choice`` None: ask; "": the same), then the new
    branch said and the request run again."""
    if choice is None and await _ask_model(room, query, message, card):
        return
    if choice is not None:
        with contextlib.suppress(TelegramError):
            await message.edit_reply_markup(None)  # one tap, one try
    try:
        said, request = await room.try_again(card.id, choice or None)
    except ProjectError as e:
        await query.answer("Not tried again.")
        await send_with_retries(message.get_bot(), message.chat_id, f"Not tried again: {e}")
        return
    await query.answer(f"Asking {card.agent} again…")
    await send_with_retries(message.get_bot(), message.chat_id, said)
    await run(message, request)


async def _ask_model(
    room: WorkDoor, query: CallbackQuery, message: Message, card: WorkCard
) -> bool:
    """The model question, as buttons under a message of its own; False when there is no
    choice to make (no ``[models]``): then it goes at once on the same model."""
    try:
        same, names = await room.try_again_models(card.id)
    except ProjectError as e:
        await query.answer("Not tried again.")
        await send_with_retries(message.get_bot(), message.chat_id, f"Not tried again: {e}")
        return True
    if not names:
        return False
    await query.answer()
    data = f"card:again:{card.id}:"
    label = "🔀 Same model" + (f" ({same})" if same else "")
    rows = [[InlineKeyboardButton(label, callback_data=data)]]
    others = [InlineKeyboardButton(n, callback_data=data + n) for n in names]
    rows += [others[i : i + 3] for i in range(0, len(others), 3)]
    text = f"🔀 Try card {card.id}'s request again ({card.agent} #{card.project}) on which model?"
    await send_with_retries(
        message.get_bot(), message.chat_id, text, reply_markup=InlineKeyboardMarkup(rows)
    )
    return True
