"""What a front-end hands Legio and how Legio talks back: shared value types.

A front-end turns one message of Caesar's into one frozen ``Request`` (its words, where it
came from, its files, what it replies to, the topic and project it was written in, when it
arrived) and gives the door (``LegioApp``) that value with a ``Watch``: the live view the
engine reports to while agents work (status lines, streamed text) and hands each reply to.
Nothing between the front-end and the agent's turn unpacks or re-packs the request: adding
a field is a change where it is set and where it is read.

This module sits at the bottom of the layers (like ``errors`` and ``names``): it imports
nothing of Legio's, so every layer may use its types.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

PHOTO_LIMIT = 10 * 1024 * 1024  # Bot API sendPhoto

StatusKind = Literal[
    "queued",  # waiting behind an earlier request of the same agent
    "thinking",  # the model thinks (no tool, no text yet)
    "tool",  # a tool runs: ``tool`` its short name, ``target`` what it touches
    "writing",  # its answer is being written: ``target`` the first words
    "compacting",  # writing a summary of its conversation: ``note`` why ("full": no room)
    "retrying",  # the Claude API refused or fell: ``note`` says what and when it tries again
    "approval",  # waiting for Caesar's approval of ``target`` (a command, a path, a URL)
    "question",  # waiting for Caesar's answer to its question
    "paused",  # a plan limit: ``note`` until when
]


@dataclass(frozen=True)
class Status:
    """What one agent is doing now, as data: each front-end words it (``frontends/views``)."""

    agent: str
    kind: StatusKind
    tool: str = ""  # "tool": the tool's short name (``Bash``, ``Edit``, ``dispatch``, …)
    target: str = ""  # what the tool touches; "writing": its text so far; "approval": what waits
    note: str = ""  # the words a kind needs ("retrying", "paused", "compacting")
    project: str | None = None  # the project it works on for this request
    since: float = field(default_factory=time.time)  # when this began (epoch seconds)

    @property
    def waits_for_caesar(self) -> bool:
        """Whether the agent waits for Caesar (an approval, an answer) or a plan limit."""
        return self.kind in ("approval", "question", "paused")


StatusCallback = Callable[[Status], Awaitable[None]]
TextCallback = Callable[[str, str], Awaitable[None]]  # (agent, its message's text so far)


@dataclass(frozen=True)
class PendingFile:
    """An incoming file whose nuntius is not stored yet (``sha256`` once downloaded)."""

    origin: str
    text: str
    kind: str
    mime_type: str
    name: str
    size: int
    sha256: str | None = None
    file_id: str | None = None
    file_unique_id: str | None = None
    part: int = 0  # its place among the files of one message (an album)
    forwarded_from: str | None = None  # a forwarded file: where it came from (not Caesar)


@dataclass(frozen=True)
class Pointer:
    """What a message of Caesar's points at (a reply), as a front-end saw it."""

    seq: int | None = None  # the nuntius the replied-to message carries, if Legio knows it
    quote: str | None = None  # the part of it Caesar selected (Telegram's quote)
    text: str | None = None  # the words of a message Legio has no record of
    sender: str | None = None  # who wrote those, as Telegram names them
    topic: str | None = None  # the name of the topic the message was written in


@dataclass(frozen=True)
class Request:
    """One message of Caesar's, as a front-end received it."""

    text: str
    origin: str | None = None  # e.g. ``telegram:<chat>:<message>``: delivered twice, answered once
    attachments: tuple[PendingFile, ...] = ()  # its files, complete in the castra
    forwarded_from: str | None = None  # someone else's words: to the Legatus, no @dispatch
    pointer: Pointer | None = None  # what it replies to
    lane: str | None = None  # the agent whose topic it was written in (answers if none named)
    project: str | None = None  # the project of that topic, unless its text names one
    receipt: int | None = None  # when it arrived (``LegioApp.receive``); None: when handed over
    queue: bool = False  # ⏭ /queue: after the agent's running turn, never joining it
    plan: bool = False  # /plan: its turn in the CLI's plan mode; Caesar approves the plan
    model: str | None = None  # a [models] name for this request (🔀 Try again on another model)


