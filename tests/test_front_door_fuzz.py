"""Fuzzing the front door (issue 22, point 9): generated Telegram updates through the real
PTB application (serve) on the fake Bot API, one running bot for the whole property.

Each example is a batch of updates: Caesar's private texts (NUL, RTL marks, 4,096+
characters, odd entities), his forwards, commands, captions, edits and callback
queries, his messages in a group he did not allow and in one he did, strangers in
private and in groups, channel posts and update types Telegram may add one day. A
last Caesar message (the sentinel) is answered after every other, since Caesar's texts
all go to the Legatus, which answers in arrival order. Then:

- no error was logged (the error handler never fired, no reply failed);
- nobody but Caesar's private chat and the allowed group got anything;
- every Caesar text message of the batch (private or in the allowed group) is stored
  byte-exact, exactly once, and nothing else of his is.

Caesar's texts end with a ``REPLY ok`` line, so the fake CLI answers at once without
echoing them. ``max_examples`` is modest (30 batches of 50-100 updates: some 2,200
updates, about 150 of them Caesar's stored messages; about 12 s on a busy 2-core
machine): every answered update costs an agent turn and goes through AIORateLimiter,
so the kinds dropped at the door are drawn more often. Raise it locally to fuzz harder.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli

ALLOWED, GROUP = -200, -300
STRANGER = 666
ANONYMOUS_ADMIN = 1087968824  # Telegram's GroupAnonymousBot
DIRECTIVE_LINE = re.compile(
    r"(?m)^\s*(@\w+\s+)*(FOR|REPLY|CALL_TOOL|TOOL|THINK|SLEEP|ERROR|STDERR|BROKEN_JSON|EXIT"
    r"|USAGE|MALFORMED|OVERFLOW|ON_COMPACT)"
)
CAESAR_USER = {"id": CAESAR, "is_bot": False, "first_name": "Caesar"}
STRANGER_USER = {"id": STRANGER, "is_bot": False, "first_name": "Eve"}


# ------------------------------------------------------------------ strategies

chars = st.characters(exclude_categories=["Cs"])  # Telegram sends UTF-8: no lone surrogates
short_text = st.text(chars, max_size=40)
odd_text = st.one_of(
    short_text,
    st.sampled_from(["\x00", "a\x00b", "\u202eevil\u202c", "\u200f\u061c\u2067x\u2069", "\ufeff"]),
    st.builds(lambda piece, n: (piece or "x") * n, short_text, st.integers(4096, 4200)),
)
entity = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["bold", "url", "text_link", "mention", "pre", "spoiler", "custom_emoji", "new_kind"]
        ),
        "offset": st.integers(-3, 5000),
        "length": st.integers(-1, 5000),
    },
    optional={"url": st.just("https://example.com"), "language": short_text},
)
entities = st.lists(entity, max_size=3)


def caesar_body(text: str) -> str:
    """What Caesar types: no @mention (routing), no line the fake CLI takes as a directive."""
    body = text.replace("@", "at").lstrip("/")
    return "x" if DIRECTIVE_LINE.search(body) else body


@dataclass
class Batch:
    updates: list[dict[str, Any]] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)  # Caesar's texts, stored once each


def message(chat: dict[str, Any], sender: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"message_id": 0, "date": int(time.time()), "chat": chat, **fields}
    if sender is not None:
        out["from"] = sender
    return out


PRIVATE = {"id": CAESAR, "type": "private", "first_name": "Caesar"}
ALLOWED_GROUP = {"id": ALLOWED, "type": "supergroup", "title": "Allowed"}
OTHER_GROUP = {"id": GROUP, "type": "group", "title": "Other"}


# Kinds that Caesar gets an answer for (0, 2, 3, 4) are drawn less often than the ones
# dropped at the door: every answer goes through AIORateLimiter (30 a second in all).
KINDS = [5, 1, 6, 7, 8, 9, 10, 11, 12, 13] * 4 + [0, 0, 2, 3, 4]


@st.composite
def update(draw: st.DrawFn) -> tuple[dict[str, Any], str | None]:
    """One update, and Caesar's text if it must be stored."""
    kind = draw(st.sampled_from(KINDS))
    text, ents = draw(odd_text), draw(entities)
    body = caesar_body(text) + "\nREPLY ok"
    if kind == 0:  # Caesar, private text: stored
        return {"message": message(PRIVATE, CAESAR_USER, text=body, entities=ents)}, body
    if kind == 1:  # Caesar in the allowed group (see group_text): a stranger's reply there
        return {"message": message(ALLOWED_GROUP, STRANGER_USER, text=text)}, None
    if kind == 2:  # Caesar forwards something: stored, with its source
        origin = draw(
            st.sampled_from(
                [
                    {
                        "type": "user",
                        "date": 1,
                        "sender_user": {**STRANGER_USER, "last_name": text},
                    },
                    {"type": "hidden_user", "date": 1, "sender_user_name": text or "?"},
                    {
                        "type": "channel",
                        "date": 1,
                        "chat": {**OTHER_GROUP, "type": "channel"},
                        "message_id": 3,
                    },
                ]
            )
        )
        return {"message": message(PRIVATE, CAESAR_USER, text=body, forward_origin=origin)}, body
    if kind == 3:  # Caesar's commands, some with hostile arguments: answered, not stored
        command = draw(st.sampled_from(["/history", "/search", "/retry", "/status", "/help"]))
        line = f"{command} {text}" if draw(st.booleans()) else command
        length = len(command.encode("utf-16-le")) // 2
        cmd_entity = {"type": "bot_command", "offset": 0, "length": length}
        return {"message": message(PRIVATE, CAESAR_USER, text=line, entities=[cmd_entity])}, None
    if kind == 4:  # Caesar, a photo with a caption: told to write text
        photo = [{"file_id": "f", "file_unique_id": "u", "width": 1, "height": 1}]
        msg = message(PRIVATE, CAESAR_USER, photo=photo, caption=text, caption_entities=ents)
        return {"message": msg}, None
    if kind == 5:  # Caesar edits a message: ignored
        return {"edited_message": message(PRIVATE, CAESAR_USER, text=text, edit_date=1)}, None
    if kind == 6:  # Caesar in a group he did not allow: nothing
        return {"message": message(OTHER_GROUP, CAESAR_USER, text=body)}, None
    if kind == 7:  # a stranger in private
        return {"message": message({**PRIVATE, "id": STRANGER}, STRANGER_USER, text=body)}, None
    if kind == 8:  # a stranger in the allowed group, once as a command
        line = draw(st.sampled_from([body, "/history", "/status@legio_test_bot"]))
        return {"message": message(ALLOWED_GROUP, STRANGER_USER, text=line)}, None
    if kind == 9:  # an anonymous group admin in the allowed group
        msg = message(
            ALLOWED_GROUP,
            {"id": ANONYMOUS_ADMIN, "is_bot": True, "first_name": "G"},
            text=body,
            sender_chat=ALLOWED_GROUP,
        )
        return {"message": msg}, None
    if kind == 10:  # a channel post, new or edited
        channel = {"id": -400, "type": "channel", "title": text or "c"}
        key = draw(st.sampled_from(["channel_post", "edited_channel_post"]))
        return {key: message(channel, None, text=body, sender_chat=channel)}, None
    if kind == 11:  # an update type this PTB does not know
        return {draw(st.sampled_from(["future_kind", "message_reaction_v9"])): {"x": text}}, None
    if kind == 12:  # Caesar presses an inline button: no chat, nothing to do
        query = {"id": "1", "from": CAESAR_USER, "chat_instance": "c", "data": text[:64]}
        return {"callback_query": query}, None
    # a "private" chat whose id is not Caesar's, from Caesar's account
    return {"message": message({**PRIVATE, "id": 999}, CAESAR_USER, text=body)}, None


