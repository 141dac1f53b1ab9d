"""``ConversationDoor``: Telegram's conversation facts, through the door: which messages
carry which nuntius, the agents' topics and the projects bound to them, and what edits
replaced. ``LegioApp.conversation``; the front-end parts that keep a conversation are
given it.
"""

from __future__ import annotations

from legio.engine import Engine
from legio.names import CAESAR
from legio.store.threads import Topic


class ConversationDoor:
    """Telegram's gestures, recorded and looked up."""

    def __init__(self, engine: Engine) -> None:
        self.threads = engine.threads
        self.praetorium = engine.praetorium
        self.asides = engine.sessions.asides

    async def carried(self, seq: int, chat_id: int, message_ids: list[int]) -> None:
        """The Telegram messages ``message_ids`` of ``chat_id`` carry nuntius ``seq``."""
        await self.threads.carried(seq, chat_id, message_ids)

    async def seq_of_message(self, chat_id: int, message_id: int) -> int | None:
        """The nuntius a message Legio sent carries (an answer's part), if known."""
        return await self.threads.seq_of_message(chat_id, message_id)

    async def reacted(self, chat_id: int, message_id: int, emoji: str) -> str | None:
        """Caesar reacted ``emoji`` to a message Legio sent: if it carries an agent's
        answer, that agent reads so with its next request; the agent, or None."""
        seq = await self.threads.seq_of_message(chat_id, message_id)
        found = await self.praetorium.get_history(1, seq + 1) if seq is not None else []
        answer = found[0] if found and found[0].seq == seq else None
        if answer is None or answer.sender == CAESAR or answer.reply_to is None:
            return None
        request = await self.praetorium.get(answer.reply_to)
        number = f"#{request.seq}" if request is not None else "an earlier request"
        self.asides.add(answer.sender, f"Caesar reacted {emoji} to your answer to {number}.")
        return answer.sender

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
