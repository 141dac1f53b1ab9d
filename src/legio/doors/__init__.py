"""The door's rooms: ``LegioApp``'s methods for one kind of work each, as mixins it is
made of (the door stays one object for the front-ends).

Modules:

- ``workdoor``: ``WorkDoor``: projects (``/diff``, ``/projects``, ``/drop``), work cards,
  checks, and the forge (Publish, CI events, issues)
- ``opsdoor``: ``OperationsDoor``: the daemon seen from outside (status, health, systemd,
  stuck turns), backups and the digest as events, ``/export``
- ``cockpitdoor``: ``CockpitDoor``: what only the cockpit reads (newest cards, open pull
  requests, the memoria)
"""
