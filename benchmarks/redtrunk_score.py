"""Workload `redtrunk`: the rule scored against a red trunk's ground truth (issue #27).

`python -m benchmarks redtrunk [--quick] [--seed N]` generates a trunk (`benchmarks.redtrunk`,
seed `SEED`, two weeks; `--quick`: `QUICK_DAYS` days), or takes `--replay PATH.jsonl.gz
--truth PATH.truth.json.gz` made elsewhere (scored from its truth file alone, `Truth`, its
header's rule config replaced by each run's), and replays it in a fresh process each way:
`without_confirmation` (today's rule), `with_confirmation` (`"confirm": "rerun"`, reruns
answered by the GitHub stand-in from the cells' `rerun` data), `pushed` (webhook deliveries
alone, each job's result at its own finish time, `tests/support/timeline.py`, the schedule
ticking every PUSHED_TICKS, on the in-memory store; its delay runs from the third failure's
first report, so it has no poll interval) and `buildkite` (the trunk in Buildkite form,
`buildkite_form`: tests/support/buildkite.py's converter, confirmed by job retries the
Buildkite stand-in answers). The two weeks cost about 5 minutes of CPU; `--quick` a minute.

A page is the first firing message of an alert's episode. A `TrunkJobFailing` page's cells
are the failing runs it lists (their URLs name the commit), its kind the cause of its newest
failing cell: `code`, `external` (a dependency), `infra` (a runner outage) or `flaky`.
Figures (`score`): `pages_per_day` (job and trunk pages); `precision_code` and
`precision_any_breakage` (job pages whose job was broken by code, or by anything, then);
`recall_breaks_3plus` (breakages of 3+ commits with a job page on their cells);
`delay_after_third_failure_s_p50` (the third failing result of the page's run to the page)
and, with `polls`, `delay_to_next_snapshot_s_p50` (from it to the first snapshot that could
show it: the part of the delay the replay's cadence sets, which no rule paging on the third
failure can avoid); `delay_to_first_word_s_p50` (from it to the first message naming the job:
its page, or a firing trunk alert's message listing it while it holds the job's page back);
`culprit_right` (code pages naming the breaking commit) and `innocent_prs_named` (pages
naming a commit that broke nothing); `breakage_pages_per_breakage`;
`jobs_paged_again_within_3h` (of the same job's resolution).

The confirmed runs add `verdicts` (`verdict_scores`, read from each job episode's
`culprit_verdict` as its messages bring it): the last verdict and the one 3 hours after the
page, by episode kind; the shares of environmental (dependency and outage) episodes told so,
and of code episodes confirmed on the breaking commit, at 3 hours; the episodes confirming
an innocent commit, or naming one only as an unconfirmed suspect; the reruns per episode.

Every run also scores its daily digests (`digest_scores`, design.md §4.4) against the code
breakages failing 2+ consecutive commits of a job (`Truth.consecutive_failures`): those no
page covered, and of them those a digest's `fixed_before_page` names (the others listed with
their fix's finish and the last digest's day); entries a page covered, entries naming an
innocent commit (and per week), culprits named again in a later digest.
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import json
import multiprocessing
import re
import shutil
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.redtrunk import DAYS, RedTrunk
from tests.support.timeline import Timeline, write
from trunkwatch.domain.cells import job_key
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


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def replay(
    path: str, store: str = "memory"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float, list[dict[str, Any]]]:
    """The messages a replay publishes (at, status, reason, labels, annotations), the reruns
    the GitHub stand-in accepted, or the job retries the Buildkite one did (at, sha, job), its
    wall time, and the daily digests it published (their JSON bodies, with `at`)."""
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.runtime import LocalRuntime
    from trunkwatch_local.session import Session, replay_into

    started = time.perf_counter()
    rows = []
    digests = []
    parsed = read_replay(path)
    with Session(LocalRuntime(store=store)) as session:
        session.start(session.replaying_from(parsed))
        for message in replay_into(session, parsed):
            row = message.as_json()
            if message.is_digest:
                digests.append({**row["message"], "at": row["at"]})
                continue
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
        reruns = [
            {"at": rerun.at.strftime("%Y-%m-%dT%H:%M:%SZ"), "sha": rerun.sha, "job": rerun.job}
            for rerun in session.github.accepted
        ] + [
            {"at": retry.at.strftime("%Y-%m-%dT%H:%M:%SZ"), "sha": retry.sha, "job": retry.name}
            for retries in session.buildkite.retries.values()
            for retry in retries
        ]
    return rows, reruns, time.perf_counter() - started, digests


def _replayed(path: Path, store: str = "memory") -> Any:
    """`replay(path, store)` in a fresh process (clean memory, a run's own emulation)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(replay, (str(path), store))


def paged_again(messages: list[dict[str, Any]], within: timedelta = REPAGE_WITHIN) -> int:
    """Job pages that came less than `within` after the same job's alert resolved."""
    resolved: dict[str | None, datetime] = {}
    found = 0
    for page_or_resolution in _job_episodes(messages):
        at, job, status = page_or_resolution
        if status == "resolved":
            resolved[job] = at
        elif job in resolved and at - resolved[job] < within:
            found += 1
    return found


def _job_episodes(messages: list[dict[str, Any]]) -> list[tuple[datetime, str | None, str]]:
    """Each job alert's pages and resolutions, in order."""
    firing: set[str | None] = set()
    found = []
    for row in messages:
        if row["labels"]["alertname"] != JOB_ALERT:
            continue
        job = row["labels"].get("job")
        if row["status"] == "resolved":
            firing.discard(job)
            found.append((_parse(row["at"]), job, "resolved"))
        elif job not in firing:
            firing.add(job)
            found.append((_parse(row["at"]), job, "firing"))
    return found


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


@dataclass(frozen=True)
class Outcome:
    """A cell's result in the truth: its cause and when its final result finished."""

    cause: str  # pass, flaky, flaky-retried, code:<k>, external, infra
    finish: datetime

    @property
    def conclusion(self) -> str:
        return "success" if self.cause in ("pass", "flaky-retried") else "failure"


@dataclass(frozen=True)
class Breakage:
    culprit: int  # the breaking commit's index
    fix: int  # the first commit that no longer fails
    columns: tuple[str, ...] = ()  # the job columns it breaks


class Truth:
    """A trunk's ground truth as its truth file has it (`RedTrunk.truth()`, and the shared
    format of benchmarks/redtrunk.py's docstring): per commit (by sha, with its index) and
    job column the cause of its result and when it finished; the breakages; the days."""

    def __init__(self, data: dict[str, Any]) -> None:
        missing = [key for key in ("days", "breaks", "cells") if key not in data]
        if missing:
            raise ValueError(f"not a redtrunk truth file: no {', '.join(missing)}")
        self.days: float = data["days"]
        self.sha_index: dict[str, int] = {}
        self.results: dict[int, dict[str, Outcome]] = {}
        for sha, commit in data["cells"].items():
            self.sha_index[sha] = commit["idx"]
            self.results[commit["idx"]] = {
                name: Outcome(cause, _parse(finish)) for name, (cause, finish) in commit["causes"].items()
            }
        self.short_index = {sha[:12]: index for sha, index in self.sha_index.items()}
        self.breaks = [Breakage(b["culprit"], b["fix"], tuple(b.get("jobs", ()))) for b in data["breaks"]]
        # Dependency breakages and runner outages: (kind, start, end, job columns).
        self.windows = [
            (w["kind"], _parse(w["start"]), _parse(w["end"]), frozenset(w["jobs"]))
            for w in [*data.get("externals", ()), *data.get("outages", ())]
        ]
        names = dict.fromkeys(name for causes in self.results.values() for name in causes)
        self.key_columns: dict[str, list[str]] = defaultdict(list)
        for name in names:
            self.key_columns[job_key(name)].append(name)

    def consecutive_failures(self, breakage: Breakage) -> int:
        """The most commits in a row one of the breakage's jobs failed by it: the commits the
        job ran on (a sharded job failing when a shard does), none between passing or failing
        otherwise."""
        most = 0
        for job in dict.fromkeys(job_key(column) for column in breakage.columns):
            columns, run = self.key_columns.get(job, []), 0
            for commit in range(breakage.culprit, breakage.fix):
                found = [r for c in columns if (r := self.result(commit, c)) is not None]
                if not found:
                    continue  # the job did not run there: the next commit it ran on is next
                if any(r.cause == f"code:{breakage.culprit}" for r in found):
                    run += 1
                    most = max(most, run)
                else:
                    run = 0
        return most

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

    def ever_at_head(
        self, breakage: Breakage, failures: int, polls: Sequence[datetime] | None = None
    ) -> bool:
        """Whether, at some instant (at one of `polls`, when given), a job the breakage broke
        showed `failures` failing commits in a row at its newest end (its commits without a
        finished result skipped, a failing shard failing the commit), one of them broken by
        it: what a rule of `failures` in a row needs to page it. Without `polls`, at any poll
        cadence: a breakage whose fix's pass finished before its own failures did may never
        show them."""
        for job in dict.fromkeys(job_key(column) for column in breakage.columns):
            columns = self.key_columns.get(job, [])
            cells = {
                commit: found
                for commit in range(max(0, breakage.culprit - failures), max(self.results, default=0) + 1)
                if (found := [r for c in columns if (r := self.result(commit, c)) is not None])
            }
            # The run at the head only grows when a failure finishes: look at those instants.
            instants = sorted(
                r.finish for found in cells.values() for r in found if r.conclusion == "failure"
            )
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


_BUILD_URL = re.compile(r"/builds/(\d+)(?:[#/?]|$)")


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
        self.failed_at = failed_at or {}
        self.truth = truth
        self.sha_index = truth.sha_index
        self.builds = builds or {}

    def index(self, sha: str) -> int | None:
        """The commit a full or 12-character sha names."""
        return self.sha_index.get(sha, self.truth.short_index.get(sha[:12]))

    def run_commit(self, url: str) -> int:
        """The commit index a failing run's URL names: the generator's name it
        (`.../actions/runs/<commit index>/job/...`, kept in Buildkite form), a job retried on
        Buildkite has its build's (`.../builds/<number>#<job id>`)."""
        found = _BUILD_URL.search(url)
        if found and "/actions/runs/" not in url:
            return self.builds[int(found[1])]
        return int(url.rstrip("/").split("/")[-3])

    def commits(self, page: Page) -> list[int]:
        """The commit indices of the page's failing runs, newest first."""
        return list(dict.fromkeys(self.run_commit(url) for url in page.runs))

    def cells(self, page: Page) -> list[tuple[int, str]]:
        """(commit index, column) of the page's failing runs, newest first. A run's URL names
        its commit only: each is one of the failing columns of the page's job on that commit,
        the earliest to finish first (a sharded job's commit fails with its first shard)."""
        runs = Counter(self.run_commit(url) for url in page.runs)
        found = []
        for commit in self.commits(page):
            failing = sorted(
                (result.finish, column)
                for column in self.truth.key_columns.get(page.job or "", [])
                if (result := self.truth.result(commit, column)) is not None
                and result.conclusion == "failure"
            )
            found.extend((commit, column) for _, column in failing[: runs[commit]])
        return found

    def kind(self, page: Page) -> tuple[str, int | None]:
        """The page's kind and, for `code`, the breaking commit's index."""
        cells = self.cells(page)
        if not cells:
            return "unknown", None
        result = self.truth.result(*cells[0])
        cause = result.cause if result else "absent"
        if cause.startswith("code:"):
            return "code", int(cause.split(":")[1])
        return cause, None

    def episode(self, page: Page) -> tuple[str, int] | None:
        """The breakage a job page is about: a code breakage by its breaking commit, a
        dependency breakage or outage by its place in the truth's list; None for a flaky one."""
        cells = self.cells(page)
        kind, breaker = self.kind(page)
        if breaker is not None:
            return kind, breaker
        if not cells or kind not in ("external", "infra"):
            return None
        result = self.truth.result(*cells[0])
        assert result is not None
        for index, (window_kind, start, end, jobs) in enumerate(self.truth.windows):
            if window_kind == kind and cells[0][1] in jobs and start <= result.finish <= end + RESULT_LAG:
                return kind, index
        return kind, -1

    def third_failure_at(self, page: Page) -> datetime | None:
        finishes = sorted(
            self.failed_at.get(cell, r.finish)
            for cell in self.cells(page)
            if (r := self.truth.result(*cell)) is not None
        )
        return finishes[2] if len(finishes) >= 3 else None


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 3) if whole else 0.0


