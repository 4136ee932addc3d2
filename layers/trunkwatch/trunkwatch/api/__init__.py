"""The silences/alerts HTTP API: a compatible subset of Alertmanager's API v2."""

from trunkwatch.api.routes import resolver

__all__ = ["resolver"]
