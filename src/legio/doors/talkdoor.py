"""``ConversationDoor``: Telegram's conversation facts, through the door: which messages
carry which nuntius, the agents' topics and the projects bound to them, and what edits
replaced. ``LegioApp.conversation``; the front-end parts that keep a conversation are
given it.
"""

from __future__ import annotations

from legio.engine import Engine
from legio.store.threads import Topic


class ConversationDoor:
    """Telegram's gestures, recorded and looked up."""

    def __init__(self, engine: Engine) -> None:
        self.threads = engine.threads
        self.praetorium = engine.praetorium

    async def carried(self, seq: int, chat_id: int, message_ids: list[int]) -> None:
        """The Telegram messages ``message_ids`` of ``chat_id`` carry nuntius ``seq``."""
        await self.threads.carried(seq, chat_id, message_ids)

    async def seq_of_message(self, chat_id: int, message_id: int) -> int | None:
        """The nuntius a message Legio sent carries (an answer's part), if known."""
        return await self.threads.seq_of_message(chat_id, message_id)

    async def seq_of_origin(self, origin: str) -> int | None:
        """The nuntius Caesar's message ``origin`` became, if it is stored."""
        found = await self.praetorium.get_by_origin(origin)
        return found.seq if found is not None else None

    async def topics(self, chat_id: int | None = None) -> list[Topic]:
        """The agents' topics (of one chat)."""
        return await self.threads.topics(chat_id)

    async def set_topic(self, topic: Topic) -> None:
        await self.threads.set_topic(topic)

    async def forget_topic(self, chat_id: int, thread_id: int) -> None:
        """A topic Caesar deleted: made again when next needed."""
        await self.threads.forget_topic(chat_id, thread_id)

    async def project_of_topic(self, chat_id: int, thread_id: int) -> str | None:
        return await self.threads.project_of_topic(chat_id, thread_id)

    async def bind_project(self, chat_id: int, thread_id: int, project: str | None) -> None:
        """``/project <name>|off`` in a topic: every request there is on it (or not)."""
        await self.threads.bind_project(chat_id, thread_id, project)

    async def edits_of(self, seqs: list[int]) -> tuple[dict[int, str], dict[int, int]]:
        """For ``/history``: the words each edited request replaced, and which requests
        are corrections of which."""
        return await self.threads.edited(seqs), await self.threads.corrections_of(seqs)
