"""A Buildkite REST API stand-in on 127.0.0.1 for one pipeline: the builds listing the
`buildkite` source reads (filtered, paged with `Link`, weak ETags answered 304; retried jobs
only with `include_retried_jobs=true`) and the job retries of `confirm: rerun`. A retried
job shows `retried_in_job_id`, and a new job runs until `durationS` after the request on the
runtime's clock, then ends as the job's `rerun` (never served) says; its build runs again
meanwhile. `limit` requests a minute, then 429; `fail_with` an outage; with a `token`, 401
without it.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch_local.stand_in import JSON, Answer, Misbehaving, Request, json_answer, paged, weak_etag

DEFAULT_RERUN = timedelta(hours=1)  # a retry of a job that says nothing about its duration
_RETRY = re.compile(r"/builds/(\d+)/jobs/([^/]+)/retry")
REFUSED = "Forbidden: the API access token lacks the write_builds scope"  # scripted
_FINISHED_JOB = frozenset({"passed", "failed", "timed_out", "canceled", "expired", "broken"})


@dataclass(frozen=True)
class Retry:
    """A retry accepted: the job retried (its id, name and build's commit), the new job's id,
    and when it ends how."""

    job_id: str
    name: str
    sha: str
    new_id: str
    at: datetime
    due: datetime
    state: str


class BuildkiteServer(Misbehaving):
    def __init__(
        self,
        pipeline: str = "acme/ci",
        *,
        clock: Callable[[], datetime] | None = None,
        limit: int = 200,
        token: str | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.clock = clock
        self.token = token
        self.builds: list[dict[str, Any]] = []  # as given, newest first
        self.retries: dict[int, list[Retry]] = {}  # by build number, in order
        self.limit = limit
        self.used = 0
        self.window_start: datetime | None = None
        self.status = 200  # a scripted outage answers another status with an error body
        self.refusals = 0  # retries to answer 403, as for a token without `write_builds`
        # The builds as shown, until `serve` or a retry changes them: a listing of hundreds
        # of jobs is answered without building it anew (a benchmarked poll's time is the
        # source's, not the stand-in's).
        self._served: tuple[tuple[Any, ...], list[dict[str, Any]]] | None = None
        self._version = 0
        # The pages answered of those builds, by request target: body, ETag, Link header.
        self._pages: dict[str, tuple[bytes, str, str]] = {}
        self._pages_of: tuple[Any, ...] | None = None
        super().__init__()

    @property
    def prefix(self) -> str:
        org, slug = self.pipeline.split("/", 1)
        return f"/v2/organizations/{org}/pipelines/{slug}"

    def serve(self, builds: list[dict[str, Any]]) -> None:
        with self.lock:
            self.builds = builds
            self._version += 1

    def fail_with(self, status: int) -> None:
        """Answer every request `status` until told 200 again (the builds are kept)."""
        with self.lock:
            self.status = status

    def refuse_retries(self, count: int) -> None:
        """Answer the next `count` retries 403, as Buildkite does a token without the scope."""
        with self.lock:
            self.refusals = count

    def retries_due(self) -> list[datetime]:
        """When the retries accepted so far are over."""
        with self.lock:
            return [retry.due for retries in self.retries.values() for retry in retries]

    # --- answering -------------------------------------------------------------------------
    def respond(self, request: Request) -> Answer:
        if self.token is not None and request.headers.get("Authorization") != f"Bearer {self.token}":
            return _error(401, "Authentication required. Please supply a valid API Access Token.")
        if self.status != 200:
            return _error(self.status, f"scripted status {self.status}")
        limited = self._spend()
        if limited is not None:
            return limited
        if request.method == "GET" and request.path == f"{self.prefix}/builds":
            return self._builds(request)
        if request.method == "PUT" and request.path.startswith(f"{self.prefix}/builds/"):
            found = _RETRY.fullmatch(request.path.removeprefix(self.prefix))
            if found and self.refusals:
                self.refusals -= 1
                return _error(403, REFUSED)
            if found:
                return self._retry(int(found[1]), found[2])
        return _error(404, "No route matches")

    def _spend(self) -> Answer | None:
        now = self.clock() if self.clock else None
        if now is not None and (self.window_start is None or now - self.window_start >= timedelta(minutes=1)):
            self.window_start, self.used = now, 0
        self.used += 1
        if self.used > self.limit:
            return json_answer(429, {"message": "Too many requests"}, self._limit_headers())
        return None

    def _limit_headers(self) -> dict[str, str]:
        reset = 60
        if self.clock is not None and self.window_start is not None:
            reset = max(0, 60 - int((self.clock() - self.window_start).total_seconds()))
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(max(self.limit - self.used, 0)),
            "RateLimit-Reset": str(reset),
        }

    def _builds(self, request: Request) -> Answer:
        listing = self.served()
        assert self._served is not None
        if self._pages_of != self._served[0]:  # the builds changed: every page may have
            self._pages, self._pages_of = {}, self._served[0]
        if request.target not in self._pages:
            self._pages[request.target] = self._page(request, listing)
        body, etag, links = self._pages[request.target]
        headers = {**JSON, **self._limit_headers(), "ETag": etag}
        if links:
            headers["Link"] = links
        if request.headers.get("If-None-Match") == etag:
            return 304, headers, b""
        return 200, headers, body

    def _page(self, request: Request, listing: list[dict[str, Any]]) -> tuple[bytes, str, str]:
        """The page `request` asks for of `listing`: its body, ETag and Link header."""
        query = request.query
        created_from, finished_from = (
            parse_time(query[name]) if query.get(name) else None for name in ("created_from", "finished_from")
        )
        builds = []
        for build in listing:
            if "branch" in query and build.get("branch") != query["branch"]:
                continue
            if created_from and parse_time(build["created_at"]) < created_from:
                continue
            finished = build.get("finished_at")
            if finished_from and (not finished or parse_time(finished) < finished_from):
                continue
            if query.get("include_retried_jobs") != "true":
                build = {**build, "jobs": [j for j in build.get("jobs", []) if not j.get("retried")]}
            builds.append(build)
        page, links = paged(request, builds, self.url)
        body = json.dumps(page).encode()
        return body, weak_etag(body), links

    def served(self) -> list[dict[str, Any]]:
        """The builds as the API shows them now: no `rerun` keys; each retry as a new job."""
        now = self.clock() if self.clock else None
        # What the showing depends on: the builds given, and which retries are over.
        over = tuple(now is not None and now >= r.due for retries in self.retries.values() for r in retries)
        key = (self._version, over)
        if self._served is None or self._served[0] != key:
            self._served = (key, [self._shown(build, now) for build in self.builds])
        return self._served[1]

    def _shown(self, build: dict[str, Any], now: datetime | None) -> dict[str, Any]:
        jobs = [{k: v for k, v in job.items() if k != "rerun"} for job in build.get("jobs", [])]
        retries = self.retries.get(build.get("number", -1), [])
        if not retries:
            return {**build, "jobs": jobs}
        shown = {**build, "jobs": jobs}
        for retry in retries:
            old = next((job for job in jobs if job["id"] == retry.job_id), None)
            if old is None:  # a later listing without that job: nothing to show of it
                continue
            old.update(retried=True, retried_in_job_id=retry.new_id)
            new = {**old, "id": retry.new_id, "retried": False, "retried_in_job_id": None}
            new["retries_count"] = int(old.get("retries_count") or 0) + 1
            new["web_url"] = f"{build.get('web_url', '')}#{retry.new_id}"
            done = now is not None and now >= retry.due
            new["state"] = retry.state if done else "running"
            new["finished_at"] = format_time(retry.due) if done else None
            for key in ("signal_reason", "exit_status"):
                new[key] = None
            if new["state"] == "failed":
                new["exit_status"] = 1
            jobs.append(new)
        if any(now is None or now < retry.due for retry in retries):
            shown.update(state="running", finished_at=None)
        else:
            failed = any(
                j.get("type") == "script"
                and not j.get("retried")
                and j.get("state") in ("failed", "timed_out")
                and not j.get("soft_failed")
                for j in jobs
            )
            ends = max(retry.due for retry in retries)
            shown.update(state="failed" if failed else "passed", finished_at=format_time(ends))
        return shown

    def _retry(self, number: int, job_id: str) -> Answer:
        build = next((b for b in self.builds if b.get("number") == number), None)
        shown = self._shown(build, self.clock() if self.clock else None) if build else None
        job = next((j for j in (shown or {}).get("jobs", []) if j.get("id") == job_id), None)
        if build is None or job is None or job.get("type") != "script":
            return _error(404, "No job found")
        if job.get("retried") or job.get("state") not in _FINISHED_JOB:
            return _error(422, "Only finished jobs that have not been retried can be retried")
        assert self.clock is not None, "retries need the runtime's clock"
        original = next((j for j in build.get("jobs", []) if j.get("id") == job_id), job)
        given = original.get("rerun")
        outcome: dict[str, Any] = given if isinstance(given, dict) else {}
        seconds = outcome.get("durationS")
        took = timedelta(seconds=float(seconds)) if isinstance(seconds, int | float) else DEFAULT_RERUN
        new_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{job_id}/retry"))
        now = self.clock()
        state = str(outcome.get("state") or job.get("state"))
        retry = Retry(job_id, str(job.get("name")), str(build.get("commit")), new_id, now, now + took, state)
        self.retries.setdefault(number, []).append(retry)
        answer = copy.deepcopy(job)
        answer.update(id=new_id, state="scheduled", retried=False, retried_in_job_id=None)
        return json_answer(200, answer, self._limit_headers())


def _error(status: int, message: str) -> Answer:
    return json_answer(status, {"message": message})
