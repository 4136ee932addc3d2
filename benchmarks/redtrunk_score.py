"""Workload `redtrunk`: the rule scored against a red trunk's ground truth (issue #27).

The trunk (`benchmarks.redtrunk`, or a replay and truth file made elsewhere, scored from its
truth file alone, `Truth`) is replayed in a fresh process each way, its header's rule config
replaced by each run's: `without_confirmation`, `with_confirmation` (`"confirm": "rerun"`),
`pushed` (webhook deliveries alone, `pushed_form`) and `buildkite` (`buildkite_form`); see
benchmarks/__main__.py and docs/performance.md. Two weeks cost about 5 minutes of CPU.

A page is the first firing message of an alert's episode. A `TrunkJobFailing` page's cells
are the failing runs it lists (their URLs name the commit), its kind the cause of its newest
failing cell: `code`, `external` (a dependency), `infra` (a runner outage) or `flaky`.
Figures (`score`): `pages_per_day` (job and trunk pages); `precision_code` and
`precision_any_breakage` (job pages whose job was broken by code, or by anything, then);
`recall_breaks_3plus` (breakages of 3+ commits with a job page on their cells);
`delay_after_third_failure_s_p50` (the third failing result of the page's run to the page)
and, with `polls`, `delay_to_next_snapshot_s_p50` (from it to the first snapshot that could
show it: the part of the delay the replay's cadence sets); `delay_to_first_word_s_p50` (from
it to the first message naming the job: its page, or a firing trunk alert's message listing
it while it holds the job's page back); `culprit_right` (code pages naming the breaking
commit) and `innocent_prs_named` (pages naming a commit that broke nothing);
`breakage_pages_per_breakage`; `jobs_paged_again_within_3h` (of the same job's resolution).

The confirmed runs add `verdicts` (`verdict_scores`), from each job episode's
`culprit_verdict` as its messages bring it: the last verdict and the one 3 hours after the
page, by episode kind; the shares of environmental (dependency and outage) episodes told so,
and of code episodes confirmed on the breaking commit, at 3 hours; the episodes confirming
an innocent commit, or naming one only as an unconfirmed suspect; the reruns per episode.
Every run also scores its daily digests (`digest_scores`, design.md §4.4).
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import json
import multiprocessing
import re
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.redtrunk import DAYS, RedTrunk, timestamp
from tests.support.timeline import Timeline, write
from trunkwatch.domain.cells import job_key
from trunkwatch.domain.clock import parse_time
from trunkwatch.domain.config import RuleConfig
from trunkwatch.domain.verdict import CulpritVerdict

SEED = 100
QUICK_DAYS = 3
VERDICT_AFTER = timedelta(hours=3)  # a page's verdict is scored this long after it
JOB_ALERT = "TrunkJobFailing"
TRUNK_ALERTS = ("TrunkBroken", "TrunkBadlyBroken")
CONFIRM = {"confirm": "rerun"}
# A retried job's result may finish this long after the window that failed it ended.
RESULT_LAG = timedelta(hours=6)
REPAGE_WITHIN = timedelta(hours=3)  # a job paged again this soon after it resolved: noise
# The pushed run's schedule ticks (its sweeps: reminders, failures aging out), as the
# polled run ticks at its snapshots.
PUSHED_TICKS = timedelta(minutes=10)
# A job's line in a trunk alert's description; its verdict when it has one.
_TRUNK_LINE = re.compile(
    r"^- (?P<job>.+): \d+ commits?, (?P<role>culprit|suspect) (?P<sha>[0-9a-f]{7,40}) "
    r"(?:.*\((?P<verdict>confirmed|environmental|flaky|unconfirmed)\)$)?",
    re.MULTILINE,
)
_BUILD_URL = re.compile(r"/builds/(\d+)(?:[#/?]|$)")
_AT = re.compile(r'"at":\s*"([^"]+)"')


# A replay's messages, reruns, wall time and digests.
Replayed = tuple[list[dict[str, Any]], list[dict[str, Any]], float, list[dict[str, Any]]]


def replay(path: str, store: str = "memory") -> Replayed:
    """The messages a replay publishes (at, status, reason, labels, annotations), the reruns
    the GitHub stand-in accepted, or the job retries the Buildkite one did (at, sha, job), its
    wall time, and the daily digests it published (their JSON bodies, with `at`)."""
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.runtime import LocalRuntime
    from trunkwatch_local.session import Session, replay_into

    started = time.perf_counter()
    rows, digests = [], []
    parsed = read_replay(path)
    with Session(LocalRuntime(store=store)) as session:
        session.start(session.replaying_from(parsed))
        for message in replay_into(session, parsed):
            row = message.as_json()
            body = {**row["message"], "at": row["at"]}
            if message.is_digest:
                digests.append(body)
                continue
            alert = body["alerts"][0]
            rows.append(
                {
                    "at": row["at"],
                    "status": body["status"],
                    "reason": body.get("notification_reason", ""),
                    "labels": alert["labels"],
                    "annotations": alert["annotations"],
                }
            )
        reruns = [{"at": timestamp(r.at), "sha": r.sha, "job": r.job} for r in session.github.accepted] + [
            {"at": timestamp(r.at), "sha": r.sha, "job": r.name}
            for retries in session.buildkite.retries.values()
            for r in retries
        ]
    return rows, reruns, time.perf_counter() - started, digests


@dataclass(frozen=True)
class Page:
    at: datetime
    alertname: str
    job: str | None
    annotations: dict[str, str]

    @property
    def runs(self) -> list[str]:
        """The URLs of the failing runs it lists, newest first."""
        return self.annotations.get("failing_runs", "").split()


@dataclass
class Episode:
    """An alert's episode (per alert name and job): its page, when it resolved, the time since
    the same alert's previous resolution, and the culprit verdicts its messages carried (at,
    verdict, the commit named: culprit or suspect)."""

    page: Page
    since_resolved: timedelta | None
    end: datetime | None = None
    verdicts: list[tuple[datetime, str, str]] = field(default_factory=list)


def _trunk_lines(row: dict[str, Any]) -> list[re.Match[str]]:
    """The job lines of a firing trunk alert's message (first page, update or reminder)."""
    if row["labels"]["alertname"] not in TRUNK_ALERTS or row["status"] != "firing":
        return []
    return list(_TRUNK_LINE.finditer(row["annotations"].get("description", "")))


