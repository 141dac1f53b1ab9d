"""``/publish`` and ``/issues``: the forge's admin commands, for every front-end, and the
one-line texts of forge events (``event_line``) a front-end posts in the agent's lane.

Registered in ``legio.frontends.admin``'s ``COMMANDS`` table. ``/publish <agent> <project>``
shows what would be posted (``preview_parts``: the pull request's title and body exactly,
as plain text) and the command that posts it, ``/publish <agent> <project> post <digest>``:
the digest names that very preview, so a branch or a text that changed since is shown
again, never posted unseen (Telegram asks with buttons instead: ``telegram.publishview``).
A push refused as not a fast-forward says so and how to force it (``… post <digest>
force``: Caesar's explicit word, and then only Legio's own branch moves). Every text from
the forge shown here is cleaned (bounded, no control characters) by the engine.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from legio.doors.workdoor import WorkDoor
from legio.errors import ForgeError, ProjectError, PushRejected
from legio.forge.base import Issue
from legio.forge.publish import Published, PublishPreview
from legio.frontends.views import paginate
from legio.request import ForgeEvent
from legio.visible import visible_name


class HasWork(Protocol):
    """What a command needs of ``legio.frontends.admin.Admin`` (or anything that runs it):
    the door's work room."""

    work: WorkDoor


MAX_TITLE = 100


def published_text(done: Published) -> str:
    """What Caesar is told after Publish."""
    what = "Opened" if done.created else "Updated"
    pushed = "pushed" if done.pushed else "already on the forge"
    return (
        f"🚀 {what} pull request #{done.number} of {done.agent} on #{done.project}: {done.url}\n"
        f"{done.branch} → {done.base} ({done.commit[:12]} {pushed})."
    )


def preview_parts(preview: PublishPreview, force: bool = False) -> list[tuple[str, bool]]:
    """What Publish will post, as pieces of one text: (words, shown preformatted). The
    title and the body are exactly what is posted (already inert and visible:
    ``legio.forge.prtext``); a front-end shows them as plain text, never rendered."""
    replacing = f", replacing the forge's {visible_name(preview.branch)}" if force else ""
    head = (
        f"🚀 The pull request of {preview.agent} on #{preview.project}, to post on "
        f"{preview.repo}: {visible_name(preview.branch)} → {visible_name(preview.base)} at "
        f"{preview.commit[:12]}{replacing}.\n"
        "Exactly this text is posted: the agent's HTML comments removed; its HTML, issue "
        "references and @mentions made inert; hidden characters shown as ⟨U+XXXX⟩.\n\n"
    )
    if preview.closes:
        head += (
            "⚠️ Its commits' messages say "
            + "; ".join(f"“{words}”" for words in preview.closes)
            + ": the forge closes those issues when the commits reach its default branch "
            "(Legio pushes the commits as they are).\n\n"
        )
    head += "Title:\n"
    return [(head, False), (preview.title, True), ("\n\nBody:\n", False), (preview.body, True)]


def event_line(event: ForgeEvent) -> str:
    """One line about a forge event, for the agent's lane."""
    pull = f"#{event.number} ({event.project}, {event.agent})"
    if event.kind == "ci_passed":
        return f"✅ CI passed on pull request {pull}: {event.url}"
    if event.kind == "ci_failed":
        names = ", ".join(job.name for job in event.jobs) or "a check"
        return f"❌ CI failed on pull request {pull}: {names}. {event.url}"
    if event.kind == "changes_requested":
        who = event.reviewer or "a reviewer"
        return f"💬 {who} asked for changes on pull request {pull}: {event.url}"
    if event.kind == "merged":
        return f"🟣 Pull request {pull} was merged: following it stops. {event.url}"
    return f"⚪ Pull request {pull} was closed: following it stops. {event.url}"


def _age(created_at: str, now: datetime) -> str:
    try:
        then = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    days = (now - then).days
    if days >= 1:
        return f"{days}d"
    hours = int((now - then).total_seconds() // 3600)
    return f"{hours}h" if hours else "new"


def issue_lines(project: str, issues: list[Issue], now: datetime | None = None) -> list[str]:
    """``/issues``: number, title, labels, age — one line each."""
    now = now or datetime.now(UTC)
    if not issues:
        return [f"#{project} has no open issue."]
    lines = [f"Open issues of #{project} (newest first):"]
    for issue in issues:
        title = visible_name(" ".join(issue.title.split()))  # someone else's words
        title = title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 1] + "…"
        shown = (visible_name(" ".join(label.split())) for label in issue.labels)
        labels = f" [{', '.join(shown)}]" if issue.labels else ""
        lines.append(f"#{issue.number} {title}{labels} · {_age(issue.created_at, now)}")
    return lines


PUBLISH_USAGE = "/publish <agent> <project> [force], e.g. /publish vorenus #app"


def publish_words(args: str) -> tuple[str, bool, str]:
    """``/publish``'s words: the agent and project, ``force``, and ``post <digest>``."""
    words = args.split()
    force = bool(words) and words[-1].lower() == "force"
    if force:
        words = words[:-1]
    digest = ""
    if len(words) >= 2 and words[-2].lower() == "post":
        digest, words = words[-1].lower(), words[:-2]
    return " ".join(words), force, digest


async def cmd_publish(admin: HasWork, args: str) -> list[str]:
    words, force, digest = publish_words(args)
    try:
        target = admin.work.project_target(words, PUBLISH_USAGE)
        preview = await admin.work.branch_preview(target.agent, target.project)
        if digest != preview.digest:
            confirm = f"/publish {words} post {preview.digest}{' force' if force else ''}"
            pages = paginate("".join(part for part, _ in preview_parts(preview, force)).split("\n"))
            changed = (
                [
                    "⚠️ What would be posted changed since the preview you quoted: nothing was "
                    "posted. This is what would be posted now."
                ]
                if digest
                else []
            )
            return [*changed, *pages, f"To post exactly this: {confirm}"]
        done = await admin.work.publish(preview, force)
    except PushRejected as e:
        text = f"The forge refused the push: {e.reason}"
        if e.non_fast_forward:
            text += (
                f"\nThe forge's branch has commits {target.agent}'s does not. To replace it "
                f"with the agent's (only Legio's own branch moves): /publish {words} post "
                f"{digest} force"
            )
        return [text]
    except (ForgeError, ProjectError) as e:
        return [f"Not published: {e}"]
    return [published_text(done)]


async def cmd_issues(admin: HasWork, args: str) -> list[str]:
    names = admin.work.project_names()
    words = [w.lstrip("#").lower() for w in args.split()]
    project = words[0] if words else (names[0] if len(names) == 1 else "")
    if project not in names:
        listing = ", ".join(f"#{n}" for n in names) or "none"
        return [f"Use /issues #project, one of: {listing}."]
    try:
        issues = await admin.work.forge_issues(project)
    except (ForgeError, ProjectError) as e:
        return [f"Cannot list the issues of #{project}: {e}"]
    return paginate(issue_lines(project, issues))
