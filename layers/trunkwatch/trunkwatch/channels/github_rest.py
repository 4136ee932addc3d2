"""GitHub's REST API as the GitHub receivers use it: the headers, one call, and a list
followed through its `Link: rel="next"` pages (never onto another host)."""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trunkwatch.channels import http
from trunkwatch.channels.base import ChannelError
from trunkwatch.domain.config import ConfigError

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"
MAX_PAGES = 10  # 1,000 items: open issues with the labels, or comments on one issue or PR
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


def host_suffix(api_url: str) -> str:
    """`@host` for GitHub Enterprise, nothing for github.com: part of a receiver's log name."""
    api_url = api_url.rstrip("/")
    return "" if api_url == DEFAULT_API_URL else "@" + urllib.parse.urlsplit(api_url).netloc


@dataclass
class GitHubRest:
    api_url: str  # https://api.github.com, or https://<host>/api/v3 for GitHub Enterprise
    token: Callable[[], str | None] = field(repr=False)
    what: str  # the receiver, as errors name it
    timeout_s: float = http.DEFAULT_TIMEOUT_S
    deadline: float = math.inf  # the notification's: every call of a delivery ends by then

    def headers(self) -> dict[str, str]:
        """Read the token (once per delivery: it may be a secret read when due)."""
        try:
            token = self.token()
        except ConfigError as err:
            raise ChannelError(f"{self.what}: {err}") from None
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def url(self, path: str) -> str:
        return self.api_url.rstrip("/") + path

    def pages(self, url: str, headers: dict[str, str]) -> Iterator[dict[str, Any]]:
        for _ in range(MAX_PAGES):
            answer = self.call("GET", url, headers)
            items = answer.json(self.what)
            if not isinstance(items, list):
                raise ChannelError(f"{self.what} answered a list request with no list")
            yield from (item for item in items if isinstance(item, dict))
            found = _NEXT.search(answer.headers.get("link", ""))
            if not found:
                return
            url = found.group(1)
            if not url.startswith(self.api_url.rstrip("/") + "/"):
                raise ChannelError(f"{self.what} gave a next page on another host")

    def call(
        self, method: str, url: str, headers: dict[str, str], payload: dict[str, Any] | None = None
    ) -> http.Answer:
        answer = http.request(
            method,
            url,
            what=self.what,
            payload=payload,
            headers=headers,
            timeout_s=self.timeout_s,
            deadline=self.deadline,
        )
        if not 200 <= answer.status < 300:
            path = urllib.parse.urlsplit(url).path
            raise http.failure(answer, f"{self.what}: {method} {path}")
        return answer

    def rerun_job(self, repo: str, job_id: int) -> str | None:
        """Re-run one job of a workflow run (`POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun`,
        201 with no body; the token needs `actions: write`). None when GitHub accepted it,
        else why not: its answer (403 without the permission, or for a run too old to re-run;
        a rate limit; 404 for an unknown job) or the network error."""
        try:
            self.call("POST", self.url(f"/repos/{repo}/actions/jobs/{job_id}/rerun"), self.headers())
        except ChannelError as err:
            return str(err)
        return None
