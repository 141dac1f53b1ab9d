"""End to end: the real PTB Application (serve) on the fake Bot API; agents on the fake CLI."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from telegramify_markdown import convert

from legio.frontends.telegram.sending import render
from legio.frontends.telegram.status import TYPING_EVERY_S
from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import utf16_len
from tests.legion import processes_of


@pytest.fixture
async def bot(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Running]:
    async with running_bot(castra_dir, fake_cli) as running:
        yield running


@pytest.fixture
async def bot_typing(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Running]:
    """The bot with ``[telegram] reactions = false``: its first sign is a typing action
    (with reactions on it is 👀 on the message: tests/test_reactions_bot.py)."""
    async with running_bot(castra_dir, fake_cli, telegram="reactions = false") as running:
        yield running


@pytest.fixture
async def bot_no_stream(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Running]:
    """The bot with ``[telegram] stream = false``: the status message, no drafts."""
    async with running_bot(castra_dir, fake_cli, telegram="stream = false") as running:
        yield running


async def test_a_plain_message_is_answered_by_the_legatus(bot: Running) -> None:
    start = await bot.ask("hello legatus")
    call = await bot.answer(start)
    assert call.params["text"] == "ECHO: hello legatus"
    assert int(call.params["chat_id"]) == CAESAR
    assert call.params["reply_parameters"]["message_id"] > 0
    assert await bot.app.engine.praetorium.count() == 2


async def test_two_mentions_give_two_attributed_messages(bot: Running) -> None:
    start = await bot.ask("@vorenus @pullo compare the plans")
    await bot.answer(start, lambda t: t.startswith("⚔️ pullo"))
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    texts = [t for t in bot.api.sent_texts(CAESAR) if t.startswith("⚔️")]
    assert sorted(texts) == sorted(
        [
            "⚔️ pullo — Researcher who finds, checks and summarizes facts\n━━━━━━━━━━━━\n"
            "ECHO: @vorenus @pullo compare the plans",
            "⚔️ vorenus — Code reviewer and software engineer\n━━━━━━━━━━━━\n"
            "ECHO: @vorenus @pullo compare the plans",
        ]
    )


async def test_the_command_menu_is_set_at_startup(bot: Running) -> None:
    names = [c["command"] for c in bot.api.commands]
    assert names == [
        "history",
        "status",
        "search",
        "stop",
        "reset",
        "compact",
        "context",
        "approvals",
        "revoke",
        "model",
        "effort",
        "usage",
        "retry",
        "jobs",
        "cancel",
        "projects",
        "project",
        "diff",
        "drop",
        "undo",
        "publish",
        "issues",
        "export",
        "restart",
        "queue",
        "plan",
        "help",
    ]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("/help", "/history [n] — the last n messages"),
        ("/start", "@vorenus — Code reviewer and software engineer"),
        ("/history", "No messages yet."),
        ("/history -5", "/history takes a number from 1 to 200, e.g. /history 20."),
        ("/history abc", "/history takes a number from 1 to 200, e.g. /history 20."),
        ("/history 999", "/history takes a number from 1 to 200, e.g. /history 20."),
        (
            "/reset ../x",
            "No agent named '../x'. Use /reset <name> with one of: legatus, pullo, vorenus, all.",
        ),
        ("/reset", "No agent named. Use /reset <name> with one of: legatus, pullo, vorenus, all."),
        ("/reset pullo", "pullo had no session; nothing to reset."),
        ("/reset all", "Nothing to reset."),
        ("/status", "💤 legatus: idle · no live session"),
        ("/search", "Usage: /search <words>"),
        ('/search "unbalanced', "that search could not be read: unterminated string"),
        ("/search database:x", "that search could not be read: no such column: database"),
        ("/retry ²", "written with the digits 0-9"),
        ("/retry ٣", "written with the digits 0-9"),
        ("/history ٣", "/history takes a number from 1 to 200"),
        ("/search nothing", "Nothing matches 'nothing'."),
        ("/stop", "Nothing is running."),
        (
            "/stop brutus",
            "No agent named 'brutus'. Use /stop or /stop <name>, one of: legatus, pullo, vorenus.",
        ),
        ("/stop vorenus", "vorenus is not working on anything."),
        ("/frobnicate", "Unknown command /frobnicate. /help lists the commands."),
        ("/status@legio_test_bot", "💤 vorenus: idle"),
    ],
)
async def test_admin_commands_and_bad_arguments(bot: Running, command: str, expected: str) -> None:
    start = await bot.ask(command)
    call = await bot.answer(start)
    assert expected in call.params["text"]
    assert await bot.app.engine.praetorium.count() == 0


async def test_history_search_and_reset_after_a_conversation(bot: Running) -> None:
    await bot.answer(await bot.ask("@vorenus the bridge at Arelate"))
    call = await bot.answer(await bot.ask("/history"))
    lines = call.params["text"].splitlines()
    assert "vorenus → caesar: ⚔️" not in lines[0]
    assert lines[0].endswith("vorenus → caesar: ECHO: @vorenus the bridge at Arelate")
    assert lines[1].endswith("caesar → vorenus: @vorenus the bridge at Arelate")
    call = await bot.answer(await bot.ask("/search arelate"))
    assert "«Arelate»" in call.params["text"]
    call = await bot.answer(await bot.ask("/status"))
    assert "💤 vorenus: idle · session" in call.params["text"]
    assert "all time: 1 turn (0 failed)" in call.params["text"]
    call = await bot.answer(await bot.ask("/reset vorenus"))
    assert call.params["text"] == "Reset vorenus: its next message starts a fresh session."


async def test_a_stranger_is_ignored_and_logged_once(
    bot: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="legio.frontends.telegram.bot")
    bot.api.add_message("let me in", user_id=666)
    bot.api.add_message("/status", user_id=666)
    bot.api.add_message("hello from a group", user_id=667, chat_id=-100, chat_type="group")
    start = await bot.ask("/history")
    call = await bot.answer(start)
    assert call.params["text"] == "No messages yet."
    assert bot.api.sent_texts(666) == []
    assert bot.api.sent_texts(-100) == []
    assert await bot.app.engine.praetorium.count() == 0
    refusals = [
        r.getMessage() for r in caplog.records if "not in telegram.caesar_ids" in r.getMessage()
    ]
    assert len(refusals) == 2
    assert refusals[0].startswith("ignoring Telegram user id 666")


async def test_a_long_markdown_answer_is_split_into_valid_chunks(bot: Running) -> None:
    section = (
        "## Part {i}\\n\\nSome **bold** text, `code`, and a [link](https://example.com).\\n\\n"
        + ("- item with *emphasis* and more words to fill the line\\n" * 12)
    )
    markdown = "".join(section.format(i=i) for i in range(12))
    start = await bot.ask(f"REPLY {markdown}")
    await bot.answer(start, lambda t: "Part 11" in t, wait_s=20)
    chunks = [
        c
        for c in bot.api.calls_of("sendMessage")
        if "Part" in str(c.params.get("text")) and not str(c.params["text"]).startswith("⏳")
    ]
    assert len(chunks) >= 3
    failed = [c for c in bot.api.calls if c.method == "sendMessage" and c.status != 200]
    assert failed == []
    for chunk in chunks:
        assert utf16_len(chunk.params["text"]) <= 4096
        assert chunk.params.get("entities")
    plain, _ = convert(markdown.replace("\\n", "\n"))
    assert "".join(c.params["text"] for c in chunks).replace("\n", "") == plain.replace("\n", "")


def test_render_keeps_messages_under_telegram_limits() -> None:
    markdown = "\n".join(f"**{i}** `x`" for i in range(400))
    chunks = render(markdown)
    assert all(len(entities) <= 100 for _, entities in chunks)
    assert all(utf16_len(text) <= 4096 for text, _ in chunks)
    assert sum(len(entities) for _, entities in chunks) == 800
    assert render("") == []


async def test_a_429_is_retried_and_the_answer_delivered_once(bot: Running) -> None:
    bot.api.fail("sendMessage", 429, retry_after=1, times=2)
    start = await bot.ask("REPLY the answer\nSLEEP 0.1")
    await bot.answer(start, lambda t: t == "the answer", wait_s=20)
    await asyncio.sleep(0.5)
    assert bot.api.sent_texts(CAESAR).count("the answer") == 1
    assert [c.status for c in bot.api.calls if c.method == "sendMessage"].count(429) == 2


async def test_status_answers_while_a_centurio_is_busy_and_stop_interrupts_it(bot: Running) -> None:
    slow = await bot.ask("@vorenus think long\nSLEEP 30")
    for _ in range(200):
        if (
            processes_of(bot.fake_cli, "vorenus")
            and processes_of(bot.fake_cli, "vorenus")[0].prompts
        ):
            break
        await asyncio.sleep(0.05)
    status = await bot.answer(await bot.ask("/status"), lambda t: "legatus" in t)
    assert "⚙️ vorenus: working" in status.params["text"]
    stop = await bot.answer(await bot.ask("/stop vorenus"))
    assert stop.params["text"] == "Stopping vorenus."
    interrupted = await bot.answer(slow, lambda t: t.startswith("⚔️ vorenus"))
    assert interrupted.params["text"].endswith("[vorenus] Interrupted.")
    assert interrupted.at > stop.at


async def test_compact_waits_for_a_busy_agent_without_blocking_other_commands(
    bot: Running,
) -> None:
    await bot.answer(await bot.ask("@vorenus the bridge code is 4711"), lambda t: "4711" in t)
    slow = await bot.ask("@vorenus SLEEP 2\nREPLY slept")
    for _ in range(200):
        if len(processes_of(bot.fake_cli, "vorenus")[0].prompts) == 2:
            break
        await asyncio.sleep(0.05)
    compact = await bot.ask("/compact vorenus keep the code")
    status = await bot.answer(await bot.ask("/status"), lambda t: "legatus" in t)
    assert "⚙️ vorenus: working" in status.params["text"]  # answered while /compact waits
    answer = await bot.answer(slow, lambda t: t.endswith("slept"))
    done = await bot.answer(compact, lambda t: t.startswith("Compacted vorenus"), wait_s=30)
    assert done.at > answer.at > status.at
    assert "INSTRUCTIONS: keep the code" in done.params["text"]
    view = await bot.answer(await bot.ask("/context vorenus"), lambda t: "Context of" in t)
    assert "Compaction summary, given first" in view.params["text"]


async def test_the_status_message_shows_work_and_is_removed(bot_no_stream: Running) -> None:
    bot = bot_no_stream
    start = await bot.ask("THINK about it\nSLEEP 1.5\nREPLY done")
    await bot.answer(start, lambda t: t == "done")
    status = await bot.api.wait_for_call(
        "sendMessage", lambda c: c.params["text"] == "⏳ Thinking...", start=start
    )
    deleted = await bot.api.wait_for_call("deleteMessage", start=start)
    assert int(deleted.params["message_id"]) == status.result["message_id"]
    assert bot.api.calls_of("sendChatAction")
    assert not [c for c in bot.api.calls if c.method == "editMessageText" and c.status != 200]


async def test_messages_to_one_agent_keep_their_order(bot_no_stream: Running) -> None:
    bot = bot_no_stream
    first = await bot.ask("@vorenus first\nSLEEP 2\nREPLY first")
    await bot.ask("/queue @vorenus second")  # ⏭ after the turn (joining it: test_steer_bot.py)
    queued = await bot.api.wait_for_call(
        "sendMessage", lambda c: "Queued" in str(c.params.get("text")), start=first
    )
    assert "⏳ Queued: vorenus is finishing an earlier request..." in queued.params["text"]
    await bot.answer(first, lambda t: t.endswith("ECHO: @vorenus second"))
    answers = [t for t in bot.api.sent_texts(CAESAR) if t.startswith("⚔️ vorenus")]
    assert [a.rsplit("\n", 1)[-1] for a in answers] == ["first", "ECHO: @vorenus second"]
    assert processes_of(bot.fake_cli, "vorenus")[0].prompts[0].startswith("@vorenus first")


async def test_a_photo_telegram_will_not_hand_over_gets_a_clear_answer(bot: Running) -> None:
    start = len(bot.api.calls)
    bot.api.add_update(
        {
            "message": {
                "message_id": 77,
                "date": 0,
                "chat": {"id": CAESAR, "type": "private"},
                "from": {"id": CAESAR, "is_bot": False, "first_name": "Caesar"},
                "photo": [{"file_id": "x", "file_unique_id": "y", "width": 1, "height": 1}],
            }
        }
    )
    call = await bot.answer(start)
    assert call.params["text"] == (
        "⚠️ Telegram would not hand over photo-y.jpg (Invalid file_id); send it again"
    )
    assert await bot.app.engine.praetorium.count() == 0
    assert await bot.app.engine.sessions.attachments.pending() == []


async def test_the_sign_comes_before_the_message_is_even_stored(
    bot_typing: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The typing action is sent when the update is admitted: storing and routing it
    come after, so a slow praetorium does not hold the sign back."""
    legatus = bot_typing.app.engine.legatus
    stored = asyncio.Event()
    release = asyncio.Event()
    post = legatus.praetorium.post

    async def slow_post(*args: object, **kwargs: object) -> object:
        stored.set()
        await release.wait()
        return await post(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(legatus.praetorium, "post", slow_post)
    start = await bot_typing.ask("REPLY taken")
    sign = await bot_typing.api.wait_for_call("sendChatAction", start=start)
    assert sign.params["action"] == "typing"
    assert int(sign.params["chat_id"]) == CAESAR
    await asyncio.wait_for(stored.wait(), 30)
    release.set()
    answer = await bot_typing.answer(start, lambda t: t == "taken")
    assert sign.at < answer.at


async def test_a_quick_answer_costs_the_sign_and_its_message_only(bot_typing: Running) -> None:
    """One typing action (the sign), then the answer: no draft, no second action."""
    await bot_typing.answer(await bot_typing.ask("REPLY warm"))  # the Legatus's CLI is running
    await asyncio.sleep(1.1)  # as Caesar would, before his next message
    start = await bot_typing.ask("REPLY quick")
    await bot_typing.answer(start, lambda t: t == "quick")
    await asyncio.sleep(0.3)
    sent = [c.method for c in bot_typing.api.calls[start:] if c.method != "getUpdates"]
    assert sent == ["sendChatAction", "sendMessage"]


async def test_a_burst_of_messages_gets_one_sign_not_one_each(bot_typing: Running) -> None:
    """Updates that arrive together (an album's parts, a pasted burst) share one sign:
    each would take a Bot API call from the rate limit the answers need."""
    start = len(bot_typing.api.calls)
    for i in range(3):
        bot_typing.api.add_message(f"REPLY burst {i}", user_id=CAESAR)
    for i in range(3):
        await bot_typing.answer(start, lambda t, i=i: t == f"burst {i}")
    signs = [c for c in bot_typing.api.calls[start:] if c.method == "sendChatAction"]
    assert len(signs) == 1


async def test_a_long_request_does_not_repeat_the_sign_while_it_shows(
    bot_no_stream: Running,
) -> None:
    """Without drafts the typing action repeats while agents work, but not on top of the
    sign: the next one comes when the sign has faded (about 4.5 s)."""
    bot = bot_no_stream
    start = await bot.ask("THINK about it\nSLEEP 2\nREPLY done")
    answer = await bot.answer(start, lambda t: t == "done")
    actions = [c.at for c in bot.api.calls_of("sendChatAction") if c.at <= answer.at]
    assert actions  # the sign
    # none on top of another (a slow machine may make the turn outlast the sign: then
    # one more, once it faded; never sooner)
    gaps = [later - earlier for earlier, later in itertools.pairwise(actions)]
    assert all(gap >= TYPING_EVERY_S - 1 for gap in gaps), gaps  # 1 s: the wire's jitter