def episodes(messages: list[dict[str, Any]]) -> list[Episode]:
    """Every alert's episodes, in the order of their pages."""
    found: list[Episode] = []
    current: dict[tuple[str, str | None], Episode] = {}
    resolved: dict[tuple[str, str | None], datetime] = {}
    for row in messages:
        labels, notes, at = row["labels"], row["annotations"], parse_time(row["at"])
        key = (labels["alertname"], labels.get("job"))
        if row["status"] == "resolved":
            resolved[key] = at
            if key in current:
                current.pop(key).end = at
            continue
        # While a trunk-level alert inhibits them, the jobs' verdicts come with it.
        for line in _trunk_lines(row):
            if line["verdict"] and (job := current.get((JOB_ALERT, line["job"]))) is not None:
                job.verdicts.append((at, line["verdict"], line["sha"]))
        if key not in current:
            current[key] = Episode(Page(at, *key, notes), at - resolved[key] if key in resolved else None)
            found.append(current[key])
        if key[0] == JOB_ALERT and notes.get("culprit_verdict"):
            sha = notes.get("culprit_sha") or notes.get("suspect_sha", "")
            current[key].verdicts.append((at, notes["culprit_verdict"], sha))
    return found


def pages(messages: list[dict[str, Any]]) -> list[Page]:
    """The first firing message of each alert episode (per alert name and job)."""
    return [episode.page for episode in episodes(messages)]


@dataclass(frozen=True)
class Outcome:
    """A cell's result in the truth: its cause and when its final result finished."""

    cause: str  # pass, flaky, flaky-retried, code:<k>, external, infra
    finish: datetime

    @property
    def conclusion(self) -> str:
        return "success" if self.cause in ("pass", "flaky-retried") else "failure"

    @property
    def breaker(self) -> int | None:
        """The breaking commit's index, for a code breakage."""
        return int(self.cause.split(":")[1]) if self.cause.startswith("code:") else None


@dataclass(frozen=True)
class Breakage:
    culprit: int  # the breaking commit's index
    fix: int  # the first commit that no longer fails
    columns: tuple[str, ...] = ()  # the job columns it breaks


