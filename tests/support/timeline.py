"""One trunk history as its CI reported it, in time: each commit landing, each job attempt
queued and ended. Two forms of the same history come from it:

- `deliveries`: the GitHub webhook deliveries at each report's instant, as GitHub sends them
  (a commit's `push` and its runs' `workflow_run` when it lands; each job's `workflow_job`
  `queued`, `in_progress` and `completed`; a retried job's second attempt queued after its
  first failed), in any order within an instant, some of them twice;
- `snapshots`: the HUD answers a poll reads at every instant something happened (each job
  shown as its latest attempt, `failedPreviousRun` on a pass after a failed attempt).

Replayed, the two must page alike (tests/component/test_push_as_delivered.py); the push
benchmark and the red-trunk score replay the first at the jobs' real finish times. Webhooks
carry no failure lines, so no form has them. Pure: nothing here runs the pipeline.
"""

from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.redtrunk import REPO, RedTrunk
from tests.support import webhooks
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.domain.shards import Shard, ShardReport, merge

# How long after a failed attempt a retry is queued (a retry bot's reaction).
RETRY_AFTER = timedelta(minutes=1)
# The HUD's page: the newest commits a poll reads.
WINDOW = 50


@dataclass(frozen=True)
class Landing:
    """A commit landing on the trunk (its push)."""

    at: datetime
    sha: str
    title: str
    pr: int | None
    author: str

    @property
    def message(self) -> str:
        """The first line of the commit's message: a merged pull request's number at its end."""
        return f"{self.title} (#{self.pr})" if self.pr else self.title


@dataclass(frozen=True)
class Report:
    """One job attempt's report: queued (`conclusion` None) or ended."""

    at: datetime
    sha: str
    name: str  # `<workflow> / <job>`, shard numbers included
    attempt: int
    conclusion: str | None
    url: str

    @property
    def workflow(self) -> str:
        return self.name.partition(" / ")[0]


