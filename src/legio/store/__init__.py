"""The praetorium and its sibling tables: SQLite through one aiosqlite connection, and the
castra's file store.

Modules:

- ``attachments``: `AttachmentStore`
- ``cardstore``: work cards, `Praetorium.cards` (what one turn changed on a project)
- ``checkstore``: `CheckStore`, projects' check runs
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
