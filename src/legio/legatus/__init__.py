"""The Legatus: ``orchestrator`` (routing, bookkeeping, its own session) and ``tools`` (its
MCP tools, given their dependencies explicitly)."""
