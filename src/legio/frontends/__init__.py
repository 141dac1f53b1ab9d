"""Front-ends: they build ``Request`` values and talk to ``legio.app`` (the door) only;
``admin``, ``views`` and ``usage`` are shared by both, ``telegram`` and ``console`` are
the two front-ends.

Modules:

- ``admin``: admin commands for every front-end
- ``forgelines``: ``/publish``, ``/issues`` and the lines of forge events
- ``usage``: pure text of `/usage`
- ``views``: pure text rendering of admin answers
- ``console/``: see its own docstring.
- ``telegram/``: see its own docstring.
"""
