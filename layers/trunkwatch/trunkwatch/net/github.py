"""GitHub's REST API on the HTTP client (`net/rest.py`): the one place that speaks it, for the
`github` source, the GitHub receivers and the rerun requests of `confirm: rerun`.

- Every request carries `Accept: application/vnd.github+json`, `X-GitHub-Api-Version:
  2022-11-28` and, with a token, `Authorization: Bearer <token>`.
- Rate limits (design.md §2): a 403/429 that is a rate limit, or an answer saying no request
  is left (`X-RateLimit-Remaining: 0`, after which that answer is still used), raises
  RateLimited. `RateLimited.until(now)`: from Retry-After, else X-RateLimit-Reset (epoch
  seconds), else one minute (GitHub's advice for a secondary limit that names no wait).
- Paging, errors (`GitHubError`: `auth`, `http_4xx`, `http_5xx` with GitHub's `message`) and
  the time budget are `net/rest.py`'s.
"""

from __future__ import annotations

from datetime import UTC, datetime

from trunkwatch.net.rest import ApiError, OutOfTime, Page, RateLimited, RestApi, where

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"  # GitHub Enterprise: https://<host>/api/v3

GitHubError = ApiError  # what GitHub's refusals are called where only GitHub is spoken


class GitHub(RestApi):
    """The calls of one poll, one delivery or one trunk's rerun requests (see the module)."""

    remaining_header = "x-ratelimit-remaining"

    def headers(self, token: str | None) -> dict[str, str]:
        return {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            **super().headers(token),
        }

    @staticmethod
    def reset(headers: dict[str, str], now: datetime) -> datetime | None:
        reset = headers.get("x-ratelimit-reset", "")
        if headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
            return datetime.fromtimestamp(int(reset), UTC)
        return None


__all__ = ["DEFAULT_API_URL", "GitHub", "GitHubError", "OutOfTime", "Page", "RateLimited", "where"]
