"""The `buildkite` source (design.md §2): the builds of a Buildkite pipeline on the trunk's branch.

Builds come from `GET /v2/organizations/{org}/pipelines/{slug}/builds?branch=<branch>
&include_retried_jobs=true&per_page=<n>`, newest first, each with its jobs embedded (retried
ones too), following `Link: rel="next"` (at most MAX_PAGES pages).

- The first poll (no state) reads pages until it has seen `per_page` commits: the window.
- Later polls read two listings, each page a conditional request (If-None-Match with its
  stored ETag):
  `created_from=<open_from>`, every build from the oldest one still unfinished at the last
  poll (else the newest) on, so every running build and every new one; and
  `finished_from=<since>`, the builds finished since the latest finish seen, which brings
  back an older build one of whose jobs was retried (the build finishes again). Only builds
  whose version (a digest of their state, finish and jobs) was not delivered before are
  returned, each commit `complete=False` (a job it does not show keeps its cell); with none,
  and the same pages as the last poll's, the poll is `unchanged` (nothing compared, the state
  as it was): a quiet pipeline costs two conditional requests a poll.

Commits: a build's `commit` is the trunk commit (linked on the trunk's `repo` on GitHub), its
`created_at` the commit's time (of the first build of that commit), the first line of its
`message` the title, its `author` (username, else name) the author, and the pull request
is the build's `pull_request.id`, else a trailing `(#123)` in the title. A build scheduled
on the branch (`source: schedule`) is not a push of the trunk: it is skipped; so is a build
whose commit is not a commit id yet (`HEAD`), and a rebuild (`rebuilt_from`) of a commit
outside the window, which is not new. Several builds of one commit (rebuilds) merge: each
job's cell is the newest build's that ran it.

Jobs: only `script` jobs are jobs (`waiter`, `manual` and `trigger` steps are not). A job's
key is its `name` (else its `step_key`) with shard numbers stripped as for GitHub
(`cells.job_key`); a job of a parallel step whose name ends in its number (`3/8`, `(3/8)`)
loses that number, so the parallel jobs of one step merge like shards. States: `passed` is a
success; `failed` a failure, but a pass when `soft_failed`, and the agent's failure (a line
`agent failure: <signal_reason>`, see `cells.AGENT_FAILURE`: environmental, never a
commit's) when it has a `signal_reason`; `expired` (no agent took it) is the agent's failure
too; `timed_out` times out; `canceled` is cancelled; `skipped`, `broken` (it never could
run) and `not_run` have no result; every other state is pending. Retries: the job a retry
replaced has `retried: true` and `retried_in_job_id`; only the newest of a chain is the
job's result, and a pass after a failed (not soft-failed, not the agent's) attempt is flaky
(a failure after one is a failed retry: no rerun is sent to confirm it fails again).
A job run carries the newest job's `id` and its build's `number`: what a retry of it names
(`confirm: rerun`; a job id retries once, so a further retry names the newer job).

State (JSON, given back next poll):

    {"version": 1,
     "window": [[sha, time, title, author, pr, url], ...],   # newest first
     "open_from": "<RFC 3339>", "since": "<RFC 3339>" | null,
     "pages": {url: [etag, next url]},                       # the pages of the last poll
     "delivered": {number: [sha, version]},                  # the window's builds returned
     "not_before": "<RFC 3339>"}                             # only while a rate limit holds

Rate limits: a 429, or an answer with `RateLimit-Remaining: 0`, stops the poll; it returns
no commit, and its state records `not_before` (Retry-After, else RateLimit-Reset, else one
minute) so that no poll before then sends a request. A poll out of its time budget (40 s)
returns nothing and keeps the state, so the next one reads again. Any other failure raises
SourceError and the caller keeps the previous state.
"""

from __future__ import annotations

import hashlib
import re
import time
import urllib.parse
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from trunkwatch.domain.cells import AGENT_FAILURE, Commit, JobRun, job_key
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.domain.config import TrunkConfig
from trunkwatch.net.buildkite import DEFAULT_API_URL, WEB_URL, Buildkite
from trunkwatch.net.http import HttpClient, HttpError
from trunkwatch.net.rest import OutOfTime, Page, RateLimited
from trunkwatch.sources.base import (
    CommitRuns,
    Snapshot,
    SourceError,
    base_url,
    rate_limit_error,
    stopped_by,
)
from trunkwatch.sources.shape import Shape, parsed