_TRUNK_LINE = re.compile(r"^- (?P<job>.+): \d+ commits?, culprit (?P<sha>[0-9a-f]{7,40}) ", re.MULTILINE)


def trunk_mentions(messages: list[dict[str, Any]]) -> list[tuple[datetime, set[str]]]:
    """(time, jobs listed) of each firing trunk message (`TrunkBroken`, `TrunkBadlyBroken`:
    first pages, updates and reminders), from their descriptions."""
    return [
        (
            _parse(row["at"]),
            {found["job"] for found in _TRUNK_LINE.finditer(row["annotations"].get("description", ""))},
        )
        for row in messages
        if row["labels"]["alertname"] in TRUNK_ALERTS and row["status"] == "firing"
    ]


def first_word(page: Page, third: datetime, mentions: list[tuple[datetime, set[str]]]) -> datetime:
    """When a person first heard of the page's job after its third failure: the page, or an
    earlier firing trunk message listing the job (`TrunkBadlyBroken` holds job pages back,
    design.md §3.3, and tells of each job that starts failing in an update)."""
    told = [at for at, jobs in mentions if third <= at < page.at and page.job in jobs]
    return min(told, default=page.at)


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
        for c in scorer.truth.key_columns.get(job, [])
        if (r := scorer.truth.result(culprit, c)) is not None and r.conclusion == "failure"
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


