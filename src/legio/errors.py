"""Legio's exceptions: one root, ``LegioError``, whose message is meant for a person.

Every error a user can cause (a bad config, a bad name, a bad search query) is a
``LegioError`` subclass with a message that names the problem and the fix, so the
front-ends can show ``str(error)`` as it is and never a traceback.
"""

from __future__ import annotations


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