@dataclass(frozen=True)
class Timeline:
    repo: str
    branch: str
    landings: tuple[Landing, ...]  # oldest first
    reports: tuple[Report, ...]  # in time order

    @classmethod
    def of_redtrunk(cls, trunk: RedTrunk, retry_after: timedelta = RETRY_AFTER) -> Timeline:
        """A generated red trunk: each job queued when its commit lands, its first attempt
        ending at its first result, a retried one queued again `retry_after` later and
        ending at its final result."""
        landings, reports = [], []
        for info in trunk.commits:
            landings.append(
                Landing(info.time, info.sha, f"[redtrunk] change {info.index}", info.pr, info.author)
            )
            for column in trunk.columns:
                result = trunk.result(info.index, column.index)
                if result is None:
                    continue
                url = trunk.url(info.index, column.index)
                reports.append(Report(info.time, info.sha, column.name, 1, None, url))
                if result.retried:
                    retry = result.first_finish + retry_after
                    reports.append(Report(result.first_finish, info.sha, column.name, 1, "failure", url))
                    reports.append(Report(retry, info.sha, column.name, 2, None, url))
                    reports.append(
                        Report(max(result.finish, retry), info.sha, column.name, 2, result.conclusion, url)
                    )
                else:
                    reports.append(Report(result.finish, info.sha, column.name, 1, result.conclusion, url))
        return cls(REPO, "main", tuple(landings), tuple(sorted(reports, key=_order)))

    @classmethod
    def of_files(cls, replay: Path, truth: Path, retry_after: timedelta = RETRY_AFTER) -> Timeline:
        """A red trunk from its replay and truth files (benchmarks/redtrunk.py's formats, e.g.
        one generated elsewhere): commits from the snapshots, each job's final result at the
        truth's finish time. The truth does not say when a retried job's first attempt
        ended: halfway between its commit and its final result (a retry runs as long)."""
        with gzip.open(truth, "rt", encoding="utf-8") as text:
            causes = json.load(text)["cells"]
        rows: dict[str, dict[str, Any]] = {}
        cells: dict[tuple[str, str], dict[str, Any]] = {}
        with gzip.open(replay, "rt", encoding="utf-8") as lines:
            header = json.loads(lines.readline())
            for line in lines:
                hud = json.loads(line).get("hud")
                for row in (hud or {}).get("shaGrid", []):
                    rows.setdefault(row["sha"], row)
                    for name, cell in zip(hud["jobNames"], row["jobs"], strict=True):
                        if cell.get("status") == "completed":
                            cells[(row["sha"], name)] = cell
        landings, reports = [], []
        for sha, commit in sorted(causes.items(), key=lambda item: int(item[1]["idx"])):
            at, row = parse_time(commit["time"]), rows.get(sha, {})
            title = str(row.get("commitTitle") or f"change {commit['idx']}")
            pr = row.get("prNum") if isinstance(row.get("prNum"), int) else None
            landings.append(Landing(at, sha, title, pr, str(row.get("author") or "")))
            for name, (cause, finish) in commit["causes"].items():
                cell = cells.get((sha, name), {})
                url = str(cell.get("htmlUrl") or "")
                ended = parse_time(finish)
                conclusion = "success" if cause in ("pass", "flaky-retried") else "failure"
                reports.append(Report(at, sha, name, 1, None, url))
                if cell.get("failedPreviousRun") or cause == "flaky-retried":
                    first = (at + (ended - at) / 2).replace(microsecond=0)
                    reports.append(Report(first, sha, name, 1, "failure", url))
                    reports.append(Report(first + retry_after, sha, name, 2, None, url))
                    reports.append(Report(max(ended, first + retry_after), sha, name, 2, conclusion, url))
                else:
                    reports.append(Report(ended, sha, name, 1, conclusion, url))
        repo, branch = str(header["repo"]), str(header.get("branch", "main"))
        return cls(repo, branch, tuple(landings), tuple(sorted(reports, key=_order)))

    def between(self, start: datetime, end: datetime) -> Timeline:
        """The commits that landed in [start, end), with every report of theirs."""
        landings = tuple(c for c in self.landings if start <= c.at < end)
        shas = {c.sha for c in landings}
        return replace(self, landings=landings, reports=tuple(r for r in self.reports if r.sha in shas))

    def quantized(self, step: timedelta) -> Timeline:
        """Every report moved to the end of its `step` (counted from the first landing), as a
        poll every `step` would see it; landings stay (a commit's own time is its data)."""
        origin = self.landings[0].at

        def up(at: datetime) -> datetime:
            return origin + -(-(at - origin) // step) * step

        return replace(
            self, reports=tuple(sorted((replace(r, at=up(r.at)) for r in self.reports), key=_order))
        )

    def instants(self) -> list[datetime]:
        return sorted({c.at for c in self.landings} | {r.at for r in self.reports})

    def header(self, **config: Any) -> dict[str, Any]:
        return {"repo": self.repo, "branch": self.branch, "config": config}

    # -- the webhook form --------------------------------------------------------------------

    def deliveries(
        self,
        rng: random.Random | None = None,
        redelivered: float = 0.0,
        ticks: Iterable[datetime] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Replay events: every instant's deliveries (shuffled by `rng`; a `redelivered`
        share of them sent again), then a schedule tick at every instant of `ticks` (None:
        at every instant with deliveries, as a poll of the same instants ticks)."""
        by_instant: dict[datetime, list[dict[str, Any]]] = defaultdict(list)
        workflows = sorted({r.workflow for r in self.reports})
        before = "0" * 40
        for landing in self.landings:
            by_instant[landing.at] += self._landed(landing, before, workflows)
            before = landing.sha
        job_ids: dict[tuple[str, str, int], int] = {}
        for report in self.reports:
            job_id = job_ids.setdefault((report.sha, report.name, report.attempt), 1 + len(job_ids))
            by_instant[report.at] += self._job(report, job_id)
        tick_at = sorted(by_instant) if ticks is None else sorted(ticks)
        events: list[tuple[datetime, int, dict[str, Any]]] = []
        for at, deliveries in sorted(by_instant.items()):
            if rng is not None:
                rng.shuffle(deliveries)
                deliveries += [d for d in deliveries if rng.random() < redelivered]
            events += [(at, 0, {"at": format_time(at), "webhook": d}) for d in deliveries]
        events += [(at, 1, {"at": format_time(at), "tick": True}) for at in tick_at]
        return (event for _, _, event in sorted(events, key=lambda e: (e[0], e[1])))

    def _landed(self, landing: Landing, before: str, workflows: list[str]) -> list[dict[str, Any]]:
        message = landing.message
        push = webhooks.push([landing.sha], [format_time(landing.at)], self.branch, self.repo, before=before)
        push["commits"][0].update(message=message)
        push["commits"][0]["author"]["username"] = landing.author
        deliveries = [{"event": "push", "payload": push}]
        for workflow in workflows:
            run = webhooks.workflow_run(
                landing.sha, workflow, status="requested", branch=self.branch, repo=self.repo, title=message
            )
            run["workflow_run"]["head_commit"]["timestamp"] = format_time(landing.at)
            deliveries.append({"event": "workflow_run", "payload": run})
        return deliveries

    def _job(self, report: Report, job_id: int) -> list[dict[str, Any]]:
        workflow, _, job = report.name.partition(" / ")

        def delivery(status: str) -> dict[str, Any]:
            payload = webhooks.workflow_job(
                report.sha,
                job,
                workflow,
                conclusion=report.conclusion,
                status=status,
                attempt=report.attempt,
                job_id=job_id,
                branch=self.branch,
                repo=self.repo,
                url=report.url or None,
            )
            return {"event": "workflow_job", "payload": payload}

        if report.conclusion is None:
            # GitHub sends `in_progress` when a runner picks the job up; the webhook drops it.
            return [delivery("queued"), delivery("in_progress")]
        return [delivery("completed")]

    # -- the poll form ----------------------------------------------------------------------

    def snapshots(self, window: int = WINDOW) -> Iterator[dict[str, Any]]:
        """Replay events: a HUD snapshot at every instant, of the newest `window` commits."""
        names = sorted({r.name for r in self.reports})
        column = {name: i for i, name in enumerate(names)}
        shards: dict[tuple[str, str], Shard] = {}
        latest: dict[tuple[str, str], Report] = {}  # reports come in order: the last one
        pending = list(self.reports)
        landed: list[Landing] = []
        to_land = list(self.landings)
        for at in self.instants():
            while to_land and to_land[0].at <= at:
                landed.append(to_land.pop(0))
            while pending and pending[0].at <= at:
                report = pending.pop(0)
                key = (report.sha, report.name)
                shards[key] = merge(shards.get(key), _shard_report(report))
                latest[key] = report
            rows = []
            for landing in reversed(landed[-window:]):
                jobs: list[dict[str, Any]] = [{} for _ in names]
                for name in names:
                    key = (landing.sha, name)
                    if key in latest:
                        jobs[column[name]] = _cell(latest[key], shards[key], name)
                rows.append(
                    {
                        "sha": landing.sha,
                        "time": format_time(landing.at),
                        "prNum": landing.pr,
                        # As GitHub has it (its deliveries carry the commit's message).
                        "commitTitle": landing.message,
                        "author": landing.author,
                        "commitUrl": f"https://github.com/{self.repo}/commit/{landing.sha}",
                        "jobs": jobs,
                    }
                )
            yield {"at": format_time(at), "hud": {"jobNames": names, "shaGrid": rows}}


def _order(report: Report) -> tuple[datetime, int, int]:
    return report.at, report.attempt, report.conclusion is not None


def _shard_report(report: Report) -> ShardReport:
    done = report.conclusion is not None
    return ShardReport(
        report.sha, report.name, 0, report.attempt, done, report.conclusion or "queued", report.url
    )


def _cell(latest: Report, shard: Shard, name: str) -> dict[str, Any]:
    """A HUD cell: the job's latest attempt, queued or ended."""
    if latest.conclusion is None:
        return {"status": "queued", "htmlUrl": latest.url}
    run = shard.run(name)
    cell: dict[str, Any] = {"conclusion": latest.conclusion, "status": "completed", "htmlUrl": latest.url}
    if run.failed_before:
        cell["failedPreviousRun"] = True
    return cell


def write(path: Path, header: dict[str, Any], events: Iterable[dict[str, Any]]) -> Path:
    """A replay file (gzipped when `path` ends in `.gz`)."""
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in [header, *events])
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text)
    return path
