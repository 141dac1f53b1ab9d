"""What the agent is asked when Caesar taps 🛠 Fix or 💬 Address on a forge event.

The request is an ordinary one, on the project, in the agent's lane; its words are
Legio's (what happened, what to do) and the forge's words come wrapped in
``<forge_text … untrusted="true">`` (``legio.forge.untrusted``): the jobs' log tails, the
reviewers' comments — bounded, escaped, never presented as Caesar's. Job and reviewer
names in Legio's own lines pass ``one_line`` (one line, escaped).
"""

from __future__ import annotations

from legio.forge.untrusted import LOG_LIMIT, NOTICE, one_line, wrap
from legio.request import ForgeEvent

MAX_ASK = 24_000


def fix_text(event: ForgeEvent) -> str:
    """The request for 🛠 Fix (``ci_failed``) or 💬 Address (``changes_requested``)."""
    where = f"pull request #{event.number} ({event.url}) on #{event.project}"
    if event.kind == "ci_failed":
        names = ", ".join(one_line(job.name) for job in event.jobs) or "(unnamed)"
        lines = [
            f"#{event.project} The CI of your {where} failed on commit {event.sha[:12]}: {names}.",
            "Find the cause, fix it on your branch, run the project's check, and commit. "
            "Publishing again updates the pull request.",
            NOTICE,
        ]
        for job in event.jobs:
            tail = job.tail or "(no log: see the job's page)"
            lines.append(wrap("log", tail, limit=LOG_LIMIT, job=job.name, url=job.url))
    elif event.kind == "changes_requested":
        lines = [
            f"#{event.project} {one_line(event.reviewer, 100) or 'A reviewer'} asked for "
            f"changes on your {where}.",
            "Address each comment on your branch, run the project's check, and commit. "
            "Publishing again updates the pull request.",
            NOTICE,
        ]
        lines += [wrap("review", words, reviewer=event.reviewer) for words in event.comments]
    else:
        lines = [f"#{event.project} Your {where} was {event.kind.replace('_', ' ')}."]
    return "\n\n".join(lines)[:MAX_ASK]
