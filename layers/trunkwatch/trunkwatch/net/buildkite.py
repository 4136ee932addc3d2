"""Buildkite's REST API on the HTTP client (`net/rest.py`): what the `buildkite` source reads.

- Every request carries `Accept: application/json` and, with a token, `Authorization: Bearer
  <token>` (an API access token; reading builds needs its `read_builds` scope).
- Rate limits: Buildkite allows an organization a number of requests a minute and says what
  is left in `RateLimit-Remaining`, and in `RateLimit-Reset` the seconds until the window
  starts again; over the limit it answers 429. Either ends the poll: RateLimited, with
  `until` from Retry-After, else RateLimit-Reset, else one minute.
- Paging (`Link: rel="next"`), errors and the time budget are `net/rest.py`'s.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from trunkwatch.net.rest import RestApi

DEFAULT_API_URL = "https://api.buildkite.com"
WEB_URL = "https://buildkite.com"


class Buildkite(RestApi):
    """The calls of one poll (see the module)."""

    remaining_header = "ratelimit-remaining"

    def headers(self, token: str | None) -> dict[str, str]:
        return {"Accept": "application/json", **super().headers(token)}

    @staticmethod
    def reset(headers: dict[str, str], now: datetime) -> datetime | None:
        seconds = headers.get("ratelimit-reset", "").strip()
        return now + timedelta(seconds=int(seconds)) if seconds.isdigit() else None

    def pipeline_path(self, pipeline: str) -> str:
        """`/v2/organizations/{org}/pipelines/{slug}` of an `org/slug` pipeline."""
        org, slug = pipeline.split("/", 1)
        return f"/v2/organizations/{org}/pipelines/{slug}"