class Truth:
    """A trunk's ground truth as its truth file has it (benchmarks/redtrunk.py's format)."""

    def __init__(self, data: dict[str, Any]) -> None:
        missing = [key for key in ("days", "breaks", "cells") if key not in data]
        if missing:
            raise ValueError(f"not a redtrunk truth file: no {', '.join(missing)}")
        self.days: float = data["days"]
        self.sha_index = {sha: commit["idx"] for sha, commit in data["cells"].items()}
        self.short_index = {sha[:12]: index for sha, index in self.sha_index.items()}
        self.results = {
            commit["idx"]: {
                name: Outcome(cause, parse_time(at)) for name, (cause, at) in commit["causes"].items()
            }
            for commit in data["cells"].values()
        }
        self.breaks = [Breakage(b["culprit"], b["fix"], tuple(b.get("jobs", ()))) for b in data["breaks"]]
        # Dependency breakages and runner outages: (kind, start, end, job columns).
        self.windows = [
            (w["kind"], parse_time(w["start"]), parse_time(w["end"]), frozenset(w["jobs"]))
            for w in [*data.get("externals", ()), *data.get("outages", ())]
        ]
        self.key_columns: dict[str, list[str]] = defaultdict(list)
        for name in dict.fromkeys(name for causes in self.results.values() for name in causes):
            self.key_columns[job_key(name)].append(name)

    @classmethod
    def load(cls, path: Path) -> Truth:
        """A gzipped truth file (`*.truth.json.gz`)."""
        with gzip.open(path, "rt", encoding="utf-8") as text:
            return cls(json.load(text))

    @property
    def commits(self) -> int:
        return len(self.results)

    def result(self, commit: int, column: str) -> Outcome | None:
        """The cell's result (None: the job did not run on that commit)."""
        return self.results.get(commit, {}).get(column)

    def job_results(self, commit: int, job: str) -> dict[str, Outcome]:
        """The results of the job's columns (its shards) that ran on `commit`."""
        return {c: r for c in self.key_columns.get(job, []) if (r := self.result(commit, c)) is not None}

    def _jobs(self, breakage: Breakage) -> list[str]:
        return list(dict.fromkeys(job_key(column) for column in breakage.columns))

    def consecutive_failures(self, breakage: Breakage) -> int:
        """The most commits in a row one of the breakage's jobs failed by it (a sharded job
        failing when a shard does); the commits it did not run on are skipped."""
        most = 0
        for job in self._jobs(breakage):
            run = 0
            for commit in range(breakage.culprit, breakage.fix):
                if found := self.job_results(commit, job).values():
                    run = run + 1 if any(r.breaker == breakage.culprit for r in found) else 0
                    most = max(most, run)
        return most

    def ever_at_head(
        self, breakage: Breakage, failures: int, polls: Sequence[datetime] | None = None
    ) -> bool:
        """Whether, at some instant (at one of `polls`, when given), a job the breakage broke
        showed `failures` failing commits in a row at its newest end, one of them broken by it
        (its commits without a finished result skipped): what a rule of `failures` in a row
        needs to page it. A breakage whose fix passed before its own failures finished never does."""
        for job in self._jobs(breakage):
            cells = {
                commit: list(found.values())
                for commit in range(max(0, breakage.culprit - failures), max(self.results, default=0) + 1)
                if (found := self.job_results(commit, job))
            }
            # The run at the head only grows when a failure finishes: look at those instants.
            instants = sorted(r.finish for rs in cells.values() for r in rs if r.conclusion == "failure")
            own = [r.finish for c in range(breakage.culprit, breakage.fix) for r in cells.get(c, ())]
            if polls is not None and own:
                instants = [t for t in polls if min(own) <= t <= max(own) + timedelta(days=1)]
            for instant in instants:
                run: list[int] = []
                for commit in sorted(cells, reverse=True):
                    done = [r for r in cells[commit] if r.finish <= instant]
                    if any(r.conclusion == "failure" for r in done):
                        run.append(commit)
                    elif done and len(done) == len(cells[commit]):
                        break  # a pass ends the run
                if len(run) >= failures and any(breakage.culprit <= c < breakage.fix for c in run):
                    return True
        return False


