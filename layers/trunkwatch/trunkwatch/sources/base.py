"""What every source returns, the error it raises, and the HTTP client they share."""

from __future__ import annotations

import functools
import gzip
import json
import socket
from dataclasses import dataclass, field
from typing import Any

from trunkwatch.domain.cells import Commit, JobRun

DEFAULT_TIMEOUT_S = 10.0


class SourceError(Exception):
    """A poll that could not complete; nothing of it is written, the next poll catches up.

    `kind` names the cause for the metric dimension: timeout, http_5xx, rate_limited,
    http_4xx, malformed, network.
    """

    def __init__(self, kind: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class CommitResult:
    """One trunk commit and the job runs the source reported for it.

    `complete` means `runs` is every job of the commit (a job key missing from it has no
    cell there); otherwise only the job keys present are updated (the GitHub source
    re-fetches only the runs that changed).
    """

    commit: Commit
    runs: tuple[JobRun, ...]
    complete: bool = True


@dataclass
class Snapshot:
    """A source's view of the trunk, newest commit first, plus the source state to keep."""

    commits: list[CommitResult]
    # Opaque, JSON-serialisable state the source wants back next poll (ETags, run versions).
    state: dict[str, Any] = field(default_factory=dict)
    http_requests: int = 0
    # Set when a rate limit cut the poll short: what it returns is consistent and is stored,
    # the rest follows once the limit allows.
    rate_limited: SourceError | None = None


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as err:
            raise SourceError("malformed", f"response is not valid JSON: {err}") from None


_CREDENTIAL_HEADERS = {"authorization", "x-hud-internal-bot"}


@functools.cache
def _opener() -> Any:
    """Built by the first request, as is urllib.request itself: importing it loads ssl and
    http.client, and building the opener makes the default SSL context (reads the CA file)."""
    import urllib.parse
    import urllib.request

    class KeepCredentialsOnHost(urllib.request.HTTPRedirectHandler):
        """Follow redirects, but never carry a token to another host."""

        def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            if (
                new is not None
                and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc
            ):
                for name in [n for n in new.headers if n.lower() in _CREDENTIAL_HEADERS]:
                    del new.headers[name]
            return new

    return urllib.request.build_opener(KeepCredentialsOnHost)


class HttpClient:
    """urllib with gzip, a timeout and errors mapped to SourceError kinds.

    Returns non-2xx responses (304, 403, 429, ...) to the caller, which knows what they mean
    for its API; only transport failures raise here.
    """

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.requests = 0

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        import urllib.error
        import urllib.request

        # The URL comes from the validated configuration (http/https base URLs).
        request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip", **(headers or {})})  # noqa: S310
        self.requests += 1
        try:
            with _opener().open(request, timeout=self.timeout_s) as raw:
                return _response(raw.status, dict(raw.headers.items()), raw.read())
        except urllib.error.HTTPError as err:
            return _response(err.code, dict(err.headers.items()), err.read())
        except TimeoutError:
            raise SourceError("timeout", f"GET {_path(url)} timed out after {self.timeout_s:g}s") from None
        except urllib.error.URLError as err:
            if isinstance(err.reason, TimeoutError | socket.timeout):
                raise SourceError(
                    "timeout", f"GET {_path(url)} timed out after {self.timeout_s:g}s"
                ) from None
            raise SourceError("network", f"GET {_path(url)} failed: {err.reason}") from None
        except (ConnectionError, OSError) as err:
            raise SourceError("network", f"GET {_path(url)} failed: {err}") from None


def _path(url: str) -> str:
    """The URL without its query string (which may carry a token in some setups)."""
    return url.split("?", 1)[0]


def _response(status: int, headers: dict[str, str], body: bytes) -> Response:
    lowered = {k.lower(): v for k, v in headers.items()}
    if lowered.get("content-encoding") == "gzip" and body:
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as err:
            raise SourceError("malformed", f"truncated or corrupt gzip body: {err}") from None
    return Response(status, lowered, body)
