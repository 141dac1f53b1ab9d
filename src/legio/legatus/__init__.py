"""The Legatus: Caesar's counterpart — routing each message, keeping the books, its own
session and tools, and Caesar's files and voice notes on the way in.

Modules:

- ``conversations``: `Pointer` (what a message replies to, as plain data), replies
  routed to the replied-to agent and linked,…
- ``intake``: files from Caesar
- ``mentions``: who a message addresses: its @mentions of centuriones
- ``recovery``: what a restart left: requests an addressed agent never answered
- ``orchestrator``: `Legatus`
- ``scheduling``: the Legatus's `schedule_job`, `list_jobs`, `cancel_job`
- ``toolbox``: the Legatus's six tools, given the praetorium, castra, sessions and
  dispatcher explicitly
"""