@dataclass(frozen=True)
class Judged:
    """A job page against the truth."""

    kind: str  # code, external, infra, flaky; unknown: no failing cell
    breaker: int | None  # the breaking commit's index, for `code`
    label: str  # its kind; `code (wrong commit)` or `code (breaker in range)` if naming another
    right: bool  # it names the breaking commit
    breakers: set[int]  # the breaking commits of its cells
    episode: tuple[str, int] | None  # (kind, breaking commit or window index); None: flaky
    third_failure: datetime | None


class Scorer:
    """Scores pages against `truth`; `failed_at`: when a cell's failure was first reported,
    where that is before its final result (a failed attempt whose retry failed too), by
    (commit index, column); `builds`: the commit index of each Buildkite build number, for
    the runs of a trunk in Buildkite form (`buildkite_form`) whose URL is its build's."""

    def __init__(
        self,
        truth: Truth,
        failed_at: Mapping[tuple[int, str], datetime] | None = None,
        builds: Mapping[int, int] | None = None,
    ) -> None:
        self.truth, self.failed_at, self.builds = truth, failed_at or {}, builds or {}

    def index(self, sha: str) -> int | None:
        """The commit a full or 12-character sha names."""
        return self.truth.sha_index.get(sha, self.truth.short_index.get(sha[:12]))

    def run_commit(self, url: str) -> int:
        """The commit index a failing run's URL names: the generator's `.../actions/runs/<commit
        index>/job/...` (kept in Buildkite form) or a retried Buildkite job's `.../builds/<number>#<id>`."""
        found = _BUILD_URL.search(url)
        if found and "/actions/runs/" not in url:
            return self.builds[int(found[1])]
        return int(url.rstrip("/").split("/")[-3])

    def commits(self, page: Page) -> list[int]:
        """The commit indices of the page's failing runs, newest first."""
        return list(dict.fromkeys(self.run_commit(url) for url in page.runs))

    def cells(self, page: Page) -> list[tuple[tuple[int, str], Outcome]]:
        """((commit index, column), result) of the page's failing runs, newest first. A run's URL names
        its commit only: each is one of the failing columns of the page's job on that commit,
        the earliest to finish first (a sharded job's commit fails with its first shard)."""
        runs = Counter(self.run_commit(url) for url in page.runs)
        found: list[tuple[tuple[int, str], Outcome]] = []
        for commit in self.commits(page):
            results = self.truth.job_results(commit, page.job or "")
            failing = sorted((r.finish, c) for c, r in results.items() if r.conclusion == "failure")
            found.extend(((commit, column), results[column]) for _, column in failing[: runs[commit]])
        return found

    def judge(self, page: Page) -> Judged:
        """The job page against the truth, from its cells (`cells`): the newest's cause is its
        kind; a code breakage blamed on a commit between the last pass and the breaker (a job
        that did not run on it) is `code (breaker in range)`."""
        cells = self.cells(page)
        results = [r for _, r in cells]
        newest = results[0] if results else None
        breaker = newest.breaker if newest else None
        kind = "unknown" if newest is None else "code" if breaker is not None else newest.cause
        culprit = self.truth.sha_index.get(page.annotations.get("culprit_sha", ""), -1)
        last_pass = self.truth.sha_index.get(page.annotations.get("last_pass_sha", ""), -1)
        label = kind
        if breaker is not None and breaker != culprit:
            label = "code (breaker in range)" if last_pass < breaker < culprit else "code (wrong commit)"
        episode = (kind, breaker) if breaker is not None else None
        if newest is not None and kind in ("external", "infra"):
            windows = enumerate(self.truth.windows)
            column = cells[0][0][1]
            found = (
                i
                for i, (k, start, end, jobs) in windows
                if k == kind and column in jobs and start <= newest.finish <= end + RESULT_LAG
            )
            episode = kind, next(found, -1)
        finishes = sorted(self.failed_at.get(cell, r.finish) for cell, r in cells)
        return Judged(
            kind,
            breaker,
            label,
            breaker is not None and breaker == culprit,
            {r.breaker for r in results if r.breaker is not None},
            episode,
            finishes[2] if len(finishes) >= 3 else None,
        )

    def named_cause(self, job: str, culprit: int) -> tuple[str, int | None]:
        """What broke `job` on `culprit` (its failing columns' cause), and the breaking commit."""
        failing = [r for r in self.truth.job_results(culprit, job).values() if r.conclusion == "failure"]
        code = next((r.breaker for r in failing if r.breaker is not None), None)
        if code is not None:
            return "code", code
        return (failing[0].cause if failing else "unknown"), None


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 3) if whole else 0.0