STATE_VERSION = 1
BUILDS_PER_PAGE = 20  # a build embeds its jobs (vLLM's: over 250): 20 stay far below 32 MiB
MAX_PAGES = 10
MAX_TITLE_CHARS = 300
DEFAULT_BUDGET_S = 40.0
_PR_SUFFIX = re.compile(r"\(#(\d+)\)\s*$")
_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_FINISHED_BUILD = frozenset(
    {"passed", "failed", "canceled", "skipped", "not_run", "blocked", "waiting_failed"}
)
EPOCH = "1970-01-01T00:00:00Z"
GITHUB_URL = "https://github.com"
_STATES = {
    "passed": "success",
    "failed": "failure",
    "timed_out": "timed_out",
    "canceled": "cancelled",
    "canceling": "cancelled",
    "skipped": "skipped",
    "broken": "skipped",
    "not_run": "skipped",
    "waiting_failed": "skipped",
    "blocked_failed": "skipped",
    "running": "in_progress",
    "assigned": "in_progress",
    "accepted": "in_progress",
}
_CODE_FAILURES = frozenset({"failed", "timed_out"})


@dataclass(frozen=True)
class Job:
    """One entry of a build's `jobs`."""

    id: str
    type: str
    name: str | None = None
    step_key: str | None = None
    state: str | None = None
    web_url: str | None = None
    soft_failed: bool = False
    signal_reason: str | None = None
    retried: bool = False
    retried_in_job_id: str | None = None
    parallel_group_index: int | None = None
    parallel_group_total: int | None = None


@dataclass(frozen=True)
class Build:
    """One entry of the builds listing."""

    number: int
    commit: str
    state: str
    created_at: datetime
    message: str | None = None
    web_url: str = ""
    source: str | None = None
    finished_at: datetime | None = None
    author: Any = None  # {"username", "name", "email"}, or null
    pull_request: Any = None  # {"id", "base", "repository"}, or null
    rebuilt_from: Any = None  # {"id", "number", "url"} for a rebuild, else null
    jobs: list[Job] = field(default_factory=list)


_BUILDS: Shape[list[Build]] = Shape(list[Build])


@dataclass(frozen=True)
class _Listing:
    """What one listing's pages said: the builds of the pages that answered a body, whether a
    page answered 304 (`kept`: its builds are as the last poll read them), and the state's
    record of every page read (`pages`)."""

    builds: list[Build]
    pages: dict[str, list[Any]]
    kept: bool


