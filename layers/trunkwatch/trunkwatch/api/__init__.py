"""The silences/alerts HTTP API: a compatible subset of Alertmanager's API v2.

`resolver` is loaded on first access, so that the authorizer, which imports only
`trunkwatch.api.auth`, does not load the API's routes (Powertools' validating resolver and
pydantic) with this package.
"""

from typing import Any

__all__ = ["resolver"]


def __getattr__(name: str) -> Any:
    if name == "resolver":
        from trunkwatch.api.routes import resolver

        return resolver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
