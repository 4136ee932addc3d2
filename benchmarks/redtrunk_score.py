"""Workload `redtrunk`: today's rule scored against a red trunk's ground truth, and what rerun
verdicts (issue #27) would have said about its pages.

`python -m benchmarks redtrunk [--quick]` generates a trunk with `benchmarks.redtrunk` (seed
`SEED`, two weeks; `--quick`: `QUICK_DAYS` days), replays it through the local runtime in a
fresh process (`trunkwatch_local.session.run_replay`) and scores the SNS messages it publishes.
The two weeks cost about 5 minutes of CPU (679 polls of 25 commits x 60 jobs; 13 minutes of
wall time on a busy two-core machine); `--quick` about a minute.

A page is the first firing message of an alert's episode (reminders and updates are not
pages). For a `TrunkJobFailing` page, its cells are the failing runs it lists (their URLs
name commit and column, `benchmarks.redtrunk`); its kind is the cause of its newest failing
cell: `code` (a real breakage), `external` (a dependency breakage), `infra` (a runner outage)
or `flaky`. Figures:

- `pages_per_day`: job pages and trunk pages (`TrunkBroken`, `TrunkBadlyBroken`) a day;
- `precision_code`: job pages whose job was really broken by code at that time;
  `precision_any_breakage`: broken by code, a dependency or a runner outage;
- `recall_breaks_3plus`: breakages lasting 3 or more commits with a job page whose failing
  cells are that breakage's;
- `delay_after_third_failure_s_p50`: from the moment the third failing result of the page's
  run was in (the HUD shows it) to the page (includes up to one 30-minute poll);
- `culprit_right`: code pages naming the breaking commit (`culprit_sha`);
- `innocent_prs_named`: pages naming a commit that broke nothing (dependency, outage, flaky
  failure, or a wrong commit of a real breakage), with the distinct commits.

`verdicts` applies `trunkwatch.domain.verdict` to each job page offline, as if the reruns
`plan_reruns` asks for were requested at the page's time: their outcomes are the generator's
`rerun` data of the last-pass and culprit commits (the failing columns of the job), the
culprit's failed retry is its `failedPreviousRun`, and the runner-outage evidence is what the
HUD showed then (other jobs on the runner type failing without failure lines in the hour
before). It reports the verdicts by page kind and the innocent commits that would still be
named as `confirmed`.
"""

from __future__ import annotations

import multiprocessing
import re
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.redtrunk import DAYS, RedTrunk
from trunkwatch.domain.cells import job_key
from trunkwatch.domain.verdict import (
    Evidence,
    Rerun,
    RerunStatus,
    Role,
    Suspect,
    Verdict,
    decide,
    plan_reruns,
)

SEED = 100
QUICK_DAYS = 3
HOURLY_CAP = 20  # reruns a trunk may request an hour (offline scoring)
PEER_WINDOW = timedelta(hours=1)  # "at the same time" for the runner-outage evidence
JOB_ALERT = "TrunkJobFailing"
TRUNK_ALERTS = ("TrunkBroken", "TrunkBadlyBroken")
# retry_stands_in: a culprit whose failure is a failed retry is not rerun (the retry is its
# rerun); rerun_both: it is rerun anyway (the retry counts only if the rerun cannot be had).
POLICIES = ("retry_stands_in", "rerun_both")


@dataclass(frozen=True)
class Page:
    at: datetime
    alertname: str
    job: str | None
    annotations: dict[str, str]

    @property
    def cells(self) -> list[tuple[int, int]]:
        """(commit index, column) of the failing runs it lists, newest first."""
        runs = self.annotations.get("failing_runs", "").split()
        cells = []
        for url in runs:
            parts = url.rstrip("/").split("/")
            cells.append((int(parts[-3]), int(parts[-1])))
        return cells


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def replay(path: str) -> tuple[list[dict[str, Any]], float]:
    """The messages a replay publishes (at, status, labels, annotations), and its wall time."""
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.session import run_replay

    started = time.perf_counter()
    rows = []
    for message in run_replay(read_replay(path)):
        row = message.as_json()
        alert = row["message"]["alerts"][0]
        rows.append(
            {
                "at": row["at"],
                "status": row["message"]["status"],
                "reason": row["message"].get("notification_reason", ""),
                "labels": alert["labels"],
                "annotations": alert["annotations"],
            }
        )
    return rows, time.perf_counter() - started


