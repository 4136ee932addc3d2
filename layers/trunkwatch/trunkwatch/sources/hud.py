"""The PyTorch HUD source: `/api/hud/{owner}/{repo}/{branch}/{page}?per_page=N`.

The HUD already merges workflow runs into a grid: `jobNames[i]` names column i and
`shaGrid[k].jobs[i]` is that job's cell on commit k (newest commit first); `{}` means the
job did not run there. A retried-to-green cell carries `failedPreviousRun`.

Columns of one job on PyTorch's runner fleets (`lf.linux.2xlarge`, `ephemeral.linux.*`, ...)
merge into one job key (see `cells.job_key`). A cell's `id` is GitHub's job id of its latest
attempt (what a rerun request names). A row the HUD marks `isAutoreverted: true` (PyTorch's
autorevert bot reverted that commit; `autorevertWorkflows` and `autorevertSignals` name what
it acted on) gives the commit an `autoreverted_by` of `autorevert` followed by those signals
(or workflows) in parentheses. The HUD names no revert commit: it only flags the reverted one.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from datetime import datetime
from typing import Any

from trunkwatch.domain.cells import Commit, JobRun
from trunkwatch.domain.clock import parse_time
from trunkwatch.domain.config import TrunkConfig
from trunkwatch.net.http import HttpClient, HttpError, retry_after_seconds, says_rate_limited
from trunkwatch.sources.base import CommitRuns, Snapshot, SourceError, base_url

DEFAULT_URL = "https://hud.pytorch.org"
TOKEN_HEADER = "x-hud-internal-bot"  # noqa: S105 - a header name
BODY_DIGEST = "body_sha256"  # source state: the digest of the last page stored


class HudSource:
    def __init__(self, trunk: TrunkConfig, token: str | None, http: HttpClient | None = None) -> None:
        self.trunk = trunk
        self.token = token
        self.http = http or HttpClient()

    @property
    def url(self) -> str:
        path = "/".join(
            urllib.parse.quote(part, safe="") for part in (*self.trunk.repo.split("/"), self.trunk.branch)
        )
        return f"{base_url(self.trunk, DEFAULT_URL)}/api/hud/{path}/1?per_page={self.trunk.per_page}"

    def poll(self, state: dict[str, Any], now: datetime) -> Snapshot:
        try:
            return self._poll(state, now)
        except HttpError as err:
            raise SourceError(err.kind, str(err)) from None

    def _poll(self, state: dict[str, Any], now: datetime) -> Snapshot:
        headers = {"Accept": "application/json"}
        if self.token:
            headers[TOKEN_HEADER] = self.token
        before = self.http.requests
        response = self.http.get(self.url, headers)
        if response.status >= 500:
            raise SourceError("http_5xx", f"HUD answered {response.status} for {self.trunk.trunk_id}")
        if response.status in (401, 403, 429):
            if says_rate_limited(response):
                retry = retry_after_seconds(response.headers.get("retry-after"), now)
                raise SourceError(
                    "rate_limited",
                    f"HUD answered {response.status} for {self.trunk.trunk_id}"
                    + (f" (retry after {retry:g}s)" if retry is not None else ""),
                    retry_after_s=retry,
                )
            # Not a rate limit: the token is missing, wrong or lacks access. Retrying helps not.
            raise SourceError(
                "auth", f"HUD answered {response.status} for {self.trunk.trunk_id}: check the trunk's token"
            )
        if response.status != 200:
            raise SourceError("http_4xx", f"HUD answered {response.status} for {self.trunk.trunk_id}")
        # A quiet minute's page is byte for byte the last one: skip parsing and comparing it.
        digest = hashlib.sha256(response.body).hexdigest()
        requests = self.http.requests - before
        if state.get(BODY_DIGEST) == digest:
            return Snapshot(commits=[], state=state, http_requests=requests, unchanged=True)
        commits = parse_grid(response.json())
        return Snapshot(commits=commits, state={**state, BODY_DIGEST: digest}, http_requests=requests)


def parse_grid(body: Any) -> list[CommitRuns]:
    """Validate a HUD response and turn it into commit results, newest first."""
    if not isinstance(body, dict):
        raise SourceError("malformed", "HUD response is not a JSON object")
    names, grid = body.get("jobNames"), body.get("shaGrid")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SourceError("malformed", "HUD response has no list of strings 'jobNames'")
    if not isinstance(grid, list):
        raise SourceError("malformed", "HUD response has no list 'shaGrid'")
    results = []
    for index, row in enumerate(grid):
        where = f"shaGrid[{index}]"
        if not isinstance(row, dict) or not isinstance(row.get("sha"), str) or not row["sha"]:
            raise SourceError("malformed", f"HUD {where} has no 'sha'")
        jobs = row.get("jobs")
        if not isinstance(jobs, list) or len(jobs) != len(names):
            count = len(jobs) if isinstance(jobs, list) else "no"
            raise SourceError("malformed", f"HUD {where} has {count} jobs for {len(names)} jobNames")
        try:
            time = parse_time(str(row.get("time")))
        except ValueError:
            raise SourceError("malformed", f"HUD {where} has an invalid time {row.get('time')!r}") from None
        commit = Commit(
            sha=row["sha"],
            time=time,
            title=str(row.get("commitTitle") or ""),
            author=str(row.get("author") or ""),
            pr=row["prNum"] if isinstance(row.get("prNum"), int) else None,
            url=str(row.get("commitUrl") or ""),
            autoreverted_by=_autoreverted_by(row),
        )
        runs = tuple(
            _job_run(name, cell, f"{where}.jobs") for name, cell in zip(names, jobs, strict=True) if cell
        )
        results.append(CommitRuns(commit=commit, runs=runs, complete=True))
    return results


MAX_AUTOREVERT_CHARS = 200


def _autoreverted_by(row: dict[str, Any]) -> str | None:
    """`autorevert (signal, ...)` for a row the HUD flags `isAutoreverted`, else None."""
    if row.get("isAutoreverted") is not True:
        return None
    named: list[str] = []
    for field in ("autorevertSignals", "autorevertWorkflows"):
        values = row.get(field)
        if isinstance(values, list):
            named = list(dict.fromkeys(str(v) for v in values if isinstance(v, str) and v))
        if named:
            break
    return (f"autorevert ({', '.join(named)})" if named else "autorevert")[:MAX_AUTOREVERT_CHARS]


def _job_run(name: str, cell: Any, where: str) -> JobRun:
    if not isinstance(cell, dict):
        raise SourceError("malformed", f"HUD {where} has a cell that is not an object for {name!r}")
    conclusion = cell.get("conclusion")
    if cell.get("status") not in (None, "completed") and conclusion in (None, "", "pending"):
        conclusion = str(cell["status"])
    lines = cell.get("failureLines") or ()
    return JobRun(
        name=name,
        conclusion=conclusion if isinstance(conclusion, str) else None,
        url=str(cell.get("htmlUrl") or ""),
        failed_before=bool(cell.get("failedPreviousRun")),
        failure_lines=tuple(str(line) for line in lines if line) if isinstance(lines, list) else (),
        job_id=cell["id"] if isinstance(cell.get("id"), int) and not isinstance(cell["id"], bool) else None,
    )


def trunk_link(trunk: TrunkConfig) -> str:
    """The HUD page of the trunk."""
    return f"{base_url(trunk, DEFAULT_URL)}/hud/{trunk.repo}/{urllib.parse.quote(trunk.branch, safe='')}/1"


def job_link(trunk: TrunkConfig, job: str, run_url: str) -> str:
    """The HUD page of the trunk filtered to one job."""
    return f"{trunk_link(trunk)}?per_page=50&name_filter={urllib.parse.quote(job, safe='')}"