def _share(counts: Counter[str], wanted: str) -> float:
    return _ratio(counts[wanted], sum(counts.values()))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def verdict_scores(
    scorer: Scorer, messages: list[dict[str, Any]], reruns: list[dict[str, Any]]
) -> dict[str, Any]:
    """The verdicts the confirmed run's job episodes ended with, and 3 hours after their page."""
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    at_3h: dict[str, Counter[str]] = defaultdict(Counter)
    innocent_confirmed: list[str] = []
    innocent_unconfirmed = 0
    per_episode: list[int] = []
    found = [episode for episode in episodes(messages) if episode.page.alertname == JOB_ALERT]
    unconfirmed = CulpritVerdict.UNCONFIRMED.value
    for episode in found:
        page = episode.page
        judged = scorer.judge(page)
        kind, breaker = judged.label, judged.breaker
        by_kind[kind][episode.verdicts[-1][1] if episode.verdicts else unconfirmed] += 1
        due = page.at + VERDICT_AFTER
        if episode.end is None or episode.end > due:
            then = [(v, scorer.index(sha) == breaker) for at, v, sha in episode.verdicts if at <= due]
            verdict = then[-1][0] if then else unconfirmed
            confirmed_right = verdict == CulpritVerdict.CONFIRMED and (CulpritVerdict.CONFIRMED, True) in then
            at_3h[kind]["confirmed (right commit)" if confirmed_right else verdict] += 1
        wrong = [
            sha
            for _, v, sha in episode.verdicts
            if v == CulpritVerdict.CONFIRMED and (breaker is None or scorer.index(sha) != breaker)
        ]
        if wrong:
            innocent_confirmed.append(wrong[0])
        elif not judged.right:
            innocent_unconfirmed += 1
        end = episode.end or datetime.max.replace(tzinfo=page.at.tzinfo)
        per_episode.append(
            sum(job_key(r["job"]) == page.job and page.at <= parse_time(r["at"]) <= end for r in reruns)
        )
    environmental = sum((at_3h.get(k, Counter[str]()) for k in ("external", "infra")), Counter[str]())
    # Every code breakage's episodes, also those whose page named another commit: the reruns
    # are there to tell the right one.
    code = sum((counts for kind, counts in at_3h.items() if kind.startswith("code")), Counter[str]())
    return {
        "episodes": len(found),
        "by_kind": {kind: dict(sorted(counts.items())) for kind, counts in sorted(by_kind.items())},
        "by_kind_at_3h": {kind: dict(sorted(counts.items())) for kind, counts in sorted(at_3h.items())},
        "environmental_at_3h_share": _share(environmental, CulpritVerdict.ENVIRONMENTAL.value),
        "confirmed_right_at_3h_share": _share(code, "confirmed (right commit)"),
        "confirmed_right_at_3h_share_of_right_pages": _share(
            at_3h.get("code", Counter[str]()), "confirmed (right commit)"
        ),
        "innocent_prs_confirmed": len(innocent_confirmed),
        "innocent_prs_confirmed_distinct": len(set(innocent_confirmed)),
        "innocent_prs_unconfirmed": innocent_unconfirmed,
        "reruns": len(reruns),
        "reruns_per_episode_mean": round(statistics.mean(per_episode), 2) if per_episode else 0.0,
        "reruns_per_episode_max": max(per_episode, default=0),
    }


