"""Memoria: the legion's shared file memory (edicta, acta, commentarii) and its MCP tools."""

from legio.errors import MemoriaError
from legio.memoria.store import Document, Listing, MemoriaStore

__all__ = ["Document", "Listing", "MemoriaError", "MemoriaStore"]
