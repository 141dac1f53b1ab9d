"""Who a message of Caesar's addresses: its @mentions of centuriones.

``@name`` counts when it is not glued to a word before it (an e-mail address) nor followed
by more of a name (``@vorenus.com``); ``@all`` means every centurio; an unknown name is
plain text, except a centurio folder the roster could not use, returned with the reason.
``@name:model`` (``@vorenus:opus``) also asks for that request to run on a model named in
``[models]``; ``@legatus:haiku`` does so for the Legatus (the plain ``@legatus`` stays text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from legio.castra import Roster
from legio.names import BROADCAST, LEGATUS

# @name not glued to a word before it (e-mail addresses) nor followed by more of a name
MENTION = re.compile(
    r"(?<![\w.@+-])@([A-Za-z][A-Za-z0-9_-]{0,31})(?::([A-Za-z][A-Za-z0-9_-]{0,31}))?(?![\w-]|\.\w)"
)


@dataclass(frozen=True)
class Mentions:
    names: list[str]
    broadcast: bool
    unusable: list[str]
    models: dict[str, str] = field(default_factory=dict)  # name -> model name, this request


NO_MENTIONS = Mentions([], False, [])


def parse_mentions(text: str, roster: Roster) -> Mentions:
    """The centuriones ``text`` @mentions (roster order of first mention, no repeats).

    ``@all`` means every centurio. Unknown names are plain text, except folders the
    roster could not use, which are returned in ``unusable`` with the reason.
    """
    names: list[str] = []
    broadcast = False
    unusable: list[str] = []
    problems = {p.split(":", 1)[0].removeprefix("centuriones/"): p for p in roster.problems}
    models: dict[str, str] = {}
    for match in MENTION.finditer(text):
        name, model = match.group(1).lower(), match.group(2)
        if model and (name in roster.centuriones or name == LEGATUS):
            models.setdefault(name, model.lower())
        if name == BROADCAST:
            broadcast = True
        elif name in roster.centuriones and name not in names:
            names.append(name)
        elif name in problems and problems[name] not in unusable:
            unusable.append(problems[name])
    if broadcast:
        names = roster.names
    return Mentions(names, broadcast, unusable, models)


def strip_mentions(text: str) -> str:
    return MENTION.sub("", text).strip()
