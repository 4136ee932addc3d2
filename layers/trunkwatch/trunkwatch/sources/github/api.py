"""GitHub REST calls: headers, conditional requests, Link pagination, rate limits, errors.

Every failure becomes a SourceError whose message names the request's path (never the
token, which travels only in the Authorization header).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from trunkwatch.domain.clock import format_time
from trunkwatch.sources.base import SourceError
from trunkwatch.sources.github.models import Shape, ShapeError
from trunkwatch.sources.http import HttpClient, Response, parse_json, retry_after_seconds

API_VERSION = "2022-11-28"
# GitHub's advice for a secondary limit that names no wait: at least one minute.
DEFAULT_RATE_LIMIT_WAIT = timedelta(minutes=1)
MAX_ERROR_CHARS = 200

T = TypeVar("T")
U = TypeVar("U")

_LINK = re.compile(r'<([^>]*)>\s*;\s*rel="?([^";]*)"?')


class RateLimited(SourceError):
    """GitHub asked for no request before `until` (primary or secondary rate limit)."""

    def __init__(self, until: datetime, message: str, now: datetime) -> None:
        super().__init__("rate_limited", message, retry_after_s=max(0.0, (until - now).total_seconds()))
        self.until = until


class OutOfTime(SourceError):
    """The poll's time budget cannot fit another request; nothing was sent."""

    def __init__(self, message: str) -> None:
        super().__init__("budget", message)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One response: `data` is None when a conditional request got 304 Not Modified."""

    data: T | None
    etag: str | None
    next_url: str | None


def where(url: str) -> str:
    """Path and query of a URL: what error messages name (no host, no credentials)."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


class GitHubApi:
    """One poll's requests. After a rate limit (or `X-RateLimit-Remaining: 0`) every further
    call raises RateLimited without touching the network.

    With a `deadline` (a `time.monotonic()` value), a request that would likely end after it
    (now + the slowest answer seen so far) is not sent: OutOfTime is raised instead."""

    def __init__(
        self, base_url: str, token: str | None, http: HttpClient, now: datetime, deadline: float | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http
        self._now = now
        self._headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "trunkwatch",
        }
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._stop: RateLimited | None = None
        self.requests = 0
        self.deadline = deadline
        self.slowest_s = 0.0  # the slowest answer of this poll: what the next one may take

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def get(self, url: str, shape: Shape[T], etag: str | None = None) -> Page[T]:
        """GET one page; with `etag`, conditionally (If-None-Match)."""
        if self._stop is not None:
            raise self._stop
        if self.deadline is not None and time.monotonic() + self.slowest_s >= self.deadline:
            raise OutOfTime(f"GET {where(url)}: not sent, the poll's time budget is spent")
        headers = dict(self._headers)
        if etag:
            headers["If-None-Match"] = etag
        self.requests += 1
        started = time.monotonic()
        try:
            response = self._http.get(url, headers)
        except SourceError as err:
            if str(err).startswith("GET "):
                raise
            raise SourceError(err.kind, f"GET {where(url)}: {err}") from None
        finally:
            self.slowest_s = max(self.slowest_s, time.monotonic() - started)
        self._note_exhausted(url, response)
        if response.status == 304 and etag:
            return Page(None, etag, None)
        if response.status != 200:
            raise self._error(url, response)
        return Page(
            self._parse(url, response, shape), response.headers.get("etag"), self._next(url, response)
        )

    def get_all(self, url: str, shape: Shape[T], items: Callable[[T], list[U]]) -> Iterator[U]:
        """Every item of a paginated listing, following `Link: rel="next"` (unconditional)."""
        next_url: str | None = url
        while next_url:
            page = self.get(next_url, shape)
            assert page.data is not None  # an unconditional request never gets 304
            yield from items(page.data)
            next_url = page.next_url

    def _note_exhausted(self, url: str, response: Response) -> None:
        """A response that spends the last request of the window: use it, then stop."""
        if response.headers.get("x-ratelimit-remaining") == "0":
            until = self._reset_time(response) or self._now + DEFAULT_RATE_LIMIT_WAIT
            self._stop = RateLimited(
                until, f"GET {where(url)}: rate limit exhausted until {format_time(until)}", self._now
            )

    def _reset_time(self, response: Response) -> datetime | None:
        reset = response.headers.get("x-ratelimit-reset", "")
        if not reset.isdigit():
            return None
        return max(datetime.fromtimestamp(int(reset), UTC), self._now)

    def _retry_after(self, response: Response) -> datetime | None:
        seconds = retry_after_seconds(response.headers.get("retry-after"), self._now)
        return None if seconds is None else self._now + timedelta(seconds=seconds)

    def _error(self, url: str, response: Response) -> SourceError:
        message = _error_message(response)
        said = f": {message}" if message else ""
        if response.status in (403, 429):
            # Primary limit: remaining 0, wait for the reset. Secondary: Retry-After, else
            # (reset if remaining is 0) at least a minute. A 403 with none of these is a
            # permission problem, not a reason to back off.
            until = self._retry_after(response)
            if until is None and response.headers.get("x-ratelimit-remaining") == "0":
                until = self._reset_time(response)
            if until is None and (response.status == 429 or "rate limit" in message.lower()):
                until = self._now + DEFAULT_RATE_LIMIT_WAIT
            if until is not None:
                self._stop = RateLimited(
                    until,
                    f"GET {where(url)}: HTTP {response.status}, rate limited until "
                    f"{format_time(until)}{said}",
                    self._now,
                )
                return self._stop
        if response.status in (401, 403):
            return SourceError(
                "auth", f"GET {where(url)}: HTTP {response.status}, check the token and its access{said}"
            )
        if response.status >= 500:
            return SourceError("http_5xx", f"GET {where(url)}: HTTP {response.status}{said}")
        return SourceError("http_4xx", f"GET {where(url)}: HTTP {response.status}{said}")

    def _parse(self, url: str, response: Response, shape: Shape[T]) -> T:
        data = parse_json(response.body, f"GET {where(url)}: response")
        try:
            return shape.parse(data)
        except ShapeError as err:
            problems = "; ".join(f"{loc or '(body)'}: {what}" for loc, what in err.problems[:3])
            raise SourceError(
                "malformed", f"GET {where(url)}: unexpected response shape: {problems}"
            ) from None

    def _next(self, url: str, response: Response) -> str | None:
        for target, rel in _LINK.findall(response.headers.get("link", "")):
            if "next" in rel.split():
                # The token goes with every request: never follow a link off the API host.
                if not target.startswith(f"{self.base_url}/"):
                    raise SourceError(
                        "malformed", f"GET {where(url)}: Link rel=next points outside {self.base_url}"
                    )
                return str(target)
        return None


def _error_message(response: Response) -> str:
    """GitHub's `{"message": ...}` error body, shortened; '' when there is none."""
    try:
        body = json.loads(response.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return ""
    message = body.get("message") if isinstance(body, dict) else None
    return str(message)[:MAX_ERROR_CHARS] if message else ""
