"""The offline test bench: fake Claude CLI, fake Telegram Bot API, fake Messages API."""
