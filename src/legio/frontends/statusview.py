"""The words of what an agent is doing: a typed ``Status`` as the one line a chat or a
console shows (``⏳ #app · Bash: pytest -q``, ``⏸ vorenus is waiting for your approval: …``).

Pure text, for every front-end: the engine says what happens as data; only here does it
become words. ``previews`` tells a front-end that streams the answer's text whether a
"writing" status only repeats what the stream already shows.
"""

from __future__ import annotations

from legio.request import Status

PREVIEW = 80  # characters of a command or of the answer's first words

_TOOLS = {
    "list_edicta": "Reading edicta",
    "read_edictum": "Reading edicta",
    "publish_edictum": "Publishing an edictum",
    "revoke_edictum": "Revoking an edictum",
    "list_acta": "Reading acta",
    "read_actum": "Reading acta",
    "publish_actum": "Publishing an actum",
    "list_commentarii": "Reading commentarii",
    "read_commentarium": "Reading commentarii",
    "write_commentarium": "Writing commentarii",
    "search_memoria": "Searching memoria",
    "get_history": "Reading the praetorium",
    "search_history": "Searching the praetorium",
    "list_centuriones": "Checking the centuriones",
    "reset_centurio": "Resetting a centurio",
    "post_nuntius": "Posting a nuntius",
    "send_file": "Sending a file",
}


def _short(text: str) -> str:
    return text if len(text) <= PREVIEW else text[:PREVIEW] + "…"


def _doing(status: Status) -> str:
    if status.kind == "thinking":
        return "Thinking..."
    if status.kind == "tool" and status.tool == "dispatch":
        return f"Dispatching to {status.target}..."
    if status.kind == "tool" and status.tool == "Bash" and status.target:
        return f"Bash: {_short(status.target)}"
    if status.kind == "tool":
        return f"{_TOOLS.get(status.tool, f'Using {status.tool}')}..."
    if status.kind == "writing":
        return _short(status.target)
    if status.kind == "queued":
        return f"Queued: {status.agent} is finishing an earlier request..."
    if status.note == "full":
        return f"{status.agent}'s context is full: compacting..."
    return f"{status.agent} is writing a summary of its conversation..."  # compacting


def status_text(status: Status) -> str:
    """The one line that shows ``status`` (a ``⏳`` line, ``⏸`` while it waits)."""
    agent = status.agent
    if status.kind == "approval":
        return f"⏸ {agent} is waiting for your approval: {status.target}"
    if status.kind == "question":
        return f"⏸ {agent} is waiting for your answer"
    if status.kind == "paused":
        return f"⏸ waiting for the plan's limit to reset ({status.note})"
    if status.kind == "retrying":
        return f"⚠️ {status.note}..."
    tag = f"#{status.project} · " if status.project and status.kind != "queued" else ""
    return f"⏳ {tag}{_doing(status)}"


def previews(status: Status, text: str) -> bool:
    """Whether ``status`` only shows the first words of ``text``, streamed already."""
    shown = status.target[:PREVIEW]
    return status.kind == "writing" and bool(shown) and " ".join(text.split()).startswith(shown)