@dataclass(frozen=True)
class SentFile:
    """An outgoing file stored in the castra, ready for the front-end."""

    path: Path
    name: str
    caption: str
    mime_type: str
    size: int
    source: Path
    sender: str = ""  # the centurio that sent it, when another agent's reply carries it

    @property
    def is_photo(self) -> bool:
        return (
            self.mime_type in ("image/jpeg", "image/png", "image/webp") and self.size <= PHOTO_LIMIT
        )


@dataclass(frozen=True)
class WorkCard:
    """What one agent's turn changed on a project: data for a front-end's work card."""

    id: int
    agent: str
    project: str
    branch: str
    base: str
    commits: int  # new commits in this turn
    files: int
    added: int
    removed: int
    uncommitted: int  # entries the copy held uncommitted after the turn
    check_id: int | None = None  # the project check run after this turn (None: no check)
    tip: str = ""  # the branch's commit after this turn: what its Diff shows and Publish pushes
    publishable: bool = False  # a forge is configured for the project
    model: str | None = None  # the [models] name its turn ran on, when known
    plan_seq: int | None = None  # the plan Caesar agreed to before this turn (its nuntius)


@dataclass(frozen=True)
class CardDiff:
    """What a card's turn changed, for its Diff button: the diff of its commits (as git
    wrote them), the copy's uncommitted work then, apart, and what has moved since."""

    card: WorkCard
    committed: bytes
    uncommitted: bytes
    untracked: tuple[str, ...] = ()
    note: str | None = None  # e.g. the branch moved on since, or the copy was dropped
    problem: str | None = None  # why the commits could not be read


@dataclass(frozen=True)
class Reply:
    """One message for Caesar: who says it, what, and whether it is an answer. Data only:
    each front-end renders it (the ⚔️ header of a centurio's answer, a job's ⏰ mark)."""

    agent: str
    text: str
    kind: Literal["answer", "error", "interrupted", "notice", "held"] = "answer"
    files: tuple[SentFile, ...] = ()  # sent with send_file: to deliver after the text
    seq: int | None = None  # the answer's nuntius (a reply to its message points at it)
    project: str | None = None  # the project the agent worked on for it
    job: str | None = None  # the scheduled job it answers, by name
    model: str | None = None  # the model it was written by ([models] name), when known


@dataclass(frozen=True)
class Added:
    """Caesar's message added to an agent's running turn (a steer): the agent sees it at
    its next step. ``after()`` (⏭ "after this turn") puts it back in line behind the turn
    instead; False once the agent has it."""

    agent: str
    seq: int  # its nuntius
    after: Callable[[], bool]


ReplyCallback = Callable[[Reply], Awaitable[None]]
CardCallback = Callable[[WorkCard], Awaitable[None]]
AddedCallback = Callable[[Added], Awaitable[None]]


class Watch(Protocol):
    """How the engine talks back to the front-end about one request."""

    async def status(self, status: Status) -> None:
        """What an agent answering this request is doing now."""

    async def stream(self, agent: str, text: str) -> None:
        """``agent``'s answer so far, as it is written."""

    async def reply(self, reply: Reply) -> None:
        """One finished reply (an answer, a notice, an error), with its files."""

    async def card(self, card: WorkCard) -> None:
        """What an agent's turn for this request changed on a project, after its answer."""

    async def joined(self, added: Added) -> None:
        """This request joined an agent's running turn instead of waiting behind it."""

    def asker(self) -> Asker | None:
        """Who asks Caesar about this request's tool calls and questions (in its topic);
        None: the front-end's standing asker."""


@dataclass(frozen=True)
class Callbacks:
    """A ``Watch`` made of plain callbacks, any of them left out (a console, a test)."""

    on_status: StatusCallback | None = None
    on_text: TextCallback | None = None
    on_reply: ReplyCallback | None = None
    on_card: CardCallback | None = None
    asking: Asker | None = None
    on_joined: AddedCallback | None = None

    async def status(self, status: Status) -> None:
        if self.on_status is not None:
            await self.on_status(status)

    async def stream(self, agent: str, text: str) -> None:
        if self.on_text is not None:
            await self.on_text(agent, text)

    async def reply(self, reply: Reply) -> None:
        if self.on_reply is not None:
            await self.on_reply(reply)

    async def card(self, card: WorkCard) -> None:
        if self.on_card is not None:
            await self.on_card(card)

    async def joined(self, added: Added) -> None:
        if self.on_joined is not None:
            await self.on_joined(added)

    def asker(self) -> Asker | None:
        return self.asking


