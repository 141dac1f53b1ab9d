"""One query's message: the planned context, the agent's checkpoint, the request's files.

``prepare_query`` does what must happen before a query is sent, in this order of
promise: the window is planned (``legio.sessions.context``) and the checkpoint saved
together (neither waits for the other; the checkpoint first of all, so a CLI that
finishes its turn after the daemon died is never sent the same nuntius again), and the
request's files are copied into the agent's ``inbox/``. It returns the text and the
image blocks to send. If it fails, the session is as it was: nothing was sent.
"""

from __future__ import annotations

import asyncio
from typing import Any

from legio.sessions.client import AgentSession
from legio.sessions.context import plan_context
from legio.sessions.delivery import Pictures, prepare_delivery
from legio.sessions.history import current_message
from legio.sessions.pointers import pointer_context
from legio.sessions.spec import AgentSpec
from legio.store.attachments import AttachmentStore
from legio.store.praetorium import Nuntius, Praetorium
from legio.store.threads import ThreadStore


async def prepare_query(
    praetorium: Praetorium,
    attachments: AttachmentStore,
    pictures: Pictures,
    session: AgentSession,
    spec: AgentSpec,
    nuntius: Nuntius,
    prefix: str,
) -> tuple[str, list[dict[str, Any]]]:
    """The message answering ``nuntius`` in ``session`` (history, ``prefix``, its text,
    its files' note) and its image blocks; the session's checkpoint is saved."""
    async with ThreadStore(praetorium).edit_lock:  # an edit lands before, or is a correction
        nuntius = await praetorium.get(nuntius.id) or nuntius  # the words as they are now
        return await _prepare(praetorium, attachments, pictures, session, spec, nuntius, prefix)


async def _prepare(
    praetorium: Praetorium,
    attachments: AttachmentStore,
    pictures: Pictures,
    session: AgentSession,
    spec: AgentSpec,
    nuntius: Nuntius,
    prefix: str,
) -> tuple[str, list[dict[str, Any]]]:
    planned = plan_context(
        praetorium,
        spec,
        fresh=session.bootstrap,
        last_seq=session.last_seq,
        before_seq=nuntius.seq,
    )
    delivery = await prepare_delivery(
        pictures, await attachments.of_nuntius(nuntius.seq), spec.workspace, nuntius.seq
    )
    before = session.last_seq, session.bootstrap
    session.last_seq = max(session.last_seq, nuntius.seq)
    session.bootstrap = False
    try:
        plan, _ = await asyncio.gather(  # both before the query; neither waits for the other
            planned,
            praetorium.records.set_checkpoint(
                spec.name, session.session_id, session.last_seq, session.rebuild_key
            ),
        )
    except BaseException:
        session.last_seq, session.bootstrap = before  # nothing was sent
        raise
    where = spec.place.attributes() if spec.place else {}  # its project, branch and base
    pointed, quoted = await pointer_context(praetorium, spec, nuntius)  # a reply, an edit
    message = current_message(nuntius, {**where, **pointed})
    parts = (plan.text(), prefix, quoted, message, delivery.note)
    return "\n\n".join(part for part in parts if part), list(delivery.images)
