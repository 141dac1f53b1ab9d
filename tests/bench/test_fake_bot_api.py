"""The fake Bot API server behaves like Telegram towards a real python-telegram-bot Application."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from telegram import Bot, Update
from telegram.error import BadRequest, InvalidToken, RetryAfter
from telegram.ext import (
    AIORateLimiter,
    Application,
    ApplicationBuilder,
    ContextTypes,
    MessageHandler,
    filters,
)

from tests.fakes.bot_api import NOT_MODIFIED, FakeBotApi


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.effective_message is not None
    await update.effective_message.reply_text(f"echo: {update.effective_message.text}")


def build(api: FakeBotApi, *, rate_limiter: bool = False) -> Application:  # type: ignore[type-arg]
    builder = ApplicationBuilder().token(api.token).base_url(api.base_url)
    if rate_limiter:
        builder = builder.rate_limiter(AIORateLimiter(max_retries=3))
    app = builder.build()
    app.add_handler(MessageHandler(filters.TEXT, echo))
    return app


@asynccontextmanager
async def polling(app: Application) -> AsyncIterator[Application]:  # type: ignore[type-arg]
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=1)
        try:
            yield app
        finally:
            await app.updater.stop()
            await app.stop()


async def test_application_receives_an_update_and_its_answer_is_observed() -> None:
    async with FakeBotApi() as api:
        api.add_message("hello", user_id=42)
        async with polling(build(api)):
            call = await api.wait_for_call("sendMessage")
        assert call.params["text"] == "echo: hello"
        assert int(call.params["chat_id"]) == 42
        assert [c.method for c in api.calls][:2] == ["getMe", "deleteWebhook"]
        assert api.sent_texts(42) == ["echo: hello"]


async def test_offset_confirms_updates_so_a_restart_does_not_replay_them() -> None:
    async with FakeBotApi() as api:
        api.add_message("one")
        async with polling(build(api)):
            await api.wait_for_call("sendMessage")
        start = len(api.calls)
        api.add_message("two")
        async with polling(build(api)):
            await api.wait_for_call("sendMessage", start=start)
            await api.wait_for_call("getUpdates", start=len(api.calls))
        assert api.sent_texts() == ["echo: one", "echo: two"]
        assert api.updates == []


async def test_messages_sent_while_down_are_delivered_in_order() -> None:
    async with FakeBotApi() as api:
        for i in range(5):
            api.add_message(f"m{i}")
        async with polling(build(api)):
            await api.wait_for_call("sendMessage", lambda c: c.params["text"] == "echo: m4")
        assert api.sent_texts() == [f"echo: m{i}" for i in range(5)]


async def test_429_reaches_ptb_as_retry_after_and_the_rate_limiter_retries() -> None:
    async with FakeBotApi() as api:
        bot = Bot(api.token, base_url=api.base_url)
        async with bot:
            api.fail("sendMessage", 429, retry_after=1)
            with pytest.raises(RetryAfter) as caught:
                await bot.send_message(1, "x")
            assert caught.value.retry_after.total_seconds() == 1
        api.fail("sendMessage", 429, retry_after=1)
        api.add_message("retry me")
        async with polling(build(api, rate_limiter=True)):
            await api.wait_for_call("sendMessage", lambda c: c.params["text"] == "echo: retry me")
        statuses = [c.status for c in api.calls if c.method == "sendMessage"]
        assert statuses == [429, 429, 200]


async def test_edits_and_deletes_fail_as_telegram_does() -> None:
    async with FakeBotApi() as api:
        bot = Bot(api.token, base_url=api.base_url)
        async with bot:
            sent = await bot.send_message(5, "⏳ Thinking...")
            await bot.edit_message_text(
                "⏳ Reading edicta...", chat_id=5, message_id=sent.message_id
            )
            with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
                await bot.edit_message_text(
                    "⏳ Reading edicta...", chat_id=5, message_id=sent.message_id
                )
            with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
                await bot.edit_message_text("x", chat_id=5, message_id=99999)
            assert await bot.delete_message(5, sent.message_id)
            with pytest.raises(BadRequest, match=r"(?i)message to delete not found"):
                await bot.delete_message(5, sent.message_id)
            with pytest.raises(BadRequest, match=r"(?i)message is too long"):
                await bot.send_message(5, "x" * 4097)
            await bot.send_message(5, "😀" * 2048)
            with pytest.raises(BadRequest, match=r"(?i)message is too long"):
                await bot.send_message(5, "😀" * 2049)
        assert NOT_MODIFIED.startswith("Bad Request: message is not modified")


async def test_outage_then_recovery_of_getupdates() -> None:
    async with FakeBotApi() as api:
        api.outage("getUpdates", 1.0)
        api.add_message("after the outage")
        async with polling(build(api)):
            await api.wait_for_call("sendMessage", timeout=15)
        failed = [c for c in api.calls if c.method == "getUpdates" and c.status == 502]
        assert failed
        assert api.sent_texts() == ["echo: after the outage"]


async def test_commands_and_chat_actions_are_recorded() -> None:
    async with FakeBotApi() as api:
        bot = Bot(api.token, base_url=api.base_url)
        async with bot:
            await bot.set_my_commands([("status", "Show agents"), ("help", "Help")])
            assert [c.command for c in await bot.get_my_commands()] == ["status", "help"]
            await bot.send_chat_action(5, "typing")
        assert api.calls_of("sendChatAction")[0].params["action"] == "typing"


async def test_a_wrong_token_is_refused_as_invalid() -> None:
    async with FakeBotApi() as api:
        bot = Bot("999:WRONG", base_url=api.base_url)
        with pytest.raises(InvalidToken):
            async with bot:  # initialize() calls getMe
                pass


async def test_drafts_are_for_private_chats_with_a_non_zero_id_and_4096_units() -> None:
    async with FakeBotApi() as api:
        bot = Bot(api.token, base_url=api.base_url)
        async with bot:
            assert await bot.send_message_draft(42, 7, "first words")
            assert await bot.send_message_draft(42, 7, "")  # the "Thinking..." placeholder
            for chat_id, draft_id, text in [(-100, 7, "a group"), (42, 0, "no id")]:
                with pytest.raises(BadRequest):
                    await bot.send_message_draft(chat_id, draft_id, text)
            with pytest.raises(BadRequest, match="too long"):
                await bot.send_message_draft(42, 7, "x" * 4097)
            api.fail("sendMessageDraft", 400, "Bad Request: method not available")
            with pytest.raises(BadRequest, match="not available"):
                await bot.send_message_draft(42, 7, "refused once")
            assert await bot.send_message_draft(42, 7, "then accepted")
        assert api.drafts(42) == [(7, "first words"), (7, ""), (7, "then accepted")]