def pages(messages: list[dict[str, Any]]) -> list[Page]:
    """The first firing message of each alert episode (per alert name and job)."""
    open_episodes: set[tuple[str, str | None]] = set()
    found = []
    for row in messages:
        labels = row["labels"]
        key = (labels["alertname"], labels.get("job"))
        if row["status"] == "resolved":
            open_episodes.discard(key)
        elif key not in open_episodes:
            open_episodes.add(key)
            found.append(Page(_parse(row["at"]), key[0], key[1], row["annotations"]))
    return found


class Scorer:
    def __init__(self, trunk: RedTrunk) -> None:
        self.trunk = trunk
        self.sha_index = {c.sha: c.index for c in trunk.commits}
        self.key_columns: dict[str, list[int]] = defaultdict(list)
        for col in trunk.columns:
            self.key_columns[job_key(col.name)].append(col.index)

    def kind(self, page: Page) -> tuple[str, int | None]:
        """The page's kind and, for `code`, the breaking commit's index."""
        cells = page.cells
        if not cells:
            return "unknown", None
        result = self.trunk.result(*cells[0])
        cause = result.cause if result else "absent"
        if cause.startswith("code:"):
            return "code", int(cause.split(":")[1])
        return cause, None

    def third_failure_at(self, page: Page) -> datetime | None:
        finishes = sorted(r.finish for cell in page.cells if (r := self.trunk.result(*cell)) is not None)
        return finishes[2] if len(finishes) >= 3 else None

    # -- offline verdicts ---------------------------------------------------------------------

    def _failing_columns(self, page: Page, commit: int) -> list[int]:
        columns = self.key_columns.get(page.job or "", [])
        failing = [
            c
            for c in columns
            if (r := self.trunk.result(commit, c)) is not None and r.conclusion == "failure"
        ]
        return failing or [c for c in columns if self.trunk.result(commit, c) is not None]

    def _rerun(self, commit: int | None, columns: list[int], at: datetime) -> Rerun | None:
        if commit is None:
            return None
        if any(self.trunk.result(commit, c) is None for c in columns):
            # GitHub reruns a job that ran: a shard that did not run on that commit cannot be.
            return Rerun(RerunStatus.REQUEST_FAILED, "the job did not run on that commit")
        failed = any(self.trunk.rerun(commit, c, at)[0] == "failure" for c in columns)
        return Rerun(RerunStatus.FAILURE if failed else RerunStatus.SUCCESS)

    def _runner_peers(self, page: Page, columns: list[int]) -> tuple[str, int]:
        runners = {self.trunk.columns[c].runner for c in columns}
        runner = sorted(runners)[0] if runners else ""
        own = set(self.key_columns.get(page.job or "", []))
        peers = set()
        since = page.at - PEER_WINDOW
        newest = [c.index for c in self.trunk.commits if c.time <= page.at][-25:]
        for col in self.trunk.columns:
            if col.runner != runner or col.index in own:
                continue
            for commit in newest:
                r = self.trunk.result(commit, col.index)
                if r and r.conclusion == "failure" and not r.lines and since <= r.finish <= page.at:
                    peers.add(job_key(col.name))
                    break
        return runner, len(peers)

    def verdict(self, page: Page, requested_this_hour: int, policy: str) -> tuple[str, str, int]:
        """(verdict, reason, reruns requested) for a job page. `policy`: `retry_stands_in` (no
        culprit rerun after a failed retry) or `rerun_both` (the culprit is rerun anyway)."""
        culprit_sha = page.annotations.get("culprit_sha", "")
        last_pass_sha = page.annotations.get("last_pass_sha") or None
        suspect = Suspect(page.job or "", culprit_sha, last_pass_sha)
        culprit = self.sha_index[culprit_sha]
        last_pass = self.sha_index.get(last_pass_sha) if last_pass_sha else None
        columns = self._failing_columns(page, culprit)
        failed_retry = any(
            (r := self.trunk.result(culprit, c)) is not None and r.conclusion == "failure" and r.retried
            for c in columns
        )
        plan = plan_reruns(
            suspect,
            culprit_failed_retry=failed_retry and policy == "retry_stands_in",
            requested_this_hour=requested_this_hour,
            hourly_cap=HOURLY_CAP,
        )
        roles = {request.role for request in plan.requests}
        runner, peers = self._runner_peers(page, columns)
        evidence = Evidence(
            last_pass=self._rerun(last_pass, columns, page.at) if Role.LAST_PASS in roles else None,
            culprit=self._rerun(culprit, columns, page.at) if Role.CULPRIT in roles else None,
            culprit_failed_retry=failed_retry,
            no_failure_lines=not page.annotations.get("failure_lines"),
            runner_peers_failing=peers,
            runner=runner,
        )
        decision = decide(suspect, evidence)
        return decision.verdict.value, decision.reason, len(plan.requests)


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 3) if whole else 0.0


