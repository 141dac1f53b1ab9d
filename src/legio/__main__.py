"""``python -m legio`` is the ``legio`` command."""

from legio.cli import main

raise SystemExit(main())
