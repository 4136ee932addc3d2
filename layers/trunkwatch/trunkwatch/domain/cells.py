"""Job cells (design.md §3.1): one (trunk, job key, commit) and its merged state.

Sources report raw job runs (one per shard and attempt); this module turns them into the
four-valued cell the rule reads. Pure functions only.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class CellState(StrEnum):
    PASS = "pass"  # noqa: S105 - a state name, not a secret
    FAIL = "fail"
    FLAKY = "flaky"
    NODATA = "nodata"
    # Pending counts as nodata for the rule but is kept apart: a pending job is not stale.
    PENDING = "pending"

    @property
    def code(self) -> str:
        """One character, for compact per-commit state strings."""
        return _CODES[self]

    @classmethod
    def of_code(cls, code: str) -> CellState:
        return next(state for state, known in _CODES.items() if known == code)


_CODES = {
    CellState.PASS: "P",
    CellState.FAIL: "F",
    CellState.FLAKY: "f",
    CellState.NODATA: "n",
    CellState.PENDING: ".",
}
ABSENT_CODE = "-"  # the job has no cell on that commit

_FAIL = {"failure", "timed_out", "startup_failure"}
_NODATA = {"skipped", "neutral", "action_required", "stale"}
_PENDING = {"queued", "pending", "in_progress", "waiting", "requested", ""}

# `, <shard>, <shards>` inside the parentheses of a job name.
_SHARD = re.compile(r"(\([^()]*?), \d+, \d+(?=(?:, [^()]*)?\))")

# A runner label's fleet prefix inside the parentheses: `lf.` (Linux Foundation fleet), then
# `ephemeral.`, in front of a `linux`/`windows` label (the HUD's "merge LF/ephemeral" view).
_FLEET = re.compile(r"([(,] ?)(?:lf\.)?(?:ephemeral\.)?(?=(?:linux|windows)\.)")

# A failure the CI's agent caused, not the job's code (Buildkite: a failure with a
# `signal_reason`, or a job that expired before an agent took it): its cell fails with a
# line `agent failure: <reason>`, which tells the verdict the failure is environmental.
AGENT_FAILURE = "agent failure: "

MAX_FAILURE_LINES = 3
MAX_FAILURE_LINE_CHARS = 200
LINE_ID_CHARS = 16


def line_ids(lines: Iterable[str]) -> frozenset[str]:
    """Short ids of failure lines (each one's hash): whether two failures share a line, told
    where the lines themselves would not fit (a job episode's item stays under 1 KB)."""
    return frozenset(hashlib.sha256(line.encode()).hexdigest()[:LINE_ID_CHARS] for line in lines)


@functools.lru_cache(maxsize=65536)  # a trunk's few thousand names, on every commit of a page
def job_key(job_name: str) -> str:
    """`test (default, 2, 5, linux.2xlarge)` -> `test (default, linux.2xlarge)`.

    Two normalisations, both inside the parentheses only:
    - the shard numbers `, <shard>, <shards>` are removed;
    - a runner label's fleet prefix is removed, so one job run on PyTorch's runner fleets is
      one key: `lf.linux.2xlarge`, `lf.ephemeral.linux.2xlarge` and `ephemeral.linux.2xlarge`
      all become `linux.2xlarge` (likewise `windows.*`). This is what the PyTorch HUD's
      "merge LF / ephemeral" view does to its columns; labels that name a different machine
      (`linux.2xlarge.memory`, `windows.4xlarge.nonephemeral`) stay apart.
    """
    return _FLEET.sub(r"\1", _SHARD.sub(r"\1", job_name))


def configuration_free(key: str) -> str | None:
    """`pull / linux-jammy / test (crossref, linux.2xlarge)` -> `pull / linux-jammy / test`:
    a job key without the configuration it ends with in parentheses; None for a key without
    one."""
    return key.rpartition(" (")[0] if key.endswith(")") and " (" in key else None


def agent_failure(lines: Iterable[str]) -> str | None:
    """The reason of an agent failure among a cell's failure lines (`AGENT_FAILURE`), if any."""
    return next((line.removeprefix(AGENT_FAILURE) for line in lines if line.startswith(AGENT_FAILURE)), None)


def workflow_of(key: str) -> str:
    return key.split(" / ", 1)[0]


# The job of a GitHub workflow run itself: it fails when the run ended without starting any
# job (`startup_failure`), and passes once the run started one.
WORKFLOW_JOB = "(workflow)"


def name_from_path(path: str) -> str:
    """`.github/workflows/trunk.yml` -> `trunk` (the last resort for a nameless run)."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return (base.rsplit(".", 1)[0] if "." in base else base) or path or "(unnamed workflow)"


@dataclass(frozen=True)
class Commit:
    sha: str
    time: datetime
    title: str = ""
    author: str = ""
    pr: int | None = None
    url: str = ""
    # What reverted this commit automatically, when the source says so (the HUD's
    # `isAutoreverted` row flag: "autorevert", plus the signals it acted on); None otherwise.
    autoreverted_by: str | None = None


@dataclass(frozen=True)
class StoredCell:
    """A job's cell on one commit, as the evaluator reads it back (here, not in
    `rule`, so that storage, which makes them, does not load the rule)."""

    seq: int
    state: CellState
    commit: Commit
    url: str = ""
    failure_lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobRun:
    """One shard of one job on one commit, as a source reports it (latest attempt)."""

    name: str
    conclusion: str | None
    url: str = ""
    attempt: int = 1
    # True when an earlier attempt of this shard failed (a retry that went green is flaky).
    failed_before: bool = False
    failure_lines: tuple[str, ...] = ()
    # The source's id of this attempt of the job (GitHub's, the HUD's `id`: a number;
    # Buildkite's: a UUID): what a rerun request names, and, once it changes, the sign that a
    # newer attempt replaced it.
    job_id: int | str | None = None
    # Buildkite's number of the build the attempt ran in: its retry's URL names it.
    build: int | None = None


@dataclass(frozen=True)
class Cell:
    job: str
    sha: str
    state: CellState
    url: str = ""
    attempt: int = 1
    failure_lines: tuple[str, ...] = field(default=())


def shard_state(run: JobRun, cancelled: str = "nodata") -> CellState:
    conclusion = (run.conclusion or "").lower()
    if conclusion == "success":
        return CellState.FLAKY if run.failed_before else CellState.PASS
    if conclusion in _FAIL or (conclusion == "cancelled" and cancelled == "fail"):
        return CellState.FAIL
    if conclusion in _PENDING:
        return CellState.PENDING
    if conclusion == "cancelled" or conclusion in _NODATA:
        return CellState.NODATA
    # An unknown conclusion must not raise an alarm: it counts as no data.
    return CellState.NODATA


def merge_shards(states: Iterable[CellState]) -> CellState:
    """Any fail wins (even while other shards run); then pending; then pass/flaky."""
    seen = set(states)
    if CellState.FAIL in seen:
        return CellState.FAIL
    if CellState.PENDING in seen:
        return CellState.PENDING
    if CellState.FLAKY in seen:
        return CellState.FLAKY
    if CellState.PASS in seen:
        return CellState.PASS
    return CellState.NODATA


def replaces(old_code: str, new: CellState) -> bool:
    """Whether a pushed result changes a stored cell: never to the same state, and never
    back to pending once the job has a result."""
    if old_code == new.code:
        return False
    return new != CellState.PENDING or old_code in (ABSENT_CODE, CellState.PENDING.code)


def merge_codes(stored: str, cells: Mapping[int, CellState], complete: bool = False) -> str:
    """A commit's state string once a writer's cells (by column) are merged onto `stored`:
    each cell's code where it `replaces` the stored one. A complete report (every job of the
    commit) makes a job stored but missing from it no data."""
    width = max([len(stored), *(column + 1 for column in cells)])
    old = stored.ljust(width, ABSENT_CODE)
    codes = [ABSENT_CODE if complete else code for code in old]
    for column, state in cells.items():
        codes[column] = state.code if replaces(old[column], state) else old[column]
    if complete:
        for column, was in enumerate(old):
            if was != ABSENT_CODE and codes[column] == ABSENT_CODE:
                codes[column] = CellState.NODATA.code
    return "".join(codes).rstrip(ABSENT_CODE)


def changed_columns(old: str, new: str) -> list[int]:
    """The columns whose code differs between two state strings (absent past one's end)."""
    width = max(len(old), len(new))
    pairs = zip(old.ljust(width, ABSENT_CODE), new.ljust(width, ABSENT_CODE), strict=True)
    return [column for column, (a, b) in enumerate(pairs) if a != b]


def build_cells(sha: str, runs: Iterable[JobRun], cancelled: str = "nodata") -> dict[str, Cell]:
    """Group one commit's runs by job key and merge their shards into cells."""
    by_key: dict[str, list[tuple[JobRun, CellState]]] = defaultdict(list)
    for run in runs:
        by_key[job_key(run.name)].append((run, shard_state(run, cancelled)))
    cells = {}
    for key, shards in by_key.items():
        state = merge_shards(s for _, s in shards)
        # Point at the shard that decided the state (first failing one for a fail).
        decisive = next((r for r, s in shards if s == state), shards[0][0])
        lines = [line for r, s in shards if s == CellState.FAIL for line in r.failure_lines]
        cells[key] = Cell(
            job=key,
            sha=sha,
            state=state,
            url=decisive.url,
            attempt=max(r.attempt for r, _ in shards),
            failure_lines=tuple(line[:MAX_FAILURE_LINE_CHARS] for line in lines[:MAX_FAILURE_LINES]),
        )
    return cells


@dataclass(frozen=True)
class CellWrite:
    """A cell to store on commit `seq`, written by `poll` (its tick counts it); `prior_seq` is
    the job's newest cell before that poll, if known."""

    cell: Cell
    commit: Commit
    seq: int
    poll: str
    prior_seq: int | None = None