class BuildkiteSource:
    def __init__(
        self,
        trunk: TrunkConfig,
        token: str | None,
        http: HttpClient | None = None,
        builds_per_page: int = BUILDS_PER_PAGE,
        budget_s: float | None = DEFAULT_BUDGET_S,
    ) -> None:
        if trunk.pipeline is None:
            raise ValueError(f"trunk {trunk.trunk_id} names no Buildkite pipeline")
        self.trunk = trunk
        self.pipeline = trunk.pipeline
        self.window = trunk.per_page
        self.builds_per_page = builds_per_page
        self.budget_s = budget_s
        self._token = token
        self._http = http or HttpClient()
        # Set by poll() when a rate limit cut it short or held it back.
        self.rate_limited: SourceError | None = None

    def __repr__(self) -> str:  # never show the token
        return f"BuildkiteSource({self.trunk.trunk_id!r})"

    def poll(self, state: dict[str, Any], now: datetime) -> Snapshot:
        self.rate_limited = None
        if "not_before" in state and now < (held := parse_time(state["not_before"])):
            self.rate_limited = rate_limit_error(f"Buildkite rate limit held for {self.pipeline}", held, now)
            return Snapshot(commits=[], state=state, rate_limited=self.rate_limited)
        deadline = time.monotonic() + self.budget_s if self.budget_s is not None else None
        api = Buildkite(self._http, base_url(self.trunk, DEFAULT_API_URL), self._token, deadline)
        previous = state if state.get("version") == STATE_VERSION else {}
        try:
            listings = self._read(api, previous)
        except OutOfTime:
            return Snapshot(commits=[], state=state, http_requests=api.requests)
        except RateLimited as err:
            snapshot = stopped_by(err, state, now, api.requests)
            self.rate_limited = snapshot.rate_limited
            return snapshot
        except HttpError as err:
            raise SourceError(err.kind, str(err)) from None
        pages = {url: record for listing in listings for url, record in listing.pages.items()}
        seen = [build for listing in listings for build in listing.builds if of_trunk(build)]
        delivered: dict[str, list[str]] = previous.get("delivered", {})
        versions = {str(build.number): _version(build) for build in seen}
        builds = [b for b in seen if delivered.get(str(b.number), [None, None])[1] != versions[str(b.number)]]
        if previous and not builds and pages == previous.get("pages"):
            return Snapshot(commits=[], state=state, http_requests=api.requests, unchanged=True)
        repo_url = f"{GITHUB_URL}/{self.trunk.repo}"
        window = _window(previous.get("window", []), builds, self.window, repo_url)
        shas = {record[0] for record in window}
        runs = _runs([build for build in builds if build.commit in shas])
        open_from = _open_from(seen, window) or previous.get("open_from") or EPOCH
        if listings[0].kept and previous.get("open_from"):  # its 304 pages' builds are as before
            open_from = min(open_from, previous["open_from"], key=parse_time)
        delivered = {
            **{number: record for number, record in delivered.items() if record[0] in shas},
            **{str(b.number): [b.commit, versions[str(b.number)]] for b in seen if b.commit in shas},
        }
        new_state: dict[str, Any] = {
            "version": STATE_VERSION,
            "window": window,
            "open_from": open_from,
            "since": _since(previous.get("since"), seen),
            "pages": pages,
            "delivered": delivered,
        }
        return Snapshot(
            commits=[
                CommitRuns(commit_of(record), tuple(runs.get(record[0], ())), complete=False)
                for record in window
            ],
            state=new_state,
            http_requests=api.requests,
        )

    def _read(self, api: Buildkite, previous: dict[str, Any]) -> list[_Listing]:
        stored: dict[str, list[Any]] = previous.get("pages", {})
        if not previous:
            return [self._listing(api, {}, stored, until_window=True)]
        listings = [self._listing(api, {"created_from": previous["open_from"]}, stored)]
        if previous.get("since"):
            listings.append(self._listing(api, {"finished_from": previous["since"]}, stored))
        return listings

    def _listing(
        self, api: Buildkite, query: dict[str, str], stored: dict[str, list[Any]], until_window: bool = False
    ) -> _Listing:
        """One listing's pages; the first poll's (`until_window`) until it saw the window."""
        params = {
            "branch": self.trunk.branch,
            "include_retried_jobs": "true",
            "per_page": self.builds_per_page,
            **query,
        }
        url: str | None = api.url(f"{api.pipeline_path(self.pipeline)}/builds?{urlencode(params)}")
        builds: list[Build] = []
        pages: dict[str, list[Any]] = {}
        kept = False
        shas: set[str] = set()
        while url and len(pages) < MAX_PAGES:
            old = stored.get(url)
            page = api.get(url, etag=old[0] if old else None)
            if page.data is None:  # 304: as the last poll read it
                assert old is not None
                pages[url], kept = old, True
                url = old[1]
                continue
            pages[url] = [page.etag, page.next_url]
            read = parsed(page, _BUILDS)
            builds += read
            shas.update(b.commit for b in read if of_trunk(b) and b.rebuilt_from is None)
            if until_window and len(shas) >= self.window:
                break
            url = page.next_url
        return _Listing(builds, pages, kept)


def parse_builds(data: Any) -> list[Build]:
    """A builds listing's JSON as the source reads it; SourceError (`malformed`) naming what
    is wrong."""
    return parsed(Page(data, None, None, "builds listing"), _BUILDS)


def _version(build: Build) -> str:
    """A digest of what the source reads of a build: it changes when the build does."""
    text = repr((build.state, build.finished_at, build.jobs))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def of_trunk(build: Build) -> bool:
    """A build of a trunk commit: not a scheduled one, and on a commit id (not `HEAD`)."""
    return build.source != "schedule" and bool(_SHA.match(build.commit))


def _window(stored: list[list[Any]], builds: list[Build], size: int, repo_url: str) -> list[list[Any]]:
    """The newest `size` commits: the stored ones and those of new builds (a rebuild adds
    none: it builds a commit of the window again, or one too old for it)."""
    by_sha = {record[0]: record for record in stored}
    for build in sorted(builds, key=lambda b: b.number):
        if build.rebuilt_from is None and build.commit not in by_sha:
            by_sha[build.commit] = commit_record(build, repo_url)
    return sorted(by_sha.values(), key=lambda record: record[1], reverse=True)[:size]


def _open_from(builds: list[Build], window: list[list[Any]]) -> str | None:
    """Where the next poll's first listing starts: the oldest unfinished build read (never
    before the window's oldest commit), else the newest build read; None without one."""
    unfinished = [b.created_at for b in builds if b.state not in _FINISHED_BUILD]
    if unfinished:
        oldest = parse_time(window[-1][1]) if window else min(unfinished)
        return format_time(max(min(unfinished), oldest))
    return format_time(max(b.created_at for b in builds)) if builds else None


