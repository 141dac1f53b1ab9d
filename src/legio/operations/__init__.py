"""Operations: how a Legio that runs for months is seen and kept from outside.

The modules of this package are named relative to it (``runner`` is
``legio.operations.runner``):

- ``runner``: ``Operations``, owned by the engine: the watch (stuck turns, disk space),
  the daemon's parts started by ``legio run``, and the drain of ``/restart``.
- ``report``: what ``legio status`` and ``GET /health`` answer (JSON), and its text.
- ``control``: the status socket in the castra and its client; the health endpoint.
- ``systemd``: the notify protocol (``READY=1``, ``STOPPING=1``, ``STATUS=``, the watchdog).
- ``lag``: the event loop's lag, and what was running when it stalled.
- ``stuck``: turns whose agent's CLI has gone silent.
- ``logfile``: the rotated log file, its last lines, the last error logged.
- ``disk``: the castra's free space: a notice when low, no new files when nearly full.
"""
