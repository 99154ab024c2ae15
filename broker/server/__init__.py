"""server."""
