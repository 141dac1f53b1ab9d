"""Conversation facts about nuntii (migration ``m013_conversations``): which Telegram
messages carry which nuntius, what a nuntius points at (a reply, a quote), what it
corrects (an edit), the words it replaced, and each agent's topic in Caesar's chats.

- ``telegram_messages``: (chat, message id) → seq, for Caesar's messages and every part
  of an answer (each piece of a split text, each file): a reply to any of them finds it.
- ``nuntius_links``: ``reply`` (``target_seq``, or none for a message Legio never stored,
  with the words Telegram sent), ``edit_of`` (a correction of an earlier request) and
  ``topic`` (the topic it was written in); ``quote`` is the part Caesar quoted, the
  unknown message's words or the topic's name, ``quote_sender`` who wrote the words.
- ``nuntius_edits``: the words an edit replaced in a request no agent had started yet
  (the nuntius then carries the corrected words; ``/history`` shows it was edited).
- ``topics``: one topic per centurio per private chat (threaded mode); ``topic_projects``:
  a topic bound to a project with ``/project`` (every request there is on it).

``edit_lock`` serialises an edit with the start of a turn (``legio.sessions.query``): a
request is either corrected before an agent reads it, or answered as it was and followed
by its correction.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from typing import Literal

import aiosqlite

from legio.store.praetorium import Praetorium
from legio.timing import now

LinkKind = Literal["reply", "edit_of", "topic"]
_LOCKS: weakref.WeakKeyDictionary[Praetorium, asyncio.Lock] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Link:
    """What a nuntius points at: another nuntius (``target_seq``), or words only."""

    kind: LinkKind
    target_seq: int | None
    quote: str | None = None
    quote_sender: str | None = None


@dataclass(frozen=True)
class Topic:
    chat_id: int
    agent: str
    thread_id: int
    name: str


class ThreadStore:
    """The conversation tables, on the praetorium's connection."""

    def __init__(self, praetorium: Praetorium) -> None:
        self.praetorium = praetorium

    @property
    def _db(self) -> aiosqlite.Connection:
        return self.praetorium.connection

    @property
    def edit_lock(self) -> asyncio.Lock:
        """One lock per praetorium: edits and the start of turns, one at a time."""
        return _LOCKS.setdefault(self.praetorium, asyncio.Lock())

    # ---------------------------------------------------------- Telegram messages

    async def carried(self, seq: int, chat_id: int, message_ids: list[int]) -> None:
        """Record that these Telegram messages carry nuntius ``seq``."""
        await self._db.executemany(
            "INSERT OR REPLACE INTO telegram_messages (chat_id, message_id, seq) VALUES (?, ?, ?)",
            [(chat_id, m, seq) for m in message_ids],
        )

    async def seq_of_message(self, chat_id: int, message_id: int) -> int | None:
        """The nuntius a Telegram message carries, if Legio knows it."""
        async with self._db.execute(
            "SELECT seq FROM telegram_messages WHERE chat_id = ? AND message_id = ?",
            (chat_id, message_id),
        ) as cursor:
            row = await cursor.fetchone()
        return int(row["seq"]) if row else None

    # ---------------------------------------------------------- links and edits

    async def link(self, seq: int, link: Link) -> None:
        await self._db.execute(
            "INSERT OR REPLACE INTO nuntius_links (seq, kind, target_seq, quote, quote_sender) "
            "VALUES (?, ?, ?, ?, ?)",
            (seq, link.kind, link.target_seq, link.quote, link.quote_sender),
        )

    async def links_of(self, seq: int) -> list[Link]:
        async with self._db.execute(
            "SELECT kind, target_seq, quote, quote_sender FROM nuntius_links WHERE seq = ? "
            "ORDER BY kind",
            (seq,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [Link(r["kind"], r["target_seq"], r["quote"], r["quote_sender"]) for r in rows]

    async def replace_text(self, seq: int, old: str, new: str) -> None:
        """An edit of a request no agent has started: the nuntius carries ``new``; the
        words it replaced are kept."""
        await self._db.execute(
            "INSERT INTO nuntius_edits (seq, old_text, new_text, edited_at) VALUES (?, ?, ?, ?)",
            (seq, old, new, now().isoformat(timespec="seconds")),
        )
        await self._db.execute("UPDATE nuntii SET text = ? WHERE seq = ?", (new, seq))

    async def answered(self, nuntius_id: str) -> bool:
        """Whether any agent has answered the nuntius ``nuntius_id`` (stored a reply)."""
        async with self._db.execute(
            "SELECT 1 FROM nuntii WHERE reply_to = ? LIMIT 1", (nuntius_id,)
        ) as cursor:
            return await cursor.fetchone() is not None

    async def edited(self, seqs: list[int]) -> dict[int, str]:
        """The first words of each of ``seqs`` that an edit replaced."""
        if not seqs:
            return {}
        marks = ", ".join("?" * len(seqs))
        async with self._db.execute(
            f"SELECT seq, old_text FROM nuntius_edits WHERE seq IN ({marks}) ORDER BY rowid DESC",
            seqs,
        ) as cursor:
            rows = await cursor.fetchall()
        return {int(r["seq"]): r["old_text"] for r in rows}

    async def corrections_of(self, seqs: list[int]) -> dict[int, int]:
        """For each of ``seqs`` that corrects an earlier request: that request's seq."""
        if not seqs:
            return {}
        marks = ", ".join("?" * len(seqs))
        async with self._db.execute(
            f"SELECT seq, target_seq FROM nuntius_links WHERE kind = 'edit_of' "
            f"AND seq IN ({marks})",
            seqs,
        ) as cursor:
            rows = await cursor.fetchall()
        return {int(r["seq"]): int(r["target_seq"]) for r in rows if r["target_seq"] is not None}

    # ---------------------------------------------------------- topics

    async def topics(self, chat_id: int | None = None) -> list[Topic]:
        sql = "SELECT chat_id, agent, thread_id, name FROM topics"
        params: tuple[int, ...] = ()
        if chat_id is not None:
            sql, params = sql + " WHERE chat_id = ?", (chat_id,)
        async with self._db.execute(sql + " ORDER BY chat_id, agent", params) as cursor:
            rows = await cursor.fetchall()
        return [Topic(r["chat_id"], r["agent"], r["thread_id"], r["name"]) for r in rows]

    async def set_topic(self, topic: Topic) -> None:
        await self._db.execute(
            "INSERT OR REPLACE INTO topics (chat_id, agent, thread_id, name, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                topic.chat_id,
                topic.agent,
                topic.thread_id,
                topic.name,
                now().isoformat(timespec="seconds"),
            ),
        )

    async def bind_project(self, chat_id: int, thread_id: int, project: str | None) -> None:
        """``/project`` in a topic: every request there is on ``project`` (None: none)."""
        if project is None:
            await self._db.execute(
                "DELETE FROM topic_projects WHERE chat_id = ? AND thread_id = ?",
                (chat_id, thread_id),
            )
            return
        await self._db.execute(
            "INSERT OR REPLACE INTO topic_projects (chat_id, thread_id, project) VALUES (?, ?, ?)",
            (chat_id, thread_id, project),
        )

    async def project_of_topic(self, chat_id: int, thread_id: int) -> str | None:
        async with self._db.execute(
            "SELECT project FROM topic_projects WHERE chat_id = ? AND thread_id = ?",
            (chat_id, thread_id),
        ) as cursor:
            row = await cursor.fetchone()
        return str(row["project"]) if row else None

    async def forget_topic(self, chat_id: int, thread_id: int) -> None:
        await self._db.execute(
            "DELETE FROM topics WHERE chat_id = ? AND thread_id = ?", (chat_id, thread_id)
        )
