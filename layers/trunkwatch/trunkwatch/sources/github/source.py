"""The `github` source (design.md §2): trunk commits, push workflow runs and their jobs.

Commits come from `GET /repos/{owner}/{repo}/commits?sha={branch}`. That list is in
`git log` order (newest first, every reachable commit), which is the trunk's first-parent
history when the trunk only takes squash or rebase merges. With merge commits it also
interleaves the commits of the merged branches; those never ran the trunk's push workflows,
so the source walks `parents[0]` from the head and keeps only the first-parent chain. The
window then holds fewer than `window` trunk commits (one page is read, never more).

Runs come from `GET .../actions/runs?branch={branch}&event=push`, newest first, following
`Link: rel="next"` until a page reaches runs created before the oldest commit of the window.
Jobs are read only for runs that are new or changed since the last poll (run attempt,
status, conclusion or updated_at differ), with `filter=latest`. For a job that passed on a
re-run, earlier attempts are read (newest first, only until that job is found) to know
whether it failed before, which makes it flaky; for any other job that history changes
nothing, so it is not read.

State (JSON, returned in `Snapshot.state` and given back to the next poll) holds the ETag and
a digest of every listing page, so an unchanged trunk costs only conditional requests that
answer 304 (free of rate limit) and no job request, and returns an identical state:

    {"version": 1,
     "commits": {"url", "etag", "list": [[sha, time, title, author, pr, url], ...]},
     "runs": [{"url", "etag", "next", "oldest",
               "runs": {head_sha: [[id, workflow, attempt, version, delivered(, failed)], ...]}},
              ...],
     "workflows": {workflow_id: name},    # names fetched for runs that carried none
     "not_before": "<RFC 3339>"}          # only while GitHub's rate limit holds

`version` is a digest of the run's attempt, status, conclusion and updated_at; `delivered`
says the jobs of that version were returned in some snapshot; `failed` (only present for a
completed run that failed) is the run's conclusion. Runs are grouped by commit to
keep the state small (about 55 KB for 50 commits of 15 runs each).

Workflow names: a job is keyed `<workflow name> / <job name>`. A run whose `name` is null,
empty or its `path` (GitHub names a run that failed to start by its workflow file) takes the
name another run of the same `workflow_id` carries, else the workflow's own name
(`GET .../actions/workflows/{id}`, once; remembered in the state's `workflows`), else, when
that is also the path or unreadable, the file name without its extension
(`.github/workflows/trunk.yml` -> `trunk`), so a job's history is not split by the path.

Runs that never started: a run that ended `startup_failure` (its jobs are not read, it has
none) or `failure` with no job is a failing cell of the job `<workflow> / (workflow)`; every
run that did start jobs is a passing cell of that job, so a broken workflow file on the
trunk alerts and resolves like any job.

Time budget: a poll sends no request that would likely end after `budget_s` seconds from its
start (default 40 s, inside the ingest function's 60 s timeout): it stops like a rate limit
without a wait. Runs whose jobs were all read are returned (commits with complete=False) and
marked delivered; a run is never returned in part. The next poll reads the runs still
undelivered, so a first poll of a large trunk completes over several polls.
`GitHubSource.out_of_time` says when the budget cut a poll short.

Rate limits: a 403/429 rate-limit answer, or a response saying no request is left
(`X-RateLimit-Remaining: 0`), stops the poll at once. The poll does not raise: it returns a
consistent snapshot whose state records `not_before` (from Retry-After, else
X-RateLimit-Reset, else one minute), so that every poll before then makes no request and
returns an empty snapshot with the state unchanged. What the snapshot carries depends on
when the limit hit: during the listings, nothing (no commits, the previous state plus
`not_before`); while reading jobs, the job runs of the runs read so far, with only those
runs marked delivered (the rest are read after `not_before`). `GitHubSource.rate_limited`
is then a `rate_limited` SourceError, for the caller's log line and metric. Any other failure
(5xx, timeout, malformed or truncated body, a missing field) raises SourceError and the
caller keeps the previous state.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from trunkwatch.domain.cells import WORKFLOW_JOB, Commit, JobRun, name_from_path
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.domain.config import TrunkConfig
from trunkwatch.net.github import DEFAULT_API_URL, GitHub, GitHubError, OutOfTime, RateLimited
from trunkwatch.net.http import HttpClient, HttpError
from trunkwatch.sources.base import (
    CommitRuns,
    Snapshot,
    SourceError,
    base_url,
    rate_limit_error,
    stopped_by,
)
from trunkwatch.sources.github.models import (
    CommitListEntry,
    Job,
    JobList,
    RunList,
    Workflow,
    WorkflowRun,
)
from trunkwatch.sources.shape import Shape, parsed

STATE_VERSION = 1
RUNS_PER_PAGE = 100
# The runs listing returns at most 1,000 runs when filtered by branch or event.
MAX_RUN_PAGES = 10
MAX_TITLE_CHARS = 300
_FAILED = frozenset({"failure", "timed_out", "startup_failure"})
DEFAULT_BUDGET_S = 40.0
_PR_SUFFIX = re.compile(r"\(#(\d+)\)\s*$")

_COMMITS: Shape[list[CommitListEntry]] = Shape(list[CommitListEntry])
_RUNS: Shape[RunList] = Shape(RunList)
_JOBS: Shape[JobList] = Shape(JobList)
_WORKFLOW: Shape[Workflow] = Shape(Workflow)


@dataclass(frozen=True)
class _Run:
    """A workflow run as the state keeps it (a compact list in JSON)."""

    id: int
    sha: str
    workflow: str
    attempt: int
    version: str
    delivered: bool = False
    failed: str = ""  # the conclusion of a completed run that failed

    @classmethod
    def from_api(cls, run: WorkflowRun, workflow: str) -> _Run:
        changes = f"{run.run_attempt}|{run.status}|{run.conclusion}|{format_time(run.updated_at)}"
        version = hashlib.blake2b(changes.encode(), digest_size=6).hexdigest()
        failed = run.conclusion if run.status == "completed" and run.conclusion in _FAILED else None
        return cls(run.id, run.head_sha, workflow, run.run_attempt, version, failed=failed or "")

    def record(self, delivered: bool) -> list[Any]:
        return [self.id, self.workflow, self.attempt, self.version, delivered] + (
            [self.failed] if self.failed else []
        )


def _runs_of(page: dict[str, Any]) -> Iterator[_Run]:
    """The runs of a stored listing page, in listing order."""
    for sha, records in page["runs"].items():
        for run_id, workflow, attempt, version, delivered, *failed in records:
            yield _Run(run_id, sha, workflow, attempt, version, delivered, failed[0] if failed else "")


def _given_name(run: WorkflowRun) -> str | None:
    """The run's workflow name, unless GitHub gave none (null, empty or the file's path)."""
    name = (run.name or "").strip()
    return name if name and name != run.path else None


def _by_commit(runs: Iterable[tuple[_Run, bool]]) -> dict[str, list[list[Any]]]:
    grouped: dict[str, list[list[Any]]] = {}
    for run, delivered in runs:
        grouped.setdefault(run.sha, []).append(run.record(delivered))
    return grouped


class GitHubSource:
    def __init__(
        self,
        trunk: TrunkConfig,
        token: str | None,
        http: HttpClient | None = None,
        window: int | None = None,
        budget_s: float | None = DEFAULT_BUDGET_S,
    ) -> None:
        window = window or trunk.per_page
        if not 1 <= window <= 100:
            raise ValueError(f"window must be 1..100 commits (one page of the commits list), got {window}")
        self.trunk = trunk
        self.window = window
        self._token = token
        self._http = http or HttpClient()
        self.budget_s = budget_s
        # Set by poll() when a rate limit cut it short or held it back; the snapshot is still
        # consistent and its state must be saved.
        self.rate_limited: SourceError | None = None
        # Set by poll() when its time budget cut it short (the rest follows next poll).
        self.out_of_time: OutOfTime | None = None

    def __repr__(self) -> str:  # never show the token
        return f"GitHubSource({self.trunk.trunk_id!r})"

    def poll(self, state: dict[str, Any], now: datetime, deadline: float | None = None) -> Snapshot:
        """One poll. `deadline` (a `time.monotonic()` value) overrides the `budget_s` one."""
        self.rate_limited = None
        self.out_of_time = None
        if deadline is None and self.budget_s is not None:
            deadline = time.monotonic() + self.budget_s
        if "not_before" in state and now < (held := parse_time(state["not_before"])):
            self.rate_limited = rate_limit_error(f"GitHub rate limit held for {self.trunk.repo}", held, now)
            return Snapshot(commits=[], state=state, http_requests=0, rate_limited=self.rate_limited)
        api = GitHub(self._http, base_url(self.trunk, DEFAULT_API_URL), self._token, deadline)
        try:
            return self._poll(api, state, now)
        except HttpError as err:  # RateLimited and OutOfTime are the poll's to keep
            raise SourceError(err.kind, str(err)) from None

    def _poll(self, api: GitHub, state: dict[str, Any], now: datetime) -> Snapshot:
        previous = state if state.get("version") == STATE_VERSION else {}
        workflows: dict[str, str] = dict(previous.get("workflows", {}))
        try:
            commits = self._list_commits(api, previous.get("commits"))
            pages = self._list_runs(api, previous.get("runs", []), commits["list"], workflows)
        except OutOfTime as err:
            self.out_of_time = err
            return Snapshot(commits=[], state=state, http_requests=api.requests)
        except RateLimited as err:
            snapshot = stopped_by(err, state, now, api.requests)
            self.rate_limited = snapshot.rate_limited
            return snapshot

        window = [_commit(record) for record in commits["list"]]
        delivered_before = {
            run.id: run.version
            for page in previous.get("runs", [])
            for run in _runs_of(page)
            if run.delivered
        }
        job_runs: dict[str, list[JobRun]] = defaultdict(list)
        delivered_now: set[int] = set()
        changed = _changed_runs(pages, {c.sha for c in window}, delivered_before)
        not_before: datetime | None = None
        try:
            for run in changed:
                job_runs[run.sha].extend(self._job_runs(api, run))
                delivered_now.add(run.id)
        except RateLimited as err:
            not_before = err.until(now)
            self.rate_limited = rate_limit_error(str(err), not_before, now)
        except OutOfTime as err:
            self.out_of_time = err

        def delivered(run: _Run) -> bool:
            return run.id in delivered_now or delivered_before.get(run.id) == run.version

        new_state: dict[str, Any] = {
            "version": STATE_VERSION,
            "commits": commits,
            "runs": [
                {**page, "runs": _by_commit((run, delivered(run)) for run in _runs_of(page))}
                for page in pages
            ],
        }
        if workflows:
            new_state["workflows"] = workflows
        if not_before is not None:
            new_state["not_before"] = format_time(not_before)
        return Snapshot(
            commits=[CommitRuns(c, tuple(job_runs[c.sha]), complete=False) for c in window],
            state=new_state,
            http_requests=api.requests,
            rate_limited=self.rate_limited,
        )

    def _path(self, tail: str, **query: Any) -> str:
        return f"/repos/{self.trunk.repo}{tail}?{urlencode(query)}"

    def _list_commits(self, api: GitHub, stored: dict[str, Any] | None) -> dict[str, Any]:
        url = api.url(self._path("/commits", sha=self.trunk.branch, per_page=self.window))
        reusable = stored if stored and stored["url"] == url else None
        page = api.get(url, etag=reusable["etag"] if reusable else None)
        if page.data is None:
            assert reusable is not None  # 304 only answers a conditional request
            return reusable
        items = parsed(page, _COMMITS)
        return {"url": url, "etag": page.etag, "list": [_commit_record(c) for c in _first_parent(items)]}

    def _list_runs(
        self,
        api: GitHub,
        stored_pages: list[dict[str, Any]],
        commits: list[list[Any]],
        workflows: dict[str, str],
    ) -> list[dict[str, Any]]:
        if not commits:
            return []
        oldest = min(parse_time(record[1]) for record in commits)
        stored = {page["url"]: page for page in stored_pages}
        pages: list[dict[str, Any]] = []
        fresh: list[tuple[dict[str, Any], list[WorkflowRun]]] = []
        url: str | None = api.url(
            self._path("/actions/runs", branch=self.trunk.branch, event="push", per_page=RUNS_PER_PAGE)
        )
        while url and len(pages) < MAX_RUN_PAGES:
            old = stored.get(url)
            page = api.get(url, etag=old["etag"] if old else None)
            if page.data is None:
                assert old is not None
                record = old
            else:
                runs = parsed(page, _RUNS).workflow_runs
                record = {
                    "url": url,
                    "etag": page.etag,
                    "next": page.next_url,
                    "oldest": format_time(min(r.created_at for r in runs)) if runs else None,
                }
                fresh.append((record, runs))
            pages.append(record)
            if record["oldest"] is None or parse_time(record["oldest"]) < oldest:
                break
            url = record["next"]
        names = self._workflow_names(api, [run for _, runs in fresh for run in runs], workflows)
        for record, runs in fresh:
            record["runs"] = _by_commit((_Run.from_api(r, names(r)), False) for r in runs)
        return pages

    def _workflow_names(
        self, api: GitHub, runs: list[WorkflowRun], fetched: dict[str, str]
    ) -> Callable[[WorkflowRun], str]:
        """Resolve every run's workflow name (see the module's docstring); `fetched` is the
        state's cache of names read from the workflows API, updated in place."""
        given = {
            str(r.workflow_id): name for r in runs if r.workflow_id is not None and (name := _given_name(r))
        }
        for run in runs:
            key = str(run.workflow_id)
            if _given_name(run) is None and run.workflow_id is not None and key not in given | fetched:
                fetched[key] = self._fetch_workflow_name(api, run)

        def resolve(run: WorkflowRun) -> str:
            key = str(run.workflow_id)
            return _given_name(run) or given.get(key) or fetched.get(key) or name_from_path(run.path)

        return resolve

    def _fetch_workflow_name(self, api: GitHub, run: WorkflowRun) -> str:
        url = api.url(f"/repos/{self.trunk.repo}/actions/workflows/{run.workflow_id}")
        try:
            workflow = parsed(api.get(url), _WORKFLOW)
        except GitHubError as err:
            if err.kind != "http_4xx":
                raise
            return name_from_path(run.path)
        name = (workflow.name or "").strip()
        return name if name and name not in (workflow.path, run.path) else name_from_path(run.path)

    def _job_runs(self, api: GitHub, run: _Run) -> list[JobRun]:
        """Every job of the run, plus its `(workflow)` job; all of them or OutOfTime."""
        jobs: list[Job] = []
        if run.failed != "startup_failure":  # such a run has no job to read
            url = api.url(self._path(f"/actions/runs/{run.id}/jobs", filter="latest", per_page=100))
            jobs = list(_jobs(api, url))
        flaky = self._failed_before_retry(api, run, jobs)
        started = _workflow_job(run, bool(jobs), self._run_url(api, run))
        return [
            *started,
            *(
                JobRun(
                    name=f"{run.workflow} / {job.name}",
                    conclusion=job.conclusion if job.status == "completed" else job.status,
                    url=job.html_url or "",
                    attempt=job.run_attempt,
                    failed_before=job.name in flaky,
                    job_id=job.id,
                )
                for job in jobs
            ),
        ]

    def _run_url(self, api: GitHub, run: _Run) -> str:
        """The run's web page (github.com, or GHES's host for `<host>/api/v3`)."""
        base = api.api_url
        if base == "https://api.github.com":
            base = "https://github.com"
        base = base.removesuffix("/api/v3")
        return f"{base}/{self.trunk.repo}/actions/runs/{run.id}"

    def _failed_before_retry(self, api: GitHub, run: _Run, jobs: list[Job]) -> set[str]:
        """Names of the jobs that passed on a re-run after failing on the attempt before."""
        # A retried job that passed: the latest earlier attempt that ran it decides.
        undecided = {
            job.name: job.run_attempt for job in jobs if job.run_attempt > 1 and job.conclusion == "success"
        }
        failed: set[str] = set()
        attempt = max(undecided.values(), default=1) - 1
        while undecided and attempt >= 1:
            url = api.url(self._path(f"/actions/runs/{run.id}/attempts/{attempt}/jobs", per_page=100))
            earlier = {job.name: job for job in _jobs(api, url)}
            for name, retried_on in list(undecided.items()):
                if retried_on > attempt and name in earlier:
                    if earlier[name].conclusion in _FAILED:
                        failed.add(name)
                    del undecided[name]
            attempt -= 1
        return failed