def digest_scores(truth: Truth, paged: set[int], digests: list[dict[str, Any]]) -> dict[str, Any]:
    """The digests' entries against the code breakages of two or more consecutive failing
    commits that no page covered (`paged`: the breaking commits a page covered)."""
    shas = {index: sha for sha, index in truth.sha_index.items()}
    entries = [entry["culprit_sha"] for digest in digests for entry in digest["fixed_before_page"]]
    named = Counter(entries)
    breakers = {b.culprit for b in truth.breaks}
    two_plus = [b for b in truth.breaks if truth.consecutive_failures(b) >= 2]
    unpaged = [b for b in two_plus if b.culprit not in paged]
    last_day = max((digest["day"] for digest in digests), default="")
    missed = []
    for b in unpaged:
        if shas.get(b.culprit) not in named:
            fixes = [r.finish for c in b.columns if (r := truth.result(b.fix, c)) is not None]
            fixed_at = timestamp(min(fixes)) if fixes else None
            missed.append(
                {"culprit": b.culprit, "fix": b.fix, "fix_finished": fixed_at, "last_digest_day": last_day}
            )
    innocent = sum(count for sha, count in named.items() if truth.sha_index.get(sha) not in breakers)
    paged_shas = {shas.get(index) for index in paged}
    return {
        "digests": len(digests),
        "entries": len(entries),
        "breaks_2plus": len(two_plus),
        "breaks_2plus_unpaged": len(unpaged),
        "breaks_2plus_unpaged_in_digest": len(unpaged) - len(missed),
        "recall_unpaged_in_digest": _ratio(len(unpaged) - len(missed), len(unpaged)),
        "unpaged_missed": missed,
        "entries_paged": sum(sha in paged_shas for sha in entries),
        "entries_innocent": innocent,
        "innocent_per_week": round(innocent / (truth.days / 7), 2),
        "entries_repeated": sum(count - 1 for count in named.values()),
    }


def score(
    truth: Truth,
    messages: list[dict[str, Any]],
    polls: Sequence[datetime] | None = None,
    failed_at: Mapping[tuple[int, str], datetime] | None = None,
    digests: list[dict[str, Any]] | None = None,
    builds: Mapping[int, int] | None = None,
) -> dict[str, Any]:
    """The paging figures of a replay's `messages`; `polls`, the replay's snapshot times,
    for the breakages that showed at one; `failed_at` and `builds` as for `Scorer`; with the
    replay's `digests`, their figures too (`digest_scores`)."""
    scorer = Scorer(truth, failed_at, builds)
    found = episodes(messages)
    job_pages = [e.page for e in found if e.page.alertname == JOB_ALERT]
    trunk_pages = [e.page for e in found if e.page.alertname in TRUNK_ALERTS]
    # The jobs each firing trunk message lists with a culprit (it holds their pages back).
    named_lines = [
        (parse_time(row["at"]), line)
        for row in messages
        for line in _trunk_lines(row)
        if line["role"] == "culprit"
    ]
    snapshots = sorted(polls) if polls else []
    kinds: Counter[str] = Counter()
    innocent: list[tuple[str, str]] = []  # the pages not naming the breaking commit: kind, sha
    delays: dict[str, list[float]] = defaultdict(list)
    detected: set[int] = set()
    episodes_paged: set[tuple[str, int]] = set()
    for page in job_pages:
        judged = scorer.judge(page)
        kinds[judged.kind] += 1
        detected |= judged.breakers
        if judged.episode is not None:
            episodes_paged.add(judged.episode)
        if not judged.right:
            innocent.append((judged.label, page.annotations.get("culprit_sha", "")))
        third = judged.third_failure
        if third is None:
            continue
        delays["all"].append((page.at - third).total_seconds())
        if judged.kind == "code":
            delays["code"].append((page.at - third).total_seconds())
            told = [at for at, line in named_lines if line["job"] == page.job and third <= at < page.at]
            delays["first_word"].append((min(told, default=page.at) - third).total_seconds())
            shown = bisect.bisect_left(snapshots, third)
            if shown < len(snapshots):
                delays["snapshot"].append((snapshots[shown] - third).total_seconds())
    # Trunk pages name a culprit per failing job too.
    trunk_named = {
        (line["job"], index)
        for _, line in named_lines
        if (index := truth.short_index.get(line["sha"][:12])) is not None
    }
    trunk_innocent: Counter[str] = Counter()
    trunk_innocent_culprits: set[int] = set()
    detected_with_trunk = set(detected)
    for job, culprit in trunk_named:
        cause, breaker = scorer.named_cause(job, culprit)
        if breaker is not None:
            detected_with_trunk.add(breaker)
        if breaker != culprit:
            trunk_innocent[cause if cause != "code" else "code (wrong commit)"] += 1
            trunk_innocent_culprits.add(culprit)
    long_breaks = [b for b in truth.breaks if b.fix - b.culprit >= 3]
    failures = RuleConfig().failures_to_open
    recalled = sum(b.culprit in detected for b in long_breaks)
    code_pages = kinds["code"]
    breakage_pages = code_pages + kinds["external"] + kinds["infra"]
    return {
        "days": truth.days,
        "commits": truth.commits,
        "messages": len(messages),
        "job_pages": len(job_pages),
        "trunk_pages": len(trunk_pages),
        "pages_per_day": round(len(job_pages) / truth.days, 2),
        "trunk_pages_per_day": round(len(trunk_pages) / truth.days, 2),
        "job_pages_by_kind": dict(sorted(kinds.items())),
        "precision_code": _ratio(code_pages, len(job_pages)),
        "precision_any_breakage": _ratio(breakage_pages, len(job_pages)),
        "breakage_pages_per_breakage": round(breakage_pages / len(episodes_paged), 2)
        if episodes_paged
        else 0.0,
        "jobs_paged_again_within_3h": sum(
            e.page.alertname == JOB_ALERT
            and e.since_resolved is not None
            and e.since_resolved < REPAGE_WITHIN
            for e in found
        ),
        "breaks": len(truth.breaks),
        "breaks_3plus": len(long_breaks),
        "breaks_3plus_paged": recalled,
        "breaks_3plus_ever_at_head": sum(truth.ever_at_head(b, failures) for b in long_breaks),
        "breaks_3plus_at_head_at_a_poll": sum(truth.ever_at_head(b, failures, polls) for b in long_breaks)
        if polls
        else None,
        "recall_breaks_3plus": _ratio(recalled, len(long_breaks)),
        "recall_breaks_3plus_with_trunk_pages": _ratio(
            sum(b.culprit in detected_with_trunk for b in long_breaks), len(long_breaks)
        ),
        "delay_after_third_failure_s_p50": _median(delays["code"]),
        "delay_after_third_failure_s_p50_all_pages": _median(delays["all"]),
        "delay_to_next_snapshot_s_p50": _median(delays["snapshot"]),
        "delay_to_first_word_s_p50": _median(delays["first_word"]),
        "culprit_right": len(job_pages) - len(innocent),
        "culprit_right_of_code_pages": _ratio(len(job_pages) - len(innocent), code_pages),
        "innocent_prs_named": len(innocent),
        "innocent_prs_named_distinct": len({sha for _, sha in innocent}),
        "innocent_prs_named_by_kind": dict(sorted(Counter(label for label, _ in innocent).items())),
        "trunk_pages_job_culprits_named": len(trunk_named),
        "trunk_pages_innocent_prs_named": sum(trunk_innocent.values()),
        "trunk_pages_innocent_prs_named_distinct": len(trunk_innocent_culprits),
        "trunk_pages_innocent_by_kind": dict(sorted(trunk_innocent.items())),
        **({"digest": digest_scores(truth, detected_with_trunk, digests)} if digests is not None else {}),
    }


