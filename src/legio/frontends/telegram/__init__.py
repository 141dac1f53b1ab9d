"""telegram."""
