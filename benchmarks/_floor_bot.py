"""The floor the process benchmarks print beside Legio: a bare python-telegram-bot with
the Claude Agent SDK, as the most used bots of this kind are built.

``python _floor_bot.py <base_url> <token> [cli_path]``: long polling on the given Bot API;
each text message is answered by one SDK query in a new ``ClaudeSDKClient`` (a CLI
started for the message, then ended), with ``resume`` of the chat's last session. Idle,
it holds no CLI.
"""

from __future__ import annotations

import sys

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, TextBlock
from telegram import Update
from telegram.constants import ChatAction
from telegram.ext import AIORateLimiter, ApplicationBuilder, ContextTypes, MessageHandler, filters

SESSIONS: dict[int, str] = {}


async def answer(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    message = update.effective_message
    assert message is not None and message.text is not None
    await context.bot.send_chat_action(message.chat_id, ChatAction.TYPING)
    options = ClaudeAgentOptions(
        cli_path=sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None,
        resume=SESSIONS.get(message.chat_id),
        model=sys.argv[4] if len(sys.argv) > 4 else None,
    )
    parts: list[str] = []
    async with ClaudeSDKClient(options) as client:
        await client.query(message.text)
        async for reply in client.receive_response():
            if isinstance(reply, AssistantMessage):
                parts += [b.text for b in reply.content if isinstance(b, TextBlock)]
            session = getattr(reply, "session_id", None)
            if session:
                SESSIONS[message.chat_id] = session
    await message.reply_text("".join(parts) or "(nothing)")


def main() -> None:
    base_url, token = sys.argv[1], sys.argv[2]
    app = (
        ApplicationBuilder()
        .token(token)
        .base_url(base_url)
        .rate_limiter(AIORateLimiter(max_retries=5))
        .build()
    )
    app.add_handler(MessageHandler(filters.TEXT, answer))
    app.run_polling(timeout=30)


if __name__ == "__main__":
    main()
