"""A JSON REST API on the HTTP client: what GitHub's and Buildkite's clients share
(`net/github.py`, `net/buildkite.py`), each saying only its own headers and rate-limit rules.

- Paging follows `Link: rel="next"`, never off the API's host (the token goes with every
  request).
- Rate limits: a refusal the API's `rate_limited` rule recognises, or an answer saying no
  request is left (the API's `remaining_header` at `0`, after which that answer is still
  used), raises RateLimited, and every later call of the client raises it again without
  touching the network. `RateLimited.until(now)`: Retry-After, else the API's own reset
  rule, else one minute.
- Any other non-2xx answer is an ApiError of kind `auth` (401, 403), `http_4xx` or
  `http_5xx`, with the API's `message`.
- Time budget: with a `deadline` (a `time.monotonic()` value), a request that would likely
  end after it (now + the slowest answer seen so far) is not sent: OutOfTime.

Errors name the method, the path and the query (these APIs' queries carry no credential),
never the token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar
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

DEFAULT_RATE_LIMIT_WAIT = timedelta(minutes=1)
MAX_PAGES = 10  # of a listing read to its end: 1,000 items at 100 a page

# When an API's rate limit resets, from an answer's headers (None: it does not say).
ResetRule = Callable[[dict[str, str], datetime], datetime | None]


class ApiError(HttpError):
    """The API answered, and not with success (nor a rate limit): `response` is its answer."""

    def __init__(self, kind: str, where: str, reason: str, response: Response) -> None:
        super().__init__(kind, where, reason)
        self.response = response

    def answered(self) -> str:
        """`<method> <path> answered <status>: <the API's message>`, as receivers report it."""
        said = self.response.said()
        return f"{self.response.where} answered {self.response.status}" + (f": {said}" if said else "")


class RateLimited(HttpError):
    """The API asked for no request for a while."""

    def __init__(self, where: str, reason: str, response: Response, reset: ResetRule) -> None:
        super().__init__("rate_limited", where, reason)
        self.response = response
        self._reset = reset

    def until(self, now: datetime) -> datetime:
        """No request before this: Retry-After, else the API's reset, else one minute."""
        headers = self.response.headers
        seconds = retry_after_seconds(headers.get("retry-after"), now)
        if seconds is not None:
            return now + timedelta(seconds=seconds)
        reset = self._reset(headers, now)
        return max(reset, now) if reset is not None else now + DEFAULT_RATE_LIMIT_WAIT


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


class RestApi:
    """The calls of one poll, one delivery or one trunk's rerun requests (see the module).
    Subclasses set `remaining_header`, their headers (`headers`) and `reset`."""

    remaining_header: ClassVar[str] = ""  # lowercased; "0" there: no request is left

    def __init__(
        self, http: HttpClient, api_url: str, token: str | None, deadline: float | None = None
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._http = http
        self._headers = self.headers(token)
        self._stop: RateLimited | None = None
        self.deadline = deadline
        self.requests = 0
        self.slowest_s = 0.0  # the slowest answer so far: what the next one may take

    def __repr__(self) -> str:  # never show the token
        return f"{type(self).__name__}({self.api_url!r})"

    def headers(self, token: str | None) -> dict[str, str]:
        """What every request carries."""
        return {"Authorization": f"Bearer {token}"} if token else {}

    @staticmethod
    def reset(headers: dict[str, str], now: datetime) -> datetime | None:
        """When the rate limit resets, by the answer's headers."""
        return None

    def rate_limited(self, response: Response) -> bool:
        """Whether a 403/429 is a rate limit rather than a refused credential."""
        return says_rate_limited(response)

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
        """POST, PUT, PATCH, ... with `payload` as JSON; a 2xx answer, or ApiError."""
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
        if response.headers.get(self.remaining_header, "").strip() == "0":
            # The last request of the window: its answer is used, the next call stops.
            self._stop = RateLimited(here, "rate limit exhausted", response, self.reset)
        if (response.status == 304 and bool(etag)) or 200 <= response.status < 300:
            return response
        raise self._refused(here, response)

    def _refused(self, here: str, response: Response) -> HttpError:
        status, said = response.status, response.said()
        tail = f": {said}" if said else ""
        if status in (403, 429) and self.rate_limited(response):
            self._stop = RateLimited(here, f"HTTP {status}, rate limited{tail}", response, self.reset)
            return self._stop
        if status in (401, 403):
            # Not a rate limit: the token is missing, wrong or lacks access. Waiting helps not.
            return ApiError("auth", here, f"HTTP {status}, check the token and its access{tail}", response)
        kind = "http_5xx" if status >= 500 else "http_4xx"
        return ApiError(kind, here, f"HTTP {status}{tail}", response)

    def _next(self, here: str, response: Response) -> str | None:
        target = next_link(response)
        if target is not None and not target.startswith(f"{self.api_url}/"):
            raise HttpError("malformed", here, f"Link rel=next points outside {self.api_url}")
        return target