@dataclass
class Episode:
    """A job alert's episode in the messages: its page and each message's verdict."""

    page: Page
    end: datetime | None = None  # resolved at
    verdicts: list[tuple[datetime, str, str]] = dataclass_field(default_factory=list)  # at, verdict, sha


_VERDICT_LINE = re.compile(
    r"^- (?P<job>.+): \d+ commits?, (?:culprit|suspect) (?P<sha>[0-9a-f]{7,40}) .*"
    r"\((?P<verdict>confirmed|environmental|flaky|unconfirmed)\)$",
    re.MULTILINE,
)


def episodes(messages: list[dict[str, Any]]) -> list[Episode]:
    """The job alerts' episodes, each with the verdicts its messages carried (at, verdict,
    the commit named: culprit or suspect), its own or a trunk-level alert's."""
    found: list[Episode] = []
    current: dict[str, Episode] = {}
    for row in messages:
        labels, notes = row["labels"], row["annotations"]
        if labels["alertname"] in TRUNK_ALERTS and row["status"] == "firing":
            # While a trunk-level alert inhibits them, the jobs' verdicts come with it.
            for line in _VERDICT_LINE.finditer(notes.get("description", "")):
                if line["job"] in current:
                    current[line["job"]].verdicts.append((_parse(row["at"]), line["verdict"], line["sha"]))
        if labels["alertname"] != JOB_ALERT:
            continue
        job, at = labels["job"], _parse(row["at"])
        episode = current.get(job)
        if row["status"] == "resolved":
            if episode is not None:
                episode.end = at
                del current[job]
            continue
        if episode is None:
            episode = current[job] = Episode(Page(at, JOB_ALERT, job, notes))
            found.append(episode)
        verdict = notes.get("culprit_verdict")
        if verdict:
            episode.verdicts.append((at, verdict, notes.get("culprit_sha") or notes.get("suspect_sha", "")))
    return found