def _since(stored: str | None, builds: list[Build]) -> str | None:
    """The latest finish seen: where the next poll's second listing starts."""
    finished = [b.finished_at for b in builds if b.finished_at is not None]
    if stored:
        finished.append(parse_time(stored))
    return format_time(max(finished)) if finished else None


def _runs(builds: list[Build]) -> dict[str, list[JobRun]]:
    """Each commit's job runs: per job key, those of the newest build that ran it."""
    by_key: dict[str, dict[str, list[JobRun]]] = defaultdict(dict)
    for build in sorted(builds, key=lambda b: b.number):
        runs: dict[str, list[JobRun]] = defaultdict(list)
        for run in job_runs(build):
            runs[job_key(run.name)].append(run)
        by_key[build.commit].update(runs)
    return {sha: [run for runs in keyed.values() for run in runs] for sha, keyed in by_key.items()}


def job_runs(build: Build) -> list[JobRun]:
    """The build's jobs as job runs: each retry chain's newest job (see the module)."""
    scripts = [job for job in build.jobs if job.type == "script"]
    retried_into = {job.retried_in_job_id: job for job in scripts if job.retried_in_job_id}
    runs = []
    for job in scripts:
        if job.retried:
            continue
        earlier: list[Job] = []
        previous = retried_into.get(job.id)
        while previous is not None and len(earlier) < len(scripts):
            earlier.append(previous)
            previous = retried_into.get(previous.id)
        conclusion, lines = job_result(job)
        runs.append(
            JobRun(
                name=job_name(job),
                conclusion=conclusion,
                url=job.web_url or build.web_url,
                attempt=len(earlier) + 1,
                failed_before=any(_code_failure(e) for e in earlier),
                failure_lines=lines,
                job_id=job.id,
                build=build.number,
            )
        )
    return runs


def job_name(job: Job) -> str:
    """The job's name (else its step key); a parallel job's trailing number removed."""
    name = (job.name or job.step_key or "(unnamed step)").strip()
    index, total = job.parallel_group_index, job.parallel_group_total
    if index is not None and total:
        for number in (index + 1, index):
            for tail in (f" ({number}/{total})", f" {number}/{total}"):
                if name.endswith(tail):
                    return name.removesuffix(tail)
    return name


def job_result(job: Job) -> tuple[str, tuple[str, ...]]:
    """The job's conclusion in the cells' words, and its failure lines."""
    state = job.state or ""
    if state == "failed" and job.soft_failed:
        return "success", ()
    if state == "failed" and job.signal_reason:
        return "failure", (f"{AGENT_FAILURE}{job.signal_reason}",)
    if state == "expired":
        return "failure", (f"{AGENT_FAILURE}expired before an agent ran it",)
    return _STATES.get(state, "queued" if state else ""), ()


def _code_failure(job: Job) -> bool:
    """An attempt that failed by its code: not soft-failed, not the agent's."""
    return job.state in _CODE_FAILURES and not job.soft_failed and not job.signal_reason


def commit_record(build: Build, repo_url: str) -> list[Any]:
    title = (build.message or "").split("\n", 1)[0].strip()
    pr = _pr_number(build.pull_request)
    if pr is None and (found := _PR_SUFFIX.search(title)):
        pr = int(found.group(1))
    author = build.author if isinstance(build.author, dict) else {}
    name = author.get("username") or author.get("name") or ""
    url = f"{repo_url}/commit/{build.commit}"
    return [build.commit, format_time(build.created_at), title[:MAX_TITLE_CHARS], str(name), pr, url]


def _pr_number(pull_request: Any) -> int | None:
    number = pull_request.get("id") if isinstance(pull_request, dict) else None
    if isinstance(number, int) and not isinstance(number, bool):
        return number
    return int(number) if isinstance(number, str) and number.isdigit() else None


def commit_of(record: list[Any]) -> Commit:
    sha, at, title, author, pr, url = record
    return Commit(sha=sha, time=parse_time(at), title=title, author=author, pr=pr, url=url)


def trunk_link(trunk: TrunkConfig) -> str:
    """The pipeline's builds of the trunk's branch."""
    return f"{WEB_URL}/{trunk.pipeline}/builds?{urllib.parse.urlencode({'branch': trunk.branch})}"


def job_link(trunk: TrunkConfig, job: str, run_url: str) -> str:
    """The newest failing job itself (its build's page, at the job)."""
    return run_url


__all__ = ["BuildkiteSource", "job_link", "trunk_link"]