_TRUNK_LINE = re.compile(r"^- (?P<job>.+): \d+ commits?, culprit (?P<sha>[0-9a-f]{7,40}) ", re.MULTILINE)


def trunk_culprits(scorer: Scorer, messages: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """(job, culprit commit index) pairs the firing trunk messages (`TrunkBroken`,
    `TrunkBadlyBroken`: first pages and updates) name, from their descriptions."""
    by_prefix = {sha[:12]: index for sha, index in scorer.sha_index.items()}
    named = set()
    for row in messages:
        if row["labels"]["alertname"] not in TRUNK_ALERTS or row["status"] != "firing":
            continue
        for found in _TRUNK_LINE.finditer(row["annotations"].get("description", "")):
            index = by_prefix.get(found["sha"][:12])
            if index is not None:
                named.add((found["job"], index))
    return named


def _named_cause(scorer: Scorer, job: str, culprit: int) -> tuple[str, int | None]:
    """What broke `job` on `culprit` (its failing columns' cause), and the breaking commit."""
    causes = [
        r.cause
        for c in scorer.key_columns.get(job, [])
        if (r := scorer.trunk.result(culprit, c)) is not None and r.conclusion == "failure"
    ]
    code = next((cause for cause in causes if cause.startswith("code:")), None)
    if code is not None:
        return "code", int(code.split(":")[1])
    return (causes[0] if causes else "unknown"), None


def _episode(scorer: Scorer, page: Page) -> tuple[str, bool]:
    """The page's kind and whether it names the breaking commit. A real breakage blamed on
    another commit is `code (wrong commit)`, or `code (breaker in range)` when the breaking
    commit lies between the last pass and the culprit (a job that did not run on it)."""
    kind, breaker = scorer.kind(page)
    culprit = scorer.sha_index.get(page.annotations.get("culprit_sha", ""), -1)
    if breaker is None:
        return kind, False
    if breaker == culprit:
        return kind, True
    last_pass = scorer.sha_index.get(page.annotations.get("last_pass_sha", ""), -1)
    return ("code (breaker in range)" if last_pass < breaker < culprit else "code (wrong commit)"), False


def verdict_scores(scorer: Scorer, job_pages: list[Page], policy: str) -> dict[str, Any]:
    """The verdicts on `job_pages`, with reruns requested at each page's time under `policy`."""
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    unconfirmed: Counter[str] = Counter()
    guilty_confirmed = 0
    innocent_confirmed: list[str] = []
    innocent_total = 0
    reruns_by_hour: Counter[datetime] = Counter()
    for page in job_pages:
        kind, right = _episode(scorer, page)
        hour = page.at.replace(minute=0, second=0, microsecond=0)
        verdict, reason, requested = scorer.verdict(page, reruns_by_hour[hour], policy)
        reruns_by_hour[hour] += requested
        by_kind[kind][verdict] += 1
        innocent_total += not right
        if verdict == Verdict.UNCONFIRMED:
            unconfirmed[reason] += 1
        elif verdict == Verdict.CONFIRMED and right:
            guilty_confirmed += 1
        elif verdict == Verdict.CONFIRMED:
            innocent_confirmed.append(page.annotations.get("culprit_sha", ""))
    code_right = sum(_episode(scorer, page)[1] for page in job_pages)
    return {
        "by_kind": {kind: dict(sorted(counts.items())) for kind, counts in sorted(by_kind.items())},
        "guilty_confirmed": guilty_confirmed,
        "guilty_confirmed_share": _ratio(guilty_confirmed, code_right),
        "innocent_prs_confirmed": len(innocent_confirmed),
        "innocent_prs_confirmed_distinct": len(set(innocent_confirmed)),
        "innocent_prs_not_confirmed": innocent_total - len(innocent_confirmed),
        "reruns_requested": sum(reruns_by_hour.values()),
        "unconfirmed_reasons": dict(unconfirmed.most_common()),
    }


def score(trunk: RedTrunk, messages: list[dict[str, Any]]) -> dict[str, Any]:
    scorer = Scorer(trunk)
    found = pages(messages)
    job_pages = [p for p in found if p.alertname == JOB_ALERT]
    trunk_pages = [p for p in found if p.alertname in TRUNK_ALERTS]
    kinds: Counter[str] = Counter()
    right = 0
    innocent_shas: list[str] = []
    innocent_by_kind: Counter[str] = Counter()
    delays_code: list[float] = []
    delays_all: list[float] = []
    detected: set[int] = set()
    for page in job_pages:
        kind, _ = scorer.kind(page)
        kinds[kind] += 1
        for commit, column in page.cells:
            result = trunk.result(commit, column)
            if result and result.cause.startswith("code:"):
                detected.add(int(result.cause.split(":")[1]))
        label, is_right = _episode(scorer, page)
        right += is_right
        if not is_right:
            innocent_shas.append(page.annotations.get("culprit_sha", ""))
            innocent_by_kind[label] += 1
        third = scorer.third_failure_at(page)
        if third is not None:
            delay = (page.at - third).total_seconds()
            delays_all.append(delay)
            if kind == "code":
                delays_code.append(delay)
    # Trunk pages name a culprit per failing job too (and hold job pages back while firing).
    trunk_named = trunk_culprits(scorer, messages)
    trunk_innocent: Counter[str] = Counter()
    detected_with_trunk = set(detected)
    for job, culprit in trunk_named:
        cause, breaker = _named_cause(scorer, job, culprit)
        if breaker is not None:
            detected_with_trunk.add(breaker)
        if breaker != culprit:
            trunk_innocent[cause if cause != "code" else "code (wrong commit)"] += 1
    long_breaks = [b for b in trunk.breaks if b.fix - b.culprit >= 3]
    recalled = sum(b.culprit in detected for b in long_breaks)
    recalled_with_trunk = sum(b.culprit in detected_with_trunk for b in long_breaks)
    days = trunk.days
    code_pages = kinds["code"]
    breakage_pages = code_pages + kinds["external"] + kinds["infra"]
    return {
        "days": days,
        "commits": len(trunk.commits),
        "messages": len(messages),
        "job_pages": len(job_pages),
        "trunk_pages": len(trunk_pages),
        "pages_per_day": round(len(job_pages) / days, 2),
        "trunk_pages_per_day": round(len(trunk_pages) / days, 2),
        "job_pages_by_kind": dict(sorted(kinds.items())),
        "precision_code": _ratio(code_pages, len(job_pages)),
        "precision_any_breakage": _ratio(breakage_pages, len(job_pages)),
        "breaks": len(trunk.breaks),
        "breaks_3plus": len(long_breaks),
        "breaks_3plus_paged": recalled,
        "recall_breaks_3plus": _ratio(recalled, len(long_breaks)),
        "recall_breaks_3plus_with_trunk_pages": _ratio(recalled_with_trunk, len(long_breaks)),
        "delay_after_third_failure_s_p50": statistics.median(delays_code) if delays_code else None,
        "delay_after_third_failure_s_p50_all_pages": statistics.median(delays_all) if delays_all else None,
        "culprit_right": right,
        "culprit_right_of_code_pages": _ratio(right, code_pages),
        "innocent_prs_named": len(innocent_shas),
        "innocent_prs_named_distinct": len(set(innocent_shas)),
        "innocent_prs_named_by_kind": dict(sorted(innocent_by_kind.items())),
        "trunk_pages_job_culprits_named": len(trunk_named),
        "trunk_pages_innocent_prs_named": sum(trunk_innocent.values()),
        "trunk_pages_innocent_prs_named_distinct": len(
            {c for j, c in trunk_named if _named_cause(scorer, j, c)[1] != c}
        ),
        "trunk_pages_innocent_by_kind": dict(sorted(trunk_innocent.items())),
        "verdicts": {
            "hourly_cap": HOURLY_CAP,
            **{policy: verdict_scores(scorer, job_pages, policy) for policy in POLICIES},
        },
    }


def redtrunk(days: float = DAYS, seed: int = SEED) -> dict[str, Any]:
    """The workload: generate, replay in a fresh process, score."""
    started = time.perf_counter()
    trunk = RedTrunk(seed, days)
    with tempfile.TemporaryDirectory(prefix="redtrunk-") as tmp:
        path = Path(tmp) / f"redtrunk-{seed}.jsonl.gz"
        trunk.write(path)
        generated_s = time.perf_counter() - started
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            messages, replay_s = pool.apply(replay, (str(path),))
    result = score(trunk, messages)
    return {
        "seed": seed,
        "trunk": {k: v for k, v in trunk.stats.items() if k != "cells_by_cause"},
        "generate_s": round(generated_s, 1),
        "replay_s": round(replay_s, 1),
        **result,
    }
