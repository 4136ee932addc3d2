"""GitHub's REST API on the HTTP client: the one place that speaks it, for the `github`
source, the GitHub receivers and the rerun requests of `confirm: rerun`.

- Every request carries `Accept: application/vnd.github+json`, `X-GitHub-Api-Version:
  2022-11-28` and, with a token, `Authorization: Bearer <token>`.
- Paging follows `Link: rel="next"`, never off the API's host (the token goes with every
  request).
- Rate limits (design.md §2): a 403/429 that is a rate limit, or an answer saying no request
  is left (`X-RateLimit-Remaining: 0`, after which that answer is still used), raises
  RateLimited, and every later call of the client raises it again without touching the
  network. `RateLimited.until(now)`: from Retry-After, else X-RateLimit-Reset, else one
  minute (GitHub's advice for a secondary limit that names no wait).
- Any other non-2xx answer is a GitHubError of kind `auth` (401, 403), `http_4xx` or
  `http_5xx`, with GitHub's `message`.
- Time budget: with a `deadline` (a `time.monotonic()` value), a request that would likely
  end after it (now + the slowest answer seen so far) is not sent: OutOfTime.

Errors name the method, the path and the query (GitHub's queries carry no credential),
never the token.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from trunkwatch.net.http import (
    HttpClient,
    HttpError,
    Response,
    next_link,
    parse_json,
    retry_after_seconds,
    says_rate_limited,
)

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"  # GitHub Enterprise: https://<host>/api/v3
DEFAULT_RATE_LIMIT_WAIT = timedelta(minutes=1)
MAX_PAGES = 10  # of a listing read to its end: 1,000 items at 100 a page


class GitHubError(HttpError):
    """GitHub answered, and not with success (nor a rate limit): `response` is its answer."""

    def __init__(self, kind: str, where: str, reason: str, response: Response) -> None:
        super().__init__(kind, where, reason)
        self.response = response

    def answered(self) -> str:
        """`<method> <path> answered <status>: <GitHub's message>`, as receivers report it."""
        said = self.response.said()
        return f"{self.response.where} answered {self.response.status}" + (f": {said}" if said else "")


class RateLimited(HttpError):
    """GitHub asked for no request for a while (a primary or secondary rate limit)."""

    def __init__(self, where: str, reason: str, response: Response) -> None:
        super().__init__("rate_limited", where, reason)
        self.response = response

    def until(self, now: datetime) -> datetime:
        """No request before this: Retry-After, else X-RateLimit-Reset, else one minute."""
        headers = self.response.headers
        seconds = retry_after_seconds(headers.get("retry-after"), now)
        if seconds is not None:
            return now + timedelta(seconds=seconds)
        reset = headers.get("x-ratelimit-reset", "")
        if headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
            return max(datetime.fromtimestamp(int(reset), UTC), now)
        return now + DEFAULT_RATE_LIMIT_WAIT


class OutOfTime(HttpError):
    """The time budget cannot fit another request; nothing was sent."""

    def __init__(self, where: str) -> None:
        super().__init__("budget", where, "not sent, the time budget is spent")


@dataclass(frozen=True)
class Page:
    """One GET's answer: `data` is its JSON, None when a conditional request got 304."""

    data: Any
    etag: str | None
    next_url: str | None
    where: str  # method, path and query: what errors about it name


def where(method: str, url: str) -> str:
    """`<method> <path>?<query>`: what errors name (no host, no credential)."""
    parts = urlsplit(url)
    return f"{method} {parts.path}" + (f"?{parts.query}" if parts.query else "")


class GitHub:
    """The calls of one poll, one delivery or one trunk's rerun requests (see the module)."""

    def __init__(
        self, http: HttpClient, api_url: str, token: str | None, deadline: float | None = None
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._http = http
        self._headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._stop: RateLimited | None = None
        self.deadline = deadline
        self.requests = 0
        self.slowest_s = 0.0  # the slowest answer so far: what the next one may take

    def __repr__(self) -> str:  # never show the token
        return f"GitHub({self.api_url!r})"

    def url(self, path: str) -> str:
        return f"{self.api_url}{path}"

    def get(self, url: str, etag: str | None = None) -> Page:
        """GET one page; with `etag`, conditionally (If-None-Match)."""
        here = where("GET", url)
        response = self._request("GET", url, etag=etag)
        if response.status == 304:
            return Page(None, etag, None, here)
        try:
            data = parse_json(response.body)
        except ValueError as err:
            raise HttpError("malformed", here, f"response {err}") from None
        return Page(data, response.headers.get("etag"), self._next(here, response), here)

    def pages(self, url: str, max_pages: int | None = None) -> Iterator[Page]:
        """Every page of a listing (unconditionally), following `Link: rel="next"`."""
        next_url: str | None = url
        read = 0
        while next_url and (max_pages is None or read < max_pages):
            page = self.get(next_url)
            read += 1
            yield page
            next_url = page.next_url

    def items(self, url: str, max_pages: int = MAX_PAGES) -> Iterator[dict[str, Any]]:
        """The objects of a listing whose pages are JSON lists (issues, comments)."""
        for page in self.pages(url, max_pages):
            if not isinstance(page.data, list):
                raise HttpError("malformed", page.where, "a listing answered no list")
            yield from (item for item in page.data if isinstance(item, dict))

    def send(self, method: str, url: str, payload: dict[str, Any] | None = None) -> Response:
        """POST, PATCH, ... with `payload` as JSON; a 2xx answer, or GitHubError."""
        return self._request(method, url, payload=payload)

    def _request(
        self, method: str, url: str, etag: str | None = None, payload: dict[str, Any] | None = None
    ) -> Response:
        if self._stop is not None:
            raise self._stop
        here = where(method, url)
        if self.deadline is not None and time.monotonic() + self.slowest_s >= self.deadline:
            raise OutOfTime(here)
        headers = dict(self._headers)
        if etag:
            headers["If-None-Match"] = etag
        self.requests += 1
        started = time.monotonic()
        try:
            if method == "GET":
                response = self._http.get(url, headers)
            else:
                response = self._http.send(method, url, headers, payload)
        finally:
            self.slowest_s = max(self.slowest_s, time.monotonic() - started)
        if response.headers.get("x-ratelimit-remaining") == "0":
            # The last request of the window: its answer is used, the next call stops.
            self._stop = RateLimited(here, "rate limit exhausted", response)
        if (response.status == 304 and bool(etag)) or 200 <= response.status < 300:
            return response
        raise self._refused(here, response)

    def _refused(self, here: str, response: Response) -> HttpError:
        status, said = response.status, response.said()
        tail = f": {said}" if said else ""
        if status in (403, 429) and says_rate_limited(response):
            self._stop = RateLimited(here, f"HTTP {status}, rate limited{tail}", response)
            return self._stop
        if status in (401, 403):
            # Not a rate limit: the token is missing, wrong or lacks access. Waiting helps not.
            return GitHubError("auth", here, f"HTTP {status}, check the token and its access{tail}", response)
        kind = "http_5xx" if status >= 500 else "http_4xx"
        return GitHubError(kind, here, f"HTTP {status}{tail}", response)

    def _next(self, here: str, response: Response) -> str | None:
        target = next_link(response)
        if target is not None and not target.startswith(f"{self.api_url}/"):
            raise HttpError("malformed", here, f"Link rel=next points outside {self.api_url}")
        return target
