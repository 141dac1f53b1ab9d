"""The praetorium and its sibling tables: SQLite through one aiosqlite connection, and the
castra's file store.

Modules:

- ``attachments``: `AttachmentStore`
- ``files``: `FileStore`
- ``grants``: Caesar's "always" grants and the approval requests (pending ones expire at
  start-up)
- ``jobstore``: `JobStore`
- ``lifecycle``: one daemon per castra (lock file)
- ``migrations``: the praetorium's schema
- ``praetorium``: `Praetorium`
- ``pullstore``: pull requests Legio opened on the forge, followed until closed
- ``records``: per-agent records, `Praetorium.records` (checkpoints, compactions, usage)
- ``threads``: `ThreadStore`
"""