def _share(counts: Counter[str], wanted: str) -> float:
    return _ratio(counts[wanted], sum(counts.values()))


def verdict_scores(
    scorer: Scorer, messages: list[dict[str, Any]], reruns: list[dict[str, Any]]
) -> dict[str, Any]:
    """The verdicts the confirmed run's job episodes ended with, and 3 hours after their page."""
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    at_3h: dict[str, Counter[str]] = defaultdict(Counter)
    innocent_confirmed: list[str] = []
    innocent_unconfirmed = 0
    per_episode: list[int] = []
    found = episodes(messages)
    for episode in found:
        kind, right = _episode(scorer, episode.page)
        breaker = scorer.kind(episode.page)[1]
        final = episode.verdicts[-1][1] if episode.verdicts else CulpritVerdict.UNCONFIRMED.value
        by_kind[kind][final] += 1
        due = episode.page.at + VERDICT_AFTER
        if episode.end is None or episode.end > due:
            then = [v for at, v, _ in episode.verdicts if at <= due]
            verdict = then[-1] if then else CulpritVerdict.UNCONFIRMED.value
            confirmed_right = verdict == CulpritVerdict.CONFIRMED and any(
                v == CulpritVerdict.CONFIRMED and scorer.index(sha) == breaker
                for at, v, sha in episode.verdicts
                if at <= due
            )
            at_3h[kind]["confirmed (right commit)" if confirmed_right else verdict] += 1
        wrong = [
            sha
            for _, v, sha in episode.verdicts
            if v == CulpritVerdict.CONFIRMED and (breaker is None or scorer.index(sha) != breaker)
        ]
        if wrong:
            innocent_confirmed.append(wrong[0])
        elif not right:
            innocent_unconfirmed += 1
        end = episode.end or datetime.max.replace(tzinfo=episode.page.at.tzinfo)
        per_episode.append(
            sum(
                1
                for rerun in reruns
                if job_key(rerun["job"]) == episode.page.job and episode.page.at <= _parse(rerun["at"]) <= end
            )
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
    entries = [(digest["day"], entry) for digest in digests for entry in digest["fixed_before_page"]]
    named = Counter(entry["culprit_sha"] for _, entry in entries)
    breakers = {b.culprit for b in truth.breaks}
    two_plus = [b for b in truth.breaks if truth.consecutive_failures(b) >= 2]
    unpaged = [b for b in two_plus if b.culprit not in paged]
    told = [b for b in unpaged if shas.get(b.culprit) in named]
    last_day = max((digest["day"] for digest in digests), default="")
    missed = []
    for b in unpaged:
        if shas.get(b.culprit) in named:
            continue
        fixes = [r.finish for c in b.columns if (r := truth.result(b.fix, c)) is not None]
        fixed_at = min(fixes).strftime("%Y-%m-%dT%H:%M:%SZ") if fixes else None
        missed.append(
            {"culprit": b.culprit, "fix": b.fix, "fix_finished": fixed_at, "last_digest_day": last_day}
        )
    innocent = [sha for sha in named if truth.sha_index.get(sha) not in breakers]
    paged_shas = {shas.get(index) for index in paged}
    entries_paged = [entry for _, entry in entries if entry["culprit_sha"] in paged_shas]
    return {
        "digests": len(digests),
        "entries": len(entries),
        "breaks_2plus": len(two_plus),
        "breaks_2plus_unpaged": len(unpaged),
        "breaks_2plus_unpaged_in_digest": len(told),
        "recall_unpaged_in_digest": _ratio(len(told), len(unpaged)),
        "unpaged_missed": missed,
        "entries_paged": len(entries_paged),
        "entries_innocent": sum(named[sha] for sha in innocent),
        "innocent_per_week": round(sum(named[sha] for sha in innocent) / (truth.days / 7), 2),
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
    found = pages(messages)
    job_pages = [p for p in found if p.alertname == JOB_ALERT]
    trunk_pages = [p for p in found if p.alertname in TRUNK_ALERTS]
    kinds: Counter[str] = Counter()
    right = 0
    innocent_shas: list[str] = []
    innocent_by_kind: Counter[str] = Counter()
    delays_code: list[float] = []
    delays_all: list[float] = []
    floors_code: list[float] = []
    heard_code: list[float] = []
    mentions = trunk_mentions(messages)
    snapshots = sorted(polls) if polls else []
    detected: set[int] = set()
    for page in job_pages:
        kind, _ = scorer.kind(page)
        kinds[kind] += 1
        for commit, column in scorer.cells(page):
            result = truth.result(commit, column)
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
                heard_code.append((first_word(page, third, mentions) - third).total_seconds())
                shown = bisect.bisect_left(snapshots, third)
                if shown < len(snapshots):
                    floors_code.append((snapshots[shown] - third).total_seconds())
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
    long_breaks = [b for b in truth.breaks if b.fix - b.culprit >= 3]
    failures = RuleConfig().failures_to_open
    ever_at_head = sum(truth.ever_at_head(b, failures) for b in long_breaks)
    at_a_poll = sum(truth.ever_at_head(b, failures, polls) for b in long_breaks) if polls else None
    recalled = sum(b.culprit in detected for b in long_breaks)
    episodes_paged = {episode for page in job_pages if (episode := scorer.episode(page)) is not None}
    recalled_with_trunk = sum(b.culprit in detected_with_trunk for b in long_breaks)
    days = truth.days
    code_pages = kinds["code"]
    breakage_pages = code_pages + kinds["external"] + kinds["infra"]
    return {
        "days": days,
        "commits": truth.commits,
        "messages": len(messages),
        "job_pages": len(job_pages),
        "trunk_pages": len(trunk_pages),
        "pages_per_day": round(len(job_pages) / days, 2),
        "trunk_pages_per_day": round(len(trunk_pages) / days, 2),
        "job_pages_by_kind": dict(sorted(kinds.items())),
        "precision_code": _ratio(code_pages, len(job_pages)),
        "precision_any_breakage": _ratio(breakage_pages, len(job_pages)),
        "breakage_pages_per_breakage": round(breakage_pages / len(episodes_paged), 2)
        if episodes_paged
        else 0.0,
        "jobs_paged_again_within_3h": paged_again(messages),
        "breaks": len(truth.breaks),
        "breaks_3plus": len(long_breaks),
        "breaks_3plus_paged": recalled,
        "breaks_3plus_ever_at_head": ever_at_head,
        "breaks_3plus_at_head_at_a_poll": at_a_poll,
        "recall_breaks_3plus": _ratio(recalled, len(long_breaks)),
        "recall_breaks_3plus_with_trunk_pages": _ratio(recalled_with_trunk, len(long_breaks)),
        "delay_after_third_failure_s_p50": statistics.median(delays_code) if delays_code else None,
        "delay_after_third_failure_s_p50_all_pages": statistics.median(delays_all) if delays_all else None,
        "delay_to_next_snapshot_s_p50": statistics.median(floors_code) if floors_code else None,
        "delay_to_first_word_s_p50": statistics.median(heard_code) if heard_code else None,
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
        **({"digest": digest_scores(truth, detected_with_trunk, digests)} if digests is not None else {}),
    }


def pushed(history: Timeline, truth: Truth, path: Path) -> dict[str, Any]:
    """The trunk fed by webhook deliveries alone, each job's at its own finish time (queued
    when its commit lands, a retry queued a minute after the failure it retries), the
    schedule ticking every PUSHED_TICKS; replayed on the in-memory store, scored."""
    instants = history.instants()
    ticks, at = [], instants[0]
    while at <= instants[-1]:
        ticks.append(at)
        at += PUSHED_TICKS
    write(path, history.header(), history.deliveries(ticks=ticks))
    messages, _, replay_s, digests = _replayed(path)
    # A retried failure is known when its first attempt fails, before its final result.
    failed_at: dict[tuple[int, str], datetime] = {}
    for report in history.reports:
        cell = (truth.sha_index[report.sha], report.name)
        if report.conclusion == "failure" and cell not in failed_at:
            failed_at[cell] = report.at
    return {"replay_s": round(replay_s, 1), **score(truth, messages, failed_at=failed_at, digests=digests)}


def buildkite(source: Path, truth: Truth, path: Path) -> dict[str, Any]:
    """The trunk in Buildkite form (`buildkite_form`) with confirmation, its culprits
    confirmed by job retries the Buildkite stand-in answers from the cells' `rerun` data;
    replayed as the HUD form is, scored the same way."""
    builds = buildkite_form(source, path, truth, CONFIRM)
    messages, reruns, replay_s, digests = _replayed(path)
    result = {
        "replay_s": round(replay_s, 1),
        **score(truth, messages, snapshot_times(path), digests=digests, builds=builds),
    }
    result["verdicts"] = verdict_scores(Scorer(truth, builds=builds), messages, reruns)
    return result


def snapshot_times(path: Path) -> list[datetime]:
    """The times of a replay file's snapshots (its events' `at`, the header skipped)."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        next(lines, None)
        return [_parse(found[1]) for line in lines if (found := _AT.search(line[:200]))]


_AT = re.compile(r'"at":\s*"([^"]+)"')


def with_config(source: Path, target: Path, config: dict[str, Any] | None) -> None:
    """A copy of the replay `source` whose header's rule `config` is the one given (none:
    today's rule), whatever the header had."""
    with gzip.open(source, "rt", encoding="utf-8") as reading:
        header = _header(source, reading.readline(), config)
        with gzip.open(target, "wt", encoding="utf-8") as writing:
            writing.write(header + "\n")
            shutil.copyfileobj(reading, writing)


def _header(source: Path, line: str, config: dict[str, Any] | None) -> str:
    """The replay file's header `line` with the rule `config` given (none: today's rule)."""
    header = json.loads(line or "null")
    if not isinstance(header, dict) or "repo" not in header:
        raise ValueError(f"{source}: not a replay file (its first line is no header with a repo)")
    return json.dumps({**header, "config": config or {}})


def buildkite_form(source: Path, target: Path, truth: Truth, config: dict[str, Any] | None) -> dict[int, int]:
    """Write the replay `source` in Buildkite form to `target` (`tests/support/buildkite.py`'s
    converter, as the scenarios' Buildkite tests use: one build per commit, each HUD cell a
    job of its name, a retried cell a failed job retried into its final result, each cell's
    `rerun` its job's), its header's rule `config` the one given; returns the commit index of
    each build number."""
    from tests.support.buildkite import buildkite_replay

    with gzip.open(source, "rt", encoding="utf-8") as reading:
        lines = itertools.chain([_header(source, reading.readline(), config)], reading)
        numbers: dict[str, int] = {}
        with gzip.open(target, "wt", encoding="utf-8", compresslevel=1) as writing:
            for line in buildkite_replay(lines, numbers=numbers):
                writing.write(line + "\n")
    return {number: truth.sha_index[sha] for sha, number in numbers.items()}


def trunk_name(seed: int, replay_path: Path | None) -> str:
    """The trunk's name in the summary: `seed N`, or the replay file's name without `.jsonl.gz`."""
    if replay_path is None:
        return f"seed {seed}"
    return replay_path.name.removesuffix(".gz").removesuffix(".jsonl")


def redtrunk(
    days: float = DAYS, seed: int = SEED, replay_path: Path | None = None, truth_path: Path | None = None
) -> dict[str, Any]:
    """The workload: generate trunk `seed` (or read `replay_path` and its truth file), replay
    it without and with confirmation (each in a fresh process, one after the other), fed by
    webhooks alone, each job delivered at its own finish time (`pushed`), and in Buildkite
    form with confirmation (`buildkite`); score. The figures go under `trunks`, by the
    trunk's name."""
    started = time.perf_counter()
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="redtrunk-") as tmp:
        if replay_path is None:
            trunk = RedTrunk(seed, days)
            source = Path(tmp) / f"redtrunk-{seed}.jsonl.gz"
            trunk.write(source)
            truth = Truth(trunk.truth())
            history = Timeline.of_redtrunk(trunk)
            about: dict[str, Any] = {
                "seed": seed,
                "trunk": {k: v for k, v in trunk.stats.items() if k != "cells_by_cause"},
            }
        else:
            if truth_path is None:
                raise ValueError("a replay file is scored against its truth file: give both")
            source, truth = replay_path, Truth.load(truth_path)
            history = Timeline.of_files(replay_path, truth_path)
            about = {"replay": replay_path.name, "truth": truth_path.name}
        for name, config in (("without_confirmation", None), ("with_confirmation", CONFIRM)):
            path = Path(tmp) / f"{name}.jsonl.gz"
            with_config(source, path, config)
            messages, reruns, replay_s, digests = _replayed(path)
            result = {
                "replay_s": round(replay_s, 1),
                **score(truth, messages, snapshot_times(path), digests=digests),
            }
            if config is not None:
                result["verdicts"] = verdict_scores(Scorer(truth), messages, reruns)
            runs[name] = result
        runs["pushed"] = pushed(history, truth, Path(tmp) / "pushed.jsonl.gz")
        runs["buildkite"] = buildkite(source, truth, Path(tmp) / "buildkite.jsonl.gz")
    section = {**about, "total_s": round(time.perf_counter() - started, 1), **runs}
    return {"trunks": {trunk_name(seed, replay_path): section}}
