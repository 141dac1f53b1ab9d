"""The forge token, held in Legio's memory alone.

The token is read from ``[forge] token_env`` once — by ``legio run`` before it starts
itself again without secrets in its environment (``legio.fence.launch`` hands it over
through the same inherited pipe as the bot token), or by ``scrub_environment`` just
before the variable leaves ``os.environ`` — and kept here. No agent, check, git or CLI
child gets it in its environment; the forge client asks ``forge_token`` for it, and
``redact`` takes it out of any text before that text is logged or shown.
"""

from __future__ import annotations

import os

from legio.config import Config

_KEPT: dict[str, str] = {}
REDACTED = "[token]"


def keep(name: str, value: str) -> None:
    """Hold ``value`` as the secret of variable ``name`` (empty values are not kept)."""
    if value.strip():
        _KEPT[name] = value.strip()


def keep_forge_token(config: Config) -> None:
    """Take the forge token from the environment into the vault, if it is set there."""
    name = config.forge_token_env()
    keep(name, os.environ.get(name, ""))


def forge_token(config: Config) -> str:
    """The forge token: from the environment while it is still there, else as kept."""
    keep_forge_token(config)
    return _KEPT.get(config.forge_token_env(), "")


def kept_values() -> list[str]:
    """Every secret held here (for ``legio.fence.tokenfiles``: files holding one are hidden)."""
    return [v for v in _KEPT.values() if v]


def redact(text: str) -> str:
    """``text`` with every secret held here replaced by ``[token]``."""
    for value in _KEPT.values():
        if value:
            text = text.replace(value, REDACTED)
    return text
