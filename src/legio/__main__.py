"""``python -m legio`` is the ``legio`` command.

Its first step, before any other import: the tokens a restart handed over through a pipe
are read and the pipe closed, the process made non-dumpable first (``legio.fence.handoff``).
"""

from legio.fence import handoff

handoff.receive()

from legio.cli import main  # noqa: E402  (after the hand-over, on purpose)

raise SystemExit(main())
