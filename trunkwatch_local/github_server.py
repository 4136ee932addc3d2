"""A GitHub REST API stand-in on 127.0.0.1 for one repository, for the tests, the benchmarks
and the local runtime: what the `github` source reads (commits, runs, jobs by attempt,
workflows; paged with `Link`, weak ETags answered 304), what the GitHub receivers write
(issues, comments) and the job reruns of `confirm: rerun`, handed to the HUD stand-in,
which shows each as the job's newest attempt once it is over. Its rate limit spends one
per answer but a 304; it misbehaves on demand (`fail_next`, `refuse`, `broken`, `budget`,
`delay_s`)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.stand_in import JSON, Answer, Misbehaving, Request, json_answer, paged, weak_etag

REPO = "pytorch/pytorch"
REPO_ID = 65600975
REFUSED = "Resource not accessible by integration"  # a token without `actions: write`
DOCS = "https://docs.github.com/rest"
_RUN_JOBS = re.compile(r"/actions/runs/(\d+)/jobs")
_ATTEMPT_JOBS = re.compile(r"/actions/runs/(\d+)/attempts/(\d+)/jobs")
_WORKFLOW = re.compile(r"/actions/workflows/(\d+)")
_ISSUE = re.compile(r"/issues/(\d+)")
_COMMENTS = re.compile(r"/issues/(\d+)/comments")
_RERUN = re.compile(r"/actions/jobs/(\d+)/rerun")


@dataclass
class Issue:
    number: int
    title: str
    body: str
    labels: list[str]
    state: str = "open"
    state_reason: str | None = None
    comments: list[str] = field(default_factory=list)

    def as_json(self, base: str, repo: str) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "body": self.body,
            "state": self.state,
            "state_reason": self.state_reason,
            "labels": [{"name": name} for name in self.labels],
            "comments": len(self.comments),
            "html_url": f"{base}/{repo}/issues/{self.number}",
        }


@dataclass(frozen=True)
class AcceptedRerun:
    at: datetime  # on the HUD stand-in's clock
    job_id: int
    sha: str
    job: str  # the HUD's job name (column)


class GitHubServer(Misbehaving):
    def __init__(
        self,
        repo: str = REPO,
        repo_id: int = REPO_ID,
        *,
        branch: str = "main",
        hud: HudServer | None = None,
        limit: int = 5000,
        delay_s: float = 0.0,
    ) -> None:
        self.repo = repo  # another repository's requests are not found
        self.repo_id = repo_id
        self.branch = branch
        self.hud = hud  # where reruns go; without one, no job is found to rerun
        self.delay_s = delay_s
        # The repository, as GitHub's objects: commits and runs newest first.
        self.commits: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []
        self.attempts: dict[int, dict[int, list[dict[str, Any]]]] = {}  # run id -> attempt -> its jobs
        self.workflows: dict[int, dict[str, Any]] = {}  # by id
        self.issues: dict[int, Issue] = {}
        self.pull_requests: list[dict[str, Any]] = []
        self.pull_comments: dict[int, list[str]] = {}  # by pull request number
        self.accepted: list[AcceptedRerun] = []  # in order
        # The rate limit.
        self.limit = self.remaining = limit
        self.reset: datetime | None = None
        # Scripted answers.
        self.broken: dict[str, Answer] = {}  # path -> its answer instead of the data
        self.budget: int | None = None  # answers left before every one is `limit_answer`
        self.limit_answer: tuple[int, dict[str, str], dict[str, Any]] | None = None
        self.unanswered: list[str] = []
        super().__init__()

    # --- what was asked --------------------------------------------------------------------
    @property
    def unconditional(self) -> int:
        """GETs without If-None-Match: those that spend rate limit on GitHub."""
        return sum(1 for r in self.requests if r.method == "GET" and "If-None-Match" not in r.headers)

    @property
    def authorizations(self) -> list[str]:
        """The Authorization header of every write."""
        return [r.headers.get("Authorization", "") for r in self.requests if r.method != "GET"]

    def refuse(self, count: int) -> None:
        """Answer the next `count` requests 403, as GitHub does a token without the permission."""
        self.fail_next(count, 403, REFUSED)

    def add_pull_request(self, body: str, number: int | None = None) -> int:
        number = number or len(self.issues) + len(self.pull_requests) + 1
        self.pull_requests.append({"number": number, "body": body, "state": "open", "pull_request": {}})
        self.pull_comments[number] = []
        return number

    # --- answering -------------------------------------------------------------------------
    def handle(self, request: Request) -> Answer:
        if self.delay_s:
            time.sleep(self.delay_s)
        return super().handle(request)

    def respond(self, request: Request) -> Answer:
        if self.budget is not None:
            if self.budget <= 0:
                assert self.limit_answer is not None
                status, headers, said = self.limit_answer
                return json_answer(status, said, {**self._limit_headers(), **headers})
            self.budget -= 1
        if request.path in self.broken:
            return self.broken[request.path]
        if self.remaining <= 0:
            said = {"message": "API rate limit exceeded for user ID 101.", "documentation_url": DOCS}
            return json_answer(403, said, self._limit_headers())
        prefix = f"/repos/{self.repo}"
        path = request.path.replace(f"/repositories/{self.repo_id}/", f"{prefix}/", 1)
        found = None
        if path.startswith(f"{prefix}/"):
            answer = self._read if request.method == "GET" else self._write
            found = answer(request, path.removeprefix(prefix))
        if found is None:
            self.unanswered.append(f"{request.method} {request.target}")
            return _error(404, "Not Found")
        status, data, link = found
        body = json.dumps(data).encode() if data is not None else b""
        headers = {**JSON, "ETag": weak_etag(body)}
        if link:
            headers["Link"] = link
        if request.method == "GET" and request.headers.get("If-None-Match") == headers["ETag"]:
            return 304, {**headers, **self._limit_headers()}, b""  # free of rate limit
        self.remaining -= 1
        return status, {**headers, **self._limit_headers()}, body

    def _limit_headers(self) -> dict[str, str]:
        left = max(self.remaining, 0)
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(left),
            "X-RateLimit-Used": str(self.limit - left),
            "X-RateLimit-Resource": "core",
        }
        if self.reset is not None:
            headers["X-RateLimit-Reset"] = str(int(self.reset.timestamp()))
        return headers

    def _read(self, request: Request, tail: str) -> tuple[int, Any, str] | None:
        """(status, JSON, Link) of a GET of `/repos/{repo}<tail>`; None when there is none."""
        query = request.query
        if tail == "/commits" and query.get("sha", self.branch) == self.branch:
            return 200, paged(request, self.commits, self.url)[0], ""  # no Link: one page
        if tail == "/actions/runs":
            runs = [
                run
                for run in self.runs
                if query.get("branch", run["head_branch"]) == run["head_branch"]
                and query.get("event", run["event"]) == run["event"]
            ]
            items, link = self._page(request, runs, canonical=True)
            return 200, {"total_count": len(runs), "workflow_runs": items}, link
        if (m := _RUN_JOBS.fullmatch(tail)) and int(m[1]) in self.attempts:
            attempts = self.attempts[int(m[1])]
            if query.get("filter") == "all":
                jobs = [job for attempt in sorted(attempts) for job in attempts[attempt]]
            else:
                latest: dict[str, dict[str, Any]] = {}
                for attempt in sorted(attempts):
                    latest.update({job["name"]: job for job in attempts[attempt]})
                jobs = list(latest.values())
            items, link = self._page(request, jobs, canonical=True)
            return 200, {"total_count": len(jobs), "jobs": items}, link
        if (m := _ATTEMPT_JOBS.fullmatch(tail)) and int(m[2]) in self.attempts.get(int(m[1]), {}):
            jobs = self.attempts[int(m[1])][int(m[2])]
            items, link = self._page(request, jobs, canonical=True)
            return 200, {"total_count": len(jobs), "jobs": items}, link
        if (m := _WORKFLOW.fullmatch(tail)) and int(m[1]) in self.workflows:
            return 200, self.workflows[int(m[1])], ""
        if tail == "/issues":
            wanted = set(filter(None, query.get("labels", "").split(",")))
            issues = [
                issue.as_json(self.url, self.repo)
                for issue in self.issues.values()
                if issue.state == query.get("state", "open") and wanted <= set(issue.labels)
            ]
            items, link = self._page(request, issues + self.pull_requests, canonical=False)
            return 200, items, link
        if (m := _COMMENTS.fullmatch(tail)) and (comments := self._comments(int(m[1]))) is not None:
            listed = [{"id": n + 1, "body": text} for n, text in enumerate(comments)]
            items, link = self._page(request, listed, canonical=False)
            return 200, items, link
        return None

    def _write(self, request: Request, tail: str) -> tuple[int, Any, str] | None:
        """(status, JSON, Link) of a POST or PATCH to `/repos/{repo}<tail>`."""
        if request.method == "POST" and (m := _RERUN.fullmatch(tail)):
            return self._rerun(int(m[1]))
        sent = json.loads(request.body or b"{}")
        if request.method == "POST" and tail == "/issues":
            number = len(self.issues) + len(self.pull_requests) + 1
            issue = Issue(number, sent["title"], sent.get("body", ""), list(sent.get("labels", [])))
            self.issues[number] = issue
            return 201, issue.as_json(self.url, self.repo), ""
        if request.method == "POST" and (m := _COMMENTS.fullmatch(tail)):
            comments = self._comments(int(m[1]))
            if comments is None:
                return None
            comments.append(sent["body"])
            return 201, {"id": len(comments), "body": sent["body"]}, ""
        if request.method == "PATCH" and (m := _ISSUE.fullmatch(tail)) and int(m[1]) in self.issues:
            issue = self.issues[int(m[1])]
            issue.state = sent.get("state", issue.state)
            issue.state_reason = sent.get("state_reason", issue.state_reason)
            return 200, issue.as_json(self.url, self.repo), ""
        return None

    def _rerun(self, job_id: int) -> tuple[int, Any, str]:
        rerun = self.hud.rerun(job_id) if self.hud is not None else None
        if rerun is None:
            return 404, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}, ""
        assert self.hud is not None and self.hud.clock is not None
        self.accepted.append(AcceptedRerun(self.hud.clock(), job_id, *rerun))
        return 201, None, ""

    def _comments(self, number: int) -> list[str] | None:
        return self.issues[number].comments if number in self.issues else self.pull_comments.get(number)

    def _page(self, request: Request, items: list[Any], canonical: bool) -> tuple[list[Any], str]:
        """One page of `items`, and the Link header to the others (on the repository's id
        when `canonical`, as GitHub's Actions listings link)."""
        path = request.path
        if canonical:
            path = path.replace(f"/repos/{self.repo}/", f"/repositories/{self.repo_id}/", 1)
        return paged(request, items, self.url, path)


def _error(status: int, message: str) -> Answer:
    return json_answer(status, {"message": message, "documentation_url": DOCS, "status": str(status)})
