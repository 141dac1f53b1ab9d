"""Operations: what keeps Legio whole over months without a look.

- ``backup``: ``legio backup``: one dated archive of the castra while the daemon runs (the
  praetorium by SQLite's online backup API, memoria, prompts, ``legio.toml`` without
  secrets), written to a ``.part`` file, synced and renamed; the newest ``keep`` kept
- ``restore``: ``legio restore``: a castra rebuilt from an archive, every member checked
  (no ``..``, no absolute path, no link), the praetorium's integrity and schema verified
- ``export``: ``legio export`` and ``/export``: the conversation as Caesar saw it (Markdown,
  HTML or JSON Lines), streamed in keyset-paged batches, in bounded memory
- ``digest``: the morning digest: a ``Digest`` value computed from the praetorium and the
  records only (never a model), tables added later read only when they exist
- ``commands``: the ``legio backup``, ``restore`` and ``export`` sub-commands
- ``routine``: the daemon's own timetable: automatic backups (``[backup] every``) with
  ``state/backups/last.json``, the digest at ``[digest] at``, events for the front-ends
"""
