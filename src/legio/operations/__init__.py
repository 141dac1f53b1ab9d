"""Operations: what keeps Legio whole over months without a look, and how it is seen from
outside.

The modules of this package are named relative to it (``runner`` is
``legio.operations.runner``):

- ``runner``: ``Operations``, owned by the engine: the watch (stuck turns, disk space),
  the daemon's parts started by ``legio run``, and the drain of ``/restart``.
- ``report``: what ``legio status`` and ``GET /health`` answer (JSON), and its text.
- ``control``: the status socket in the castra and its client; the health endpoint.
- ``private``: what ``legio run`` and ``legio console`` do to their own process first.
- ``systemd``: the notify protocol (``READY=1``, ``STOPPING=1``, ``STATUS=``, the watchdog).
- ``lag``: the event loop's lag, and what was running when it stalled.
- ``stuck``: turns whose agent's CLI has gone silent.
- ``logfile``: the rotated log file, its last lines, the last error logged.
- ``disk``: the castra's free space: a notice when low, no new files when nearly full.
- ``backup``: ``legio backup``: one dated archive of the castra while the daemon runs (the
  praetorium by SQLite's online backup API, memoria, prompts, ``legio.toml`` without
  secrets), written to a new random ``.part`` file (never through a link), synced and
  renamed; a folder other users can write refused
- ``backupfolder``: the backup folder as another local user sees it: who else can write
  it, files made 0600 without following links, Legio's archives recognised by owner and
  manifest (never by name), the newest ``keep`` kept
- ``restore``: ``legio restore``: a castra rebuilt from an archive, every member checked
  (no ``..``, no absolute path, no link), the praetorium's integrity and schema verified;
  the archive's ``legio.toml`` set aside, never applied
- ``restoreguard``: data, not control: only what a backup writes is restored (never
  ``castra/state/``), the schema equal to a fresh migration's, the archive's
  ``legio.toml`` compared with the running one
- ``export``: ``legio export`` and ``/export``: the conversation as Caesar saw it (Markdown,
  HTML or JSON Lines), streamed in keyset-paged batches, in bounded memory
- ``digest``: the morning digest: a ``Digest`` value computed from the praetorium and the
  records only (never a model), tables added later read only when they exist
- ``commands``: the ``legio backup``, ``restore`` and ``export`` sub-commands
- ``routine``: the daemon's own timetable: automatic backups (``[backup] every``) with
  ``state/backups/last.json``, the digest at ``[digest] at``, events for the front-ends
"""
