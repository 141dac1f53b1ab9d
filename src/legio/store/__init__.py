"""The praetorium and its sibling tables: SQLite through one aiosqlite connection."""