batches = st.lists(update(), min_size=50, max_size=100)
# Caesar in the allowed group, at most once a batch and rarely: answers there go through
# AIORateLimiter's group limit (20 a minute), which would otherwise set the pace.
group_text = st.sampled_from([None, None, None, None, "x"]).flatmap(
    lambda x: st.none() if x is None else odd_text.map(caesar_body)
)


# ------------------------------------------------------------------ the property


class Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
async def bot(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Running]:
    async with running_bot(
        castra_dir, fake_cli, telegram=f"allowed_chats = [{ALLOWED}]"
    ) as running:
        yield running


@pytest.fixture
def errors() -> Iterator[Errors]:
    handler = Errors()
    loggers = [logging.getLogger("legio"), logging.getLogger("telegram")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


SEEN = {"examples": 0, "updates": 0, "stored": 0}


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(drawn=batches, in_group=group_text)
async def test_generated_updates_never_break_the_front_door(
    bot: Running,
    errors: Errors,
    drawn: list[tuple[dict[str, Any], str | None]],
    in_group: str | None,
) -> None:
    SEEN["examples"] += 1
    SEEN["updates"] += len(drawn)
    baseline = await bot.app.engine.praetorium.last_seq()
    start = len(bot.api.calls)
    expected: list[str] = []
    for raw, stored in drawn:
        for value in raw.values():
            if isinstance(value, dict) and "message_id" in value:
                value["message_id"] = bot.api.new_message_id()
        bot.api.add_update(raw)
        if stored is not None:
            expected.append(stored)
    if in_group is not None:
        text = f"{in_group}\nREPLY ok"
        group_message = message(ALLOWED_GROUP, CAESAR_USER, text=text)
        group_message["message_id"] = bot.api.new_message_id()
        bot.api.add_update({"message": group_message})
        expected.append(text)
    sentinel = f"sentinel {SEEN['examples']}\nREPLY done {SEEN['examples']}"
    bot.api.add_message(sentinel)
    expected.append(sentinel)
    await bot.answer(start, lambda t: t == f"done {SEEN['examples']}", wait_s=60)

    assert [r.getMessage() for r in errors.records] == []
    written = {int(c.params["chat_id"]) for c in bot.api.calls[start:] if "chat_id" in c.params}
    assert written <= {CAESAR, ALLOWED}
    new = [n for n in await bot.app.history(len(expected) * 2 + 10) if n.seq > baseline]
    caesars = [n.text for n in new if n.sender == "caesar"]
    assert Counter(caesars) == Counter(expected)
    assert len(new) == 2 * len(expected)  # each answered once by the Legatus ("ok")
    SEEN["stored"] += len(expected)  # 30 batches: some 2,200 updates, 150 of them stored
