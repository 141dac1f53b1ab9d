"""Short notes an agent reads with its next request: Caesar's reactions to its answers.

``Asides.add`` keeps a note for an agent ("Caesar reacted 👍 to your answer to #12.");
the agent's next turn takes them all (``take``) and reads them before the request, in a
``<caesar_reactions>`` element. They live in memory: a restart forgets the notes not yet
read (a reaction is a glance, not a request).
"""

from __future__ import annotations

NOTES_KEPT = 10  # per agent: the latest, if many come before its next request


class Asides:
    """Each agent's notes not yet read."""

    def __init__(self) -> None:
        self._notes: dict[str, list[str]] = {}

    def add(self, agent: str, note: str) -> None:
        notes = self._notes.setdefault(agent, [])
        notes.append(note)
        del notes[:-NOTES_KEPT]

    def pending(self, agent: str) -> list[str]:
        return list(self._notes.get(agent, []))

    def take(self, agent: str, prefix: str) -> str:
        """``prefix`` with ``agent``'s notes before it (each read once)."""
        notes = self._notes.pop(agent, [])
        if not notes:
            return prefix
        element = "<caesar_reactions>\n" + "\n".join(notes) + "\n</caesar_reactions>"
        return f"{element}\n{prefix}" if prefix else element
