"""The door's rooms: ``LegioApp`` keeps the messages, questions and actions every
front-end needs; each room here holds one kind of work, is one of the app's attributes,
and is given to the front-end parts that show that work.

Modules:

- ``workdoor``: ``WorkDoor`` (``app.work``): projects (``/diff``, ``/projects``,
  ``/drop``), work cards, checks, and the forge (Publish, CI events, issues)
- ``opsdoor``: ``OperationsDoor`` (``app.operations``): the daemon seen from outside
  (status, health, systemd, stuck turns), ``/export``
- ``talkdoor``: ``ConversationDoor`` (``app.conversation``): Telegram's conversation facts
  (messages and the nuntii they carry, topics, edits)
- ``inboxdoor``: ``InboxDoor`` (``app.inbox``): Caesar's files and voice notes
- ``cockpitdoor``: ``CockpitDoor`` (``app.cockpit``): what only the cockpit reads
  (newest cards, open pull requests, the memoria)
"""
