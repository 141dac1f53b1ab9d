"""fence."""