UNWATCHED = Callbacks()


def statuses(watch: Watch | None) -> Watch:
    """``watch`` told only what an agent does, not its text (a summary is not an answer)."""
    return Callbacks(on_status=watch.status) if watch is not None else UNWATCHED


# ---------------------------------------------------------------- asking Caesar

Choice = Literal["once", "session", "always", "deny", "stop"]
AskOutcome = Literal["once", "session", "always", "deny", "stop", "timeout", "cancelled"]


@dataclass
class ApprovalRequest:
    """One tool call waiting for Caesar. ``outcome`` is set when it ends (a front-end that
    is cancelled reads it: ``timeout`` or ``cancelled``)."""

    id: int
    agent: str
    tool: str  # the CLI's display name
    target: str  # the command, path or URL (shortened), or the input for other tools
    rules: tuple[str, ...]  # the rules it falls under (an opaque command: every Bash rule)
    reason: str = ""
    full_target: str = ""  # the whole command, path or URL, as it will run
    description: str = ""  # the agent's own words about the call: never checked, never alone
    opaque: str = ""  # why a command cannot be read word by word (then a grant is exact)

    def why_asked(self) -> str:
        """Which rule asks; for a command that cannot be read word by word, why it asks."""
        if self.opaque:
            return (
                f"⚠️ Not a plain command ({self.opaque}), so every Bash ask rule asks; "
                "Allow for this session and Always cover exactly this command."
            )
        return f"Rule: {', '.join(self.rules)}."

    timeout_s: float = 600.0
    outcome: AskOutcome | None = None


@dataclass(frozen=True)
class Decision:
    """Caesar's answer to an approval request; ``reason`` goes to the model on a deny."""

    choice: Choice
    reason: str = ""


@dataclass
class QuestionRequest:
    """An agent's questions (the CLI's ``AskUserQuestion`` input), waiting for Caesar."""

    id: int
    agent: str
    questions: list[dict[str, Any]]
    timeout_s: float = 600.0
    outcome: str | None = None
    plan: bool = False  # an agent's plan (ExitPlanMode): ✅ Go, ✏️ Change, ✖ Drop
    seq: int | None = None  # the plan's nuntius (a reply to its message points at it)


class Asker(Protocol):
    """How a front-end asks Caesar; both calls may be cancelled (read ``outcome``)."""

    async def approve(self, request: ApprovalRequest) -> Decision:
        """Caesar's decision on one tool call."""
        ...

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        """Caesar's answers (question text → chosen labels joined by ", "), or None."""
        ...


# ---------------------------------------------------------------- the forge


@dataclass(frozen=True)
class FailedJob:
    """A failing CI job of a pull request Legio opened."""

    name: str
    url: str
    tail: str  # its log's last lines: bounded, escaped, the forge's words (never Caesar's)


ForgeKind = Literal["ci_passed", "ci_failed", "merged", "closed", "changes_requested"]


@dataclass(frozen=True)
class ForgeEvent:
    """Something the forge said about a pull request Legio opened (``follow_forge``):
    CI settled green (``ci_passed``) or red (``ci_failed``, with ``jobs``), the pull
    request merged or closed by hand (following stops), or a review asking for changes
    (``changes_requested``, with ``comments``: reviewers' words, bounded and escaped)."""

    kind: ForgeKind
    project: str
    agent: str
    number: int
    url: str
    sha: str = ""  # the head commit the event is about
    jobs: tuple[FailedJob, ...] = ()
    comments: tuple[str, ...] = ()
    reviewer: str = ""


ForgeCallback = Callable[[ForgeEvent], Awaitable[None]]


@dataclass(frozen=True)
class BackupFailed:
    """An automatic backup failed (``[backup] every``): said to Caesar, who may fix it."""

    error: str  # what went wrong, in words (names the folder and the cause)
    folder: str  # where the archives go


@dataclass(frozen=True)
class Stuck:
    """A turn whose agent's CLI has sent nothing for a while (``[sessions] stuck_minutes``):
    said once to Caesar, in its lane, who may stop it or keep waiting."""

    agent: str
    seq: int  # the nuntius being answered (0: not a request's, e.g. a summary)
    silent_for_s: float
    project: str | None = None


StuckCallback = Callable[[Stuck], Awaitable[None]]
