"""The GitHub REST API source: see `source` for what it reads and the state it keeps."""

from trunkwatch.sources.github.api import RateLimited
from trunkwatch.sources.github.source import GitHubSource

__all__ = ["GitHubSource", "RateLimited"]
