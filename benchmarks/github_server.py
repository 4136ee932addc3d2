"""A GitHub REST API stand-in on 127.0.0.1 serving a synthetic trunk (`scenario.Trunk`).

It answers what the `github` source asks, the way GitHub answers it: the branch's commits,
its push workflow runs (one per workflow and commit, newest first, 100 a page with `Link`
pagination on `/repositories/{id}/...` URLs), each run's jobs (`filter=latest`) and the jobs
of earlier attempts, with weak ETags answered 304 on a matching If-None-Match and
`X-RateLimit-*` headers. A job column `<workflow> / <rest>` is job `<rest>` of that
workflow's run. A flaky cell is a job that failed on attempt 1 and passed on a re-run
(attempt 2); a job still running is `in_progress` in a run that is `in_progress`.

`serve_at(now)` sets the moment whose state is served; requests are counted, and those
without If-None-Match (which cost rate limit on GitHub) are counted apart. `delay_s` holds
every answer back that long (GitHub's own latency).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from trunkwatch.domain.clock import format_time
from trunkwatch_local.scenario import Trunk
from trunkwatch_local.stand_in import Answer, StandInServer

REPO = "pytorch/pytorch"
REPO_ID = 65600975
RUNS_PER_PAGE_MAX = 100
RUN_ID_BASE = 11_000_000_000
_JOBS = re.compile(r"/actions/runs/(\d+)/jobs")
_ATTEMPT_JOBS = re.compile(r"/actions/runs/(\d+)/attempts/(\d+)/jobs")


@dataclass
class _Run:
    run: dict[str, Any]
    # attempt -> jobs that ran in it (a re-run attempt holds only the re-run jobs)
    attempts: dict[int, list[dict[str, Any]]]

    def latest_jobs(self) -> list[dict[str, Any]]:
        latest: dict[str, dict[str, Any]] = {}
        for attempt in sorted(self.attempts):
            latest.update({job["name"]: job for job in self.attempts[attempt]})
        return sorted(latest.values(), key=lambda job: job["id"] % 1000)


class GitHubServer(StandInServer):
    def __init__(self, trunk: Trunk, repo: str = REPO, delay_s: float = 0.0) -> None:
        self.trunk = trunk
        self.delay_s = delay_s
        self.repo = repo
        self.requests = 0
        self.unconditional = 0
        self.not_modified = 0
        self._lock = threading.Lock()
        self._commits: list[dict[str, Any]] = []
        self._runs: list[_Run] = []
        self._by_id: dict[int, _Run] = {}
        self._workflows = sorted({job.split(" / ", 1)[0] for job in trunk.jobs})
        super().__init__()

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = self.unconditional = self.not_modified = 0

    # --- the state at a moment --------------------------------------------------------
    def serve_at(self, now: datetime) -> None:
        """Serve the trunk as it is at `now`: landed commits, their runs and jobs."""
        trunk = self.trunk
        landed = int((now - trunk.start) / trunk.commit_every) + 1 if now >= trunk.start else 0
        commits, runs = [], []
        for index in range(landed - 1, -1, -1):
            at = trunk.start + index * trunk.commit_every
            commits.append(self._commit(index, at))
            done = now >= at + trunk.job_duration
            runs += [self._run(index, at, done, w, workflow) for w, workflow in enumerate(self._workflows)]
        runs.sort(key=lambda r: r.run["created_at"], reverse=True)
        with self._lock:
            self._commits, self._runs = commits, runs
            self._by_id = {r.run["id"]: r for r in runs}

    def _commit(self, index: int, at: datetime) -> dict[str, Any]:
        sha = self.trunk.sha(index)
        parent = self.trunk.sha(index - 1)
        author = {
            "name": f"Developer {index % 4}",
            "email": f"dev{index % 4}@example.com",
            "date": format_time(at),
        }
        return {
            "sha": sha,
            "node_id": f"C_{sha[:20]}",
            "url": f"https://api.github.com/repos/{self.repo}/commits/{sha}",
            "html_url": f"https://github.com/{self.repo}/commit/{sha}",
            "commit": {
                "message": f"[bench] change number {index} (#{160000 + index})\n\nSummary of the change.",
                "author": author,
                "committer": {**author, "name": "pytorchmergebot"},
                "tree": {"sha": hashlib.sha1(sha.encode()).hexdigest()},  # noqa: S324 - an id
                "comment_count": 0,
            },
            "author": {"login": f"dev{index % 4}", "id": 1000 + index % 4, "type": "User"},
            "committer": {"login": "pytorchmergebot", "id": 97764156, "type": "User"},
            "parents": [{"sha": parent, "url": f"https://api.github.com/repos/{self.repo}/commits/{parent}"}],
        }

    def _run(self, index: int, at: datetime, done: bool, w: int, workflow: str) -> _Run:
        run_id = RUN_ID_BASE + index * 100 + w
        created = at + timedelta(minutes=1, seconds=w)
        first: list[dict[str, Any]] = []
        rerun: list[dict[str, Any]] = []
        columns = [job for job in self.trunk.jobs if job.split(" / ", 1)[0] == workflow]
        for i, column in enumerate(columns):
            name = column.split(" / ", 1)[1]
            outcome = self.trunk.outcome(column, index) if done else None
            if outcome == "flaky":
                first.append(self._job(run_id, i, 1, name, created, "failure"))
                rerun.append(self._job(run_id, i, 2, name, created, "success"))
            else:
                first.append(self._job(run_id, i, 1, name, created, outcome))
        attempt = 2 if rerun else 1
        failed = any(job["conclusion"] == "failure" for job in first + rerun if job["run_attempt"] == attempt)
        finished = created + self.trunk.job_duration + timedelta(minutes=10 * (attempt - 1))
        run = {
            "id": run_id,
            "name": workflow,
            "node_id": f"WFR_{run_id}",
            "head_branch": "main",
            "head_sha": self.trunk.sha(index),
            "path": f".github/workflows/{workflow}.yml",
            "display_title": f"[bench] change number {index}",
            "run_number": 90000 + index,
            "event": "push",
            "status": "completed" if done else "in_progress",
            "conclusion": ("failure" if failed else "success") if done else None,
            "workflow_id": 1_000_000 + w,
            "url": f"https://api.github.com/repos/{self.repo}/actions/runs/{run_id}",
            "html_url": f"https://github.com/{self.repo}/actions/runs/{run_id}",
            "created_at": format_time(created),
            "updated_at": format_time(finished if done else created),
            "run_attempt": attempt,
            "run_started_at": format_time(created),
            "jobs_url": f"https://api.github.com/repos/{self.repo}/actions/runs/{run_id}/jobs",
            "logs_url": f"https://api.github.com/repos/{self.repo}/actions/runs/{run_id}/logs",
            "head_commit": {"id": self.trunk.sha(index), "message": f"[bench] change number {index}"},
            "repository": {"id": REPO_ID, "full_name": self.repo},
        }
        return _Run(run, {1: first, 2: rerun} if rerun else {1: first})

    def _job(
        self, run_id: int, i: int, attempt: int, name: str, created: datetime, conclusion: str | None
    ) -> dict[str, Any]:
        job_id = (run_id * 2 + attempt - 1) * 1000 + i
        started = created + timedelta(minutes=2)
        return {
            "id": job_id,
            "run_id": run_id,
            "run_attempt": attempt,
            "node_id": f"CR_{job_id}",
            "head_branch": "main",
            "url": f"https://api.github.com/repos/{self.repo}/actions/jobs/{job_id}",
            "html_url": f"https://github.com/{self.repo}/actions/runs/{run_id}/job/{job_id}",
            "status": "completed" if conclusion else "in_progress",
            "conclusion": conclusion,
            "created_at": format_time(created),
            "started_at": format_time(started),
            "completed_at": format_time(started + self.trunk.job_duration) if conclusion else None,
            "name": name,
            "steps": [
                {"name": step, "status": "completed", "conclusion": "success", "number": n}
                for n, step in enumerate(("Set up job", "Checkout", "Build", "Test", "Complete job"), start=1)
            ],
            "labels": [name.rsplit(", ", 1)[-1].rstrip(")")],
            "runner_name": f"i-{job_id % 100000:05d}",
            "runner_group_name": "Default",
        }

    # --- answering --------------------------------------------------------------------
    def answer(self, raw_path: str, if_none_match: str | None) -> Answer:
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._lock:
            self.requests += 1
            self.unconditional += if_none_match is None
            found = self._route(raw_path)
        if found is None:
            return 404, {"Content-Type": "application/json"}, b'{"message": "Not Found"}'
        data, link = found
        body = json.dumps(data).encode()
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "ETag": f'W/"{hashlib.sha256(body).hexdigest()[:32]}"',
            "X-RateLimit-Limit": "15000",
            "X-RateLimit-Remaining": "14000",
            "X-RateLimit-Resource": "core",
        }
        if link:
            headers["Link"] = link
        if if_none_match == headers["ETag"]:
            with self._lock:
                self.not_modified += 1
            return 304, headers, b""
        return 200, headers, body

    def _route(self, raw_path: str) -> tuple[Any, str] | None:
        parts = urllib.parse.urlsplit(raw_path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        path = parts.path.replace(f"/repositories/{REPO_ID}/", f"/repos/{self.repo}/", 1)
        prefix = f"/repos/{self.repo}"
        if not path.startswith(prefix):
            return None
        tail = path.removeprefix(prefix)
        if tail == "/commits":
            return self._commits[: int(query.get("per_page", 30))], ""
        if tail == "/actions/runs":
            items, link = self._page(parts.path, query, [r.run for r in self._runs])
            return {"total_count": len(self._runs), "workflow_runs": items}, link
        if m := _ATTEMPT_JOBS.fullmatch(tail):
            run = self._by_id.get(int(m[1]))
            jobs = run.attempts.get(int(m[2])) if run else None
            if jobs is None:
                return None
            items, link = self._page(parts.path, query, jobs)
            return {"total_count": len(jobs), "jobs": items}, link
        if m := _JOBS.fullmatch(tail):
            run = self._by_id.get(int(m[1]))
            if run is None:
                return None
            jobs = run.latest_jobs()
            items, link = self._page(parts.path, query, jobs)
            return {"total_count": len(jobs), "jobs": items}, link
        return None

    def _page(self, path: str, query: dict[str, str], items: list[Any]) -> tuple[list[Any], str]:
        per_page = min(int(query.get("per_page", 30)), RUNS_PER_PAGE_MAX)
        page = int(query.get("page", 1))
        last = max(1, -(-len(items) // per_page))
        canonical = path.replace(f"/repos/{self.repo}/", f"/repositories/{REPO_ID}/", 1)

        def url(n: int) -> str:
            return f"{self.url}{canonical}?" + urllib.parse.urlencode({**query, "page": str(n)})

        links = []
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
        return items[(page - 1) * per_page : page * per_page], ", ".join(links)
