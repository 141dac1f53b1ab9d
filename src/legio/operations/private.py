"""What a starting daemon does to itself before anything else: room for descriptors.

``start_daemon_process`` runs first in ``legio run`` and ``legio console``: the soft
``RLIMIT_NOFILE`` raised to the hard one (a distribution's default soft limit, 1,024, is
what ~1,150 idle connections to the health endpoint once used up; the endpoint now holds
only a few, and the rest of the room is for agents' CLIs, checks and git).
"""

from __future__ import annotations

import logging
import resource

logger = logging.getLogger(__name__)

NOFILE_FALLBACK = 65536  # when the hard limit is "unlimited", which the kernel refuses


def raise_descriptor_limit() -> int:
    """Raise the soft descriptor limit to the hard one; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, NOFILE_FALLBACK)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as e:
            logger.warning("could not raise the descriptor limit to %s: %s", wanted, e)
            return soft
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def start_daemon_process() -> None:
    """What ``legio run`` and ``legio console`` do first (see the module docstring)."""
    raise_descriptor_limit()