def snapshot_times(path: Path) -> list[datetime]:
    """The times of a replay file's snapshots (its events' `at`, the header skipped)."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        next(lines, None)
        return [parse_time(found[1]) for line in lines if (found := _AT.search(line[:200]))]


def with_config(
    source: Path,
    target: Path,
    config: dict[str, Any] | None,
    convert: Callable[[Iterable[str]], Iterable[str]] = lambda lines: lines,
) -> None:
    """A copy of the replay `source` whose header's rule `config` is the one given (none:
    today's rule), whatever the header had; its lines passed through `convert`."""
    with gzip.open(source, "rt", encoding="utf-8") as reading:
        header = json.loads(reading.readline() or "null")
        if not isinstance(header, dict) or "repo" not in header:
            raise ValueError(f"{source}: not a replay file (its first line is no header with a repo)")
        lines = itertools.chain([json.dumps({**header, "config": config or {}}) + "\n"], reading)
        with gzip.open(target, "wt", encoding="utf-8", compresslevel=1) as writing:
            writing.writelines(convert(lines))


def buildkite_form(source: Path, target: Path, truth: Truth, config: dict[str, Any] | None) -> dict[int, int]:
    """Write the replay `source` in Buildkite form to `target` (`tests/support/buildkite.py`'s
    converter, as the scenarios' Buildkite tests use), its header's rule `config` the one
    given; returns the commit index of each build number."""
    from tests.support.buildkite import buildkite_replay

    numbers: dict[str, int] = {}
    with_config(
        source,
        target,
        config,
        lambda lines: (f"{line}\n" for line in buildkite_replay(lines, numbers=numbers)),
    )
    return {number: truth.sha_index[sha] for sha, number in numbers.items()}


