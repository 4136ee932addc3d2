"""A synthetic PyTorch-scale trunk, composed on `trunkwatch_local.scenario.Trunk`.

Job columns follow PyTorch's HUD names: `<workflow> / <build environment> / test (<config>,
<shard>, <shards>, <runner>)` plus one unsharded `build` per environment. Every environment
has one build and 14 test configurations of 1 to 6 shards (49 test columns), so 40
environments give 600 job keys and exactly 2,000 columns; smaller trunks take fewer
environments and may take only the first test configurations of each.

Outcomes are a deterministic function of (column, commit index):
- background noise per job key: flaky cells (failed, retried green), single failures that
  never repeat on the next commit, cancelled and skipped shards;
- a broken-trunk episode: shard 2 of 5 of one `pull` test fails on `BROKEN_COMMITS` commits;
- an infra outage: every shard of every test of one `trunk` environment (6 to 14 job
  keys, more than the 5 of TrunkBroken's band) fails on `OUTAGE_COMMITS` commits at once.
Commits land every 14.4 minutes (100 a day); jobs finish `JOB_DURATION` after their commit
and are pending before that.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from trunkwatch.domain.cells import job_key
from trunkwatch_local.scenario import Trunk

COMMITS_PER_DAY = 100
COMMIT_EVERY = timedelta(days=1) / COMMITS_PER_DAY
JOB_DURATION = timedelta(minutes=60)
WINDOW = 50  # HUD per_page: commits in every snapshot
DAY_START = datetime(2026, 11, 18, 0, 0, tzinfo=UTC)
# The day's commits follow a full window of history, so the first poll sees 50 commits.
HISTORY = WINDOW
# Commit indexes (0 = the oldest commit of the history) of the two episodes.
BROKEN_COMMITS = range(HISTORY + 20, HISTORY + 25)
OUTAGE_COMMITS = range(HISTORY + 60, HISTORY + 63)

# Per-million rates of the background noise, per job key and commit.
FLAKY_PPM = 15_000
FAIL_ONCE_PPM = 2_000
CANCELLED_PPM = 3_000
SKIPPED_PPM = 5_000

# The workflow of environment i is WORKFLOWS[i % 20]; pull, trunk, docs-build and
# linux-binary-* are in scope of the PyTorch preset, the others are not.
WORKFLOWS = (
    "pull", "trunk", "inductor", "pull", "linux-binary-manywheel", "trunk", "periodic", "pull",
    "slow", "trunk", "rocm", "docs-build", "pull", "trunk", "linux-binary-libtorch", "inductor",
    "pull", "trunk", "xpu", "pull",
)  # fmt: skip
PLATFORMS = (
    ("linux-jammy-py3.10-gcc11", "linux.2xlarge"),
    ("linux-jammy-cuda12.8-py3.10-gcc11", "linux.g5.4xlarge.nvidia.gpu"),
    ("linux-jammy-py3.10-clang15-asan", "linux.4xlarge"),
    ("linux-focal-rocm6.3-py3.10", "linux.rocm.gpu.2"),
    ("macos-py3-arm64", "macos-m1-stable"),
    ("win-vs2022-cpu-py3", "windows.4xlarge.nonephemeral"),
    ("linux-jammy-xpu-2025.1-py3.9", "linux.idc.xpu"),
    ("linux-jammy-aarch64-py3.10", "linux.arm64.2xlarge"),
    ("linux-jammy-cuda12.6-py3.10-gcc9-sm86", "linux.g5.4xlarge.nvidia.gpu"),
    ("linux-jammy-py3.12-gcc11", "linux.2xlarge"),
)
VARIANTS = ("", "-debug", "-mem-eff", "-no-ops")
TEST_CONFIGS = (
    "default", "distributed", "dynamo_wrapped", "inductor", "crossref", "slow", "jit_legacy",
    "backwards_compat", "nogpu_AVX512", "nogpu_NO_AVX2", "docs_test", "numpy_2_x", "multigpu",
    "inductor_distributed",
)  # fmt: skip
# Shards of each of TEST_CONFIGS: 49 test columns, 50 with the build.
SHARDS = (5, 2, 3, 4, 1, 6, 1, 2, 3, 4, 5, 6, 1, 6)
# Environments 0 and 1 (pull and trunk) carry the episodes, so every scale has them.
BROKEN_ENVIRONMENT, OUTAGE_ENVIRONMENT = 0, 1


def environment(index: int) -> tuple[str, str, str]:
    """(workflow, build environment, runner) of environment `index`."""
    platform, runner = PLATFORMS[index % len(PLATFORMS)]
    return WORKFLOWS[index % len(WORKFLOWS)], platform + VARIANTS[index // len(PLATFORMS)], runner


@functools.cache
def job_columns(environments: int, tests: int = len(TEST_CONFIGS)) -> tuple[str, ...]:
    """HUD column names of `environments` environments with the first `tests` test
    configurations each (all of them: 50 columns an environment)."""
    if not 2 <= environments <= len(PLATFORMS) * len(VARIANTS):
        raise ValueError(f"environments must be 2..{len(PLATFORMS) * len(VARIANTS)}, got {environments}")
    if not 6 <= tests <= len(TEST_CONFIGS):  # the outage must fail more than 5 jobs
        raise ValueError(f"tests must be 6..{len(TEST_CONFIGS)}, got {tests}")
    names: list[str] = []
    for index in range(environments):
        workflow, env, runner = environment(index)
        names.append(f"{workflow} / {env} / build")
        for config, shards in zip(TEST_CONFIGS[:tests], SHARDS[:tests], strict=True):
            names += [
                f"{workflow} / {env} / test ({config}, {n}, {shards}, {runner})" for n in range(1, shards + 1)
            ]
    return tuple(names)


def _ppm(*parts: object) -> int:
    """A stable pseudo-random number in [0, 1e6) for `parts`."""
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 1_000_000


def _shard(column: str) -> tuple[int, int]:
    """(shard, shards) of a column name; (1, 1) when it names none."""
    inner = column.rsplit("(", 1)[-1].rstrip(")").split(", ")
    if len(inner) >= 3 and inner[1].isdigit() and inner[2].isdigit():
        return int(inner[1]), int(inner[2])
    return 1, 1


def _fails_once(key: str, index: int) -> bool:
    # Never on two commits in a row, so noise alone never makes a streak.
    return _ppm("fail", key, index) < FAIL_ONCE_PPM and not _ppm("fail", key, index - 1) < FAIL_ONCE_PPM


@dataclass(frozen=True)
class Episode:
    """Job keys that fail together on a run of commits."""

    name: str
    jobs: frozenset[str]
    commits: range
    shard: int | None  # only this shard of each job fails; None: every shard

    def deciding_commit(self, failures_to_open: int) -> int:
        """The commit whose failure makes the streak long enough to open an alert."""
        return self.commits[failures_to_open - 1]


def _tests(index: int, configs: tuple[str, ...]) -> frozenset[str]:
    """The job keys of environment `index`'s tests of `configs`."""
    workflow, env, runner = environment(index)
    return frozenset(f"{workflow} / {env} / test ({config}, {runner})" for config in configs)


