"""Legio's exceptions: one root, ``LegioError``, whose message is meant for a person.

Every error a user can cause (a bad config, a bad name, a bad search query) is a
``LegioError`` subclass with a message that names the problem and the fix, so the
front-ends can show ``str(error)`` as it is and never a traceback. Every exception
Legio defines lives here. (The SDK's private parse error is imported where a turn is
read, ``legio.sessions.turn``: the daemon starts without the SDK.)
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "AgentInterrupted",
    "AttachmentError",
    "CastraError",
    "ConfigError",
    "ContextOverflow",
    "DuplicateOrigin",
    "ForgeError",
    "LegioError",
    "MemoriaError",
    "NothingToCompact",
    "PraetoriumError",
    "ProjectError",
    "PushRejected",
    "SearchQueryError",
    "TurnHeld",
    "VoiceError",
]


class LegioError(Exception):
    """Root of every error Legio raises on purpose."""


class ConfigError(LegioError):
    """``legio.toml`` cannot be read or does not validate."""

    def __init__(self, path: object, problems: list[str]) -> None:
        self.path = str(path)
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{self.path} is not a valid Legio config:\n{lines}")


class CastraError(LegioError):
    """The castra folder or one of its prompt files is unusable."""


class PraetoriumError(LegioError):
    """A request the praetorium cannot carry out, explained for a person."""


class SearchQueryError(PraetoriumError):
    """A search query that FTS5 cannot parse."""


class DuplicateOrigin(PraetoriumError):
    """A nuntius from this origin (e.g. this Telegram message) is already stored."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        super().__init__(f"a nuntius from {origin} is already stored")


class MemoriaError(LegioError):
    """A memoria request that cannot be carried out, worded for the agent or Caesar."""


class AgentError(LegioError):
    """An agent could not answer; ``reason`` says why (for logs and Caesar)."""

    def __init__(self, agent: str, reason: str) -> None:
        self.agent = agent
        self.reason = reason
        super().__init__(f"{agent}: {reason}")


class AgentInterrupted(AgentError):
    """The agent's query was interrupted (``/stop``, ``/reset``, shutdown)."""


class ContextOverflow(AgentError):
    """The model refused the query: the session's context is too long."""


class NothingToCompact(AgentError):
    """``/compact`` for an agent that has no conversation yet."""


class AttachmentError(LegioError):
    """A file Legio cannot take or send; the message is one line for Caesar or the agent."""


class DownloadLater(AttachmentError):
    """A download that failed for a passing reason (the network, Telegram busy): a file
    a restart cut off stays pending and is tried again at the next start."""


class TurnHeld(AgentError):
    """The turn did not start and the request stays unanswered (``/retry`` runs it):
    the day's budget is spent, or the plan's limit is reached. ``reason`` is for Caesar."""


class ProjectError(LegioError):
    """A project (``[projects.<name>]``) that cannot be used as asked: an unknown name, a
    path that is gone or no repository, a base branch missing, a git command that failed."""


class VoiceError(LegioError):
    """A voice note Legio cannot transcribe: empty, undecodable, too long, or the speech
    model cannot be fetched or loaded. The message is one line for Caesar."""


class ForgeError(LegioError):
    """The forge (GitHub) refused or could not be reached: ``reason`` is the forge's (or
    git's) own words ("Bad credentials", "Not Found", a 422's message), ``status`` the
    HTTP status (0: no answer, or git). The message never holds the token."""

    def __init__(self, what: str, reason: str, status: int = 0) -> None:
        self.what = what
        self.reason = reason
        self.status = status
        super().__init__(f"{what}: {reason}" if what else reason)


class PushRejected(ForgeError):
    """git push was refused (protected branch, no permission, not a fast-forward): ``reason``
    is git's and the forge's own words; ``non_fast_forward``: a force-push (of Legio's own
    branch, after Caesar confirms) would go through."""

    def __init__(self, what: str, reason: str, *, non_fast_forward: bool = False) -> None:
        super().__init__(what, reason)
        self.non_fast_forward = non_fast_forward