def _jobs(api: GitHub, url: str) -> Iterator[Job]:
    """Every job of a jobs listing, across its pages."""
    for page in api.pages(url):
        yield from parsed(page, _JOBS).jobs


def _workflow_job(run: _Run, started: bool, url: str) -> list[JobRun]:
    """The `(workflow)` job of a run: passed when it started jobs, failed when it ended
    without any; nothing while a run without jobs is still queued."""
    if started:
        conclusion = "success"
    elif run.failed:
        conclusion = run.failed
    else:
        return []
    return [
        JobRun(name=f"{run.workflow} / {WORKFLOW_JOB}", conclusion=conclusion, url=url, attempt=run.attempt)
    ]


def _changed_runs(
    pages: list[dict[str, Any]], shas: set[str], delivered_before: dict[int, str]
) -> Iterator[_Run]:
    """Runs of window commits whose current version was never delivered, newest first."""
    seen: set[int] = set()
    for page in pages:
        for run in _runs_of(page):
            # A run can show up on two pages when a new run shifts them between requests.
            if run.id in seen or run.sha not in shas:
                continue
            seen.add(run.id)
            if delivered_before.get(run.id) != run.version:
                yield run


def _first_parent(items: list[CommitListEntry]) -> list[CommitListEntry]:
    by_sha = {item.sha: item for item in items}
    chain: list[CommitListEntry] = []
    item = items[0] if items else None
    while item is not None and len(chain) < len(items):
        chain.append(item)
        item = by_sha.get(item.parents[0].sha) if item.parents else None
    return chain


def _commit_record(item: CommitListEntry) -> list[Any]:
    title = item.commit.message.split("\n", 1)[0].strip()
    pr = _PR_SUFFIX.search(title)
    if item.author is not None:
        author = item.author.login
    else:
        author = (item.commit.author.name if item.commit.author else None) or ""
    return [
        item.sha,
        format_time(item.commit.committer.date),
        title[:MAX_TITLE_CHARS],
        author,
        int(pr.group(1)) if pr else None,
        item.html_url,
    ]


def _commit(record: list[Any]) -> Commit:
    sha, time, title, author, pr, url = record
    return Commit(sha=sha, time=parse_time(time), title=title, author=author, pr=pr, url=url)
