"""The GitHub REST API source: see `source` for what it reads and the state it keeps."""

from trunkwatch.domain.config import TrunkConfig
from trunkwatch.sources.github.source import GitHubSource

WEB_URL = "https://github.com"


def trunk_link(trunk: TrunkConfig) -> str:
    """The repository's Actions page."""
    return f"{WEB_URL}/{trunk.repo}/actions"


def job_link(trunk: TrunkConfig, job: str, run_url: str) -> str:
    """The newest failing run itself: GitHub has no per-job history page."""
    return run_url


__all__ = ["GitHubSource", "job_link", "trunk_link"]
