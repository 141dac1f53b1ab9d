"""Memoria: the legion's shared file memory (edicta, acta, commentarii) and its MCP tools.

Modules:

- ``store``: `MemoriaStore`
- ``tools``: the Legatus's full memoria server (11 tools), each centurio's scoped server
  (8 tools, plus `send_file`),…
"""

from legio.errors import MemoriaError
from legio.memoria.store import Document, Listing, MemoriaStore

__all__ = ["Document", "Listing", "MemoriaError", "MemoriaStore"]