def pushed_form(history: Timeline, truth: Truth, path: Path) -> dict[tuple[int, str], datetime]:
    """Write the trunk fed by webhook deliveries alone, each job's at its own finish time
    (queued when its commit lands, a retry queued a minute after the failure it retries), the
    schedule ticking every PUSHED_TICKS; returns when each failing cell was first reported (a
    retried failure is known when its first attempt fails, before its final result)."""
    instants = history.instants()
    first, last = instants[0], instants[-1]
    ticks = [first + PUSHED_TICKS * n for n in range(int((last - first) / PUSHED_TICKS) + 1)]
    write(path, history.header(), history.deliveries(ticks=ticks))
    failed = [report for report in history.reports if report.conclusion == "failure"]
    return {(truth.sha_index[r.sha], r.name): r.at for r in reversed(failed)}  # the first report wins


def _scored(
    replayed: Replayed, scorer: Scorer, polls: Sequence[datetime] | None, confirmed: bool
) -> dict[str, Any]:
    """A replay's messages scored; a confirmed run's verdicts too."""
    messages, reruns, replay_s, digests = replayed
    truth, failed_at, builds = scorer.truth, scorer.failed_at, scorer.builds
    result = {"replay_s": round(replay_s, 1), **score(truth, messages, polls, failed_at, digests, builds)}
    if confirmed:
        result["verdicts"] = verdict_scores(scorer, messages, reruns)
    return result


def redtrunk(
    days: float = DAYS, seed: int = SEED, replay_path: Path | None = None, truth_path: Path | None = None
) -> dict[str, Any]:
    """The workload: generate trunk `seed` (or read `replay_path` and its truth file), replay
    it each way (two replays at a time), and score. The figures go under `trunks`, by the
    trunk's name: `seed N`, or the replay file's name without `.jsonl.gz`."""
    started = time.perf_counter()
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="redtrunk-") as tmp:
        if replay_path is None:
            trunk = RedTrunk(seed, days)
            source = Path(tmp) / f"redtrunk-{seed}.jsonl.gz"
            trunk.write(source)
            truth, history = Truth(trunk.truth()), Timeline.of_redtrunk(trunk)
            stats = {k: v for k, v in trunk.stats.items() if k != "cells_by_cause"}
            about: dict[str, Any] = {"seed": seed, "trunk": stats}
            trunk_name = f"seed {seed}"
        else:
            if truth_path is None:
                raise ValueError("a replay file is scored against its truth file: give both")
            source, truth = replay_path, Truth.load(truth_path)
            history = Timeline.of_files(replay_path, truth_path)
            about = {"replay": replay_path.name, "truth": truth_path.name}
            trunk_name = replay_path.name.removesuffix(".gz").removesuffix(".jsonl")
        forms: dict[str, tuple[Path, Scorer, Sequence[datetime] | None, bool]] = {}
        for name, config in (("without_confirmation", None), ("with_confirmation", CONFIRM)):
            path = Path(tmp) / f"{name}.jsonl.gz"
            with_config(source, path, config)
            forms[name] = (path, Scorer(truth), snapshot_times(path), config is not None)
        path = Path(tmp) / "pushed.jsonl.gz"
        forms["pushed"] = (path, Scorer(truth, pushed_form(history, truth, path)), None, False)
        path = Path(tmp) / "buildkite.jsonl.gz"
        builds = buildkite_form(source, path, truth, CONFIRM)
        forms["buildkite"] = (path, Scorer(truth, builds=builds), snapshot_times(path), True)
        # Each replay in a fresh process (clean memory, its own emulation), two at a time: one a core.
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            replayed = pool.map(replay, [str(path) for path, *_ in forms.values()], chunksize=1)
        for (name, (_, scorer, polls, confirmed)), result in zip(forms.items(), replayed, strict=True):
            runs[name] = _scored(result, scorer, polls, confirmed)
    section = {**about, "total_s": round(time.perf_counter() - started, 1), **runs}
    return {"trunks": {trunk_name: section}}