EPISODES = (
    Episode("broken trunk", _tests(BROKEN_ENVIRONMENT, ("default",)), BROKEN_COMMITS, 2),
    Episode("infra outage", _tests(OUTAGE_ENVIRONMENT, TEST_CONFIGS), OUTAGE_COMMITS, None),
)


def episode_of(job: str) -> Episode | None:
    return next((e for e in EPISODES if job in e.jobs), None)


@functools.cache  # snapshots ask again for every commit still in the window
def outcome(column: str, index: int) -> str:
    """What job column `column` did on commit `index` (a `scenario.Outcome`)."""
    key = job_key(column)
    shard, shards = _shard(column)
    episode = episode_of(key)
    if episode and index in episode.commits and episode.shard in (None, shard):
        return "failure"
    if _fails_once(key, index) and shard == 1 + _ppm("shard", key, index) % shards:
        return "failure"
    roll = _ppm("roll", column, index)
    for name, ppm in (("flaky", FLAKY_PPM), ("cancelled", CANCELLED_PPM), ("skipped", SKIPPED_PPM)):
        if roll < ppm:
            return name
        roll -= ppm
    return "success"


@dataclass(frozen=True)
class Day:
    """One simulated day of a trunk of `environments` build environments, whose HUD
    snapshots hold the newest `window` commits."""

    environments: int
    window: int = WINDOW
    tests: int = len(TEST_CONFIGS)  # test configurations per environment

    @property
    def trunk(self) -> Trunk:
        return Trunk(
            jobs=job_columns(self.environments, self.tests),
            outcome=outcome,
            start=DAY_START - HISTORY * COMMIT_EVERY,
            commit_every=COMMIT_EVERY,
            job_duration=JOB_DURATION,
            window=self.window,
        )

    @property
    def columns(self) -> int:
        return len(job_columns(self.environments, self.tests))

    def landed(self, index: int) -> datetime:
        return self.trunk.start + index * COMMIT_EVERY

    def finished(self, index: int) -> datetime:
        """When every job of commit `index` has completed."""
        return self.landed(index) + JOB_DURATION

    def commits_landed(self, at: datetime) -> int:
        return int((at - self.trunk.start) / COMMIT_EVERY) + 1 if at >= self.trunk.start else 0


PYTORCH_SCALE = Day(environments=40)
