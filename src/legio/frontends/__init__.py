"""Front-ends: they build ``Request`` values and talk to ``legio.app`` (the door) only;
``admin``, ``views``, ``checkviews`` and ``usage`` are shared by both, ``telegram`` and
``console`` are the two front-ends.

Modules:

- ``admin``: admin commands for every front-end
- ``checkviews``: pure text of projects' checks (a card's and `/projects`' badge, the
  Checks button's report)
- ``forgelines``: ``/publish``, ``/issues`` and the lines of forge events
- ``digestview``: pure text of the morning digest and of a failed backup
- ``statusview``: the words of a typed ``Status`` (what an agent does now)
- ``numbers``: the numbers in commands, answers and buttons (the digits 0-9 only)
- ``usage``: pure text of `/usage`
- ``views``: pure text rendering of admin answers
- ``console/``: see its own docstring.
- ``telegram/``: see its own docstring.
- ``undolines``: ``/undo``: what undo kept, and bringing it back
- ``web/``: the cockpit, a web page inside Telegram; see its own docstring.
"""
