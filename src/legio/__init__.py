"""Legio: a personal Telegram bot daemon with an orchestrator agent and specialist agents."""

__version__ = "0.1.0"
