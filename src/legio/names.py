"""The names Legio gives to the members of a conversation, defined once.

``caesar`` is the owner, ``legatus`` the orchestrator, ``all`` the audience that means
every centurio. A centurio's name (and so any member of a nuntius's audience) matches
``NAME``: 1-32 characters, a lowercase letter first, then lowercase letters, digits,
``-`` or ``_``. The reserved names can never be centuriones.
"""

from __future__ import annotations

import re

CAESAR = "caesar"
LEGATUS = "legatus"
BROADCAST = "all"
SCHEDULER = "scheduler"  # the sender of scheduled jobs' nuntii
RESERVED_NAMES = frozenset({CAESAR, LEGATUS, BROADCAST, SCHEDULER})
PRIVILEGED = frozenset({CAESAR, LEGATUS})  # they see every nuntius
NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}\Z")
NAME_RULE = "1-32 characters, a lowercase letter first, then lowercase letters, digits, '-' or '_'"
