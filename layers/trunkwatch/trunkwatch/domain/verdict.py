"""Culprit verdicts confirmed by reruns (issue #27): pure functions, no AWS, no I/O.

A job alert names a suspect: the culprit (the first failing commit of the run) and the last
pass before it. Re-running the job on both tells what the alert cannot:

- `confirmed`: the last pass passes again and the culprit fails again: the culprit broke it;
- `environmental`: the last pass now fails too: something outside the commits broke the job
  (a dependency, a runner), whichever commit landed first;
- `flaky`: the culprit passes on rerun: the failure does not follow the code;
- `unconfirmed`: no decisive result yet, confirmation is off, or a rerun could not be
  requested (with the reason). The alert then says what it says today.

When the evidence disagrees, the verdict never blames the culprit unless the last pass passes
on rerun and the culprit fails again. First of all, a failure the source says the CI's agent
caused (`cells.AGENT_FAILURE`: Buildkite's `signal_reason`, an expired job) is
`environmental`, whatever reruns say: the code never ran to its end.

1. A last pass that fails on rerun wins over everything else (`environmental`): known-good
   code failing is the strongest sign the failure does not need the culprit, even when the
   culprit passes on rerun as well (the reason says so: intermittent, or the environment
   changed between the two reruns).
2. Then a culprit that passes on rerun (`flaky`), even when its first failure was already a
   failed retry: the rerun is the newer result.
3. `confirmed` needs the last pass's rerun to pass and the culprit to fail again: by its rerun,
   or, when there is no culprit rerun (not requested, or it could not be requested), by a retry
   that already failed. A culprit rerun that is pending is waited for, so that a verdict
   never flips from `confirmed` to `flaky` when it comes in. (A failed retry ran at the
   failure's time, the last pass's rerun later: if the environment recovered in between, the
   two disagree about the time, not the code. A caller that wants the culprit rerun anyway
   passes `culprit_failed_retry=False` to `plan_reruns`.) Reruns confirm a range, not a
   commit: when the job has no result on commits between the last pass and the culprit (it
   did not run there), any of them may have broken it, so the verdict stays `unconfirmed`
   (the reason says so) and no pull request is blamed, unless another job of the trunk
   confirms one of them (`confirming_sibling`): its own reruns confirmed a culprit inside
   the range and it fails alike (`fails_alike`: a failure line this job shows too, or, where
   failures carry no lines, the same job in another configuration). That commit is then the
   culprit (`VerdictDecision.culprit_sha`): the job's reruns confirm the range broke it, the
   sibling's which commit of the range broke that test.
4. Rerun results beat the evidence without reruns. Only when the reruns decide nothing, a
   failure without failure lines while other jobs on the same runner type fail without lines
   at the same time is a runner outage (`environmental`); on a trunk whose failures carry
   no lines, other jobs on the same runner type failing at the same time whose runs no one
   commit can have broken together with this one (their ranges share no commit: a breakage
   fails its jobs from one commit, a runner from one time). While reruns are pending that
   verdict is provisional: the reruns, once in, decide by rules 1-3.
5. Otherwise `unconfirmed`, the reason naming the first of: a rerun that could not be
   requested, no last pass in the window (a clipped run), a rerun still pending, no rerun
   requested.

`shard_to_rerun` picks the shard of a sharded job to rerun: the one that failed on the
culprit, on both commits. When it did not run on the last pass, no other shard stands in for
it: it is rerun where it last passed before (`shard_last_pass`), which can tell
`environmental` but never `confirmed` (the last pass is then a commit of the range it did not
run on), or, when it has no such commit, not at all (`unconfirmed`).

`plan_reruns` decides which reruns to request for an episode: at most `MAX_RERUNS_PER_EPISODE`
over its lifetime (one per role), none on a commit whose job has a newer attempt than the one
the alert saw (it exists or runs: its result is the rerun's; the caller reports it as that
role's rerun), none beyond the trunk's hourly cap, the last pass first (only it can
tell `environmental`), the culprit only when its failure is not already a failed retry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from trunkwatch.domain.cells import CellState, configuration_free

MAX_RERUNS_PER_EPISODE = 2


class CulpritVerdict(StrEnum):
    CONFIRMED = "confirmed"
    ENVIRONMENTAL = "environmental"
    FLAKY = "flaky"
    UNCONFIRMED = "unconfirmed"


class RerunStatus(StrEnum):
    PENDING = "pending"
    SUCCESS = "success"
    FAILURE = "failure"
    REQUEST_FAILED = "request_failed"  # the rerun could not be requested (`reason` says why)


class Role(StrEnum):
    LAST_PASS = "last_pass"  # noqa: S105 - a role name, not a secret
    CULPRIT = "culprit"


@dataclass(frozen=True)
class Suspect:
    """A job alert's culprit range: `last_pass_sha` None when the run is clipped (the window
    does not reach back to a pass)."""

    job: str
    culprit_sha: str
    last_pass_sha: str | None
    # Commits between the last pass and the culprit on which the job has no result.
    unrun_between: int = 0


@dataclass(frozen=True)
class ConfirmedAlert:
    """A firing job alert whose culprit reruns confirmed: the job, its culprit and the
    failure lines it fails with."""

    job: str
    culprit_seq: int
    culprit_sha: str
    failure_lines: tuple[str, ...]


@dataclass(frozen=True)
class Rerun:
    status: RerunStatus
    reason: str = ""  # why the request failed


@dataclass(frozen=True)
class Evidence:
    """What is known about a suspect so far; None for a rerun not requested."""

    last_pass: Rerun | None = None
    culprit: Rerun | None = None
    # The culprit's failure is already a retry that failed again (HUD: failedPreviousRun on
    # a failure): it counts as the culprit failing again while its rerun is not in.
    culprit_failed_retry: bool = False
    # Evidence without reruns: the culprit's failure has no failure lines, and this many
    # other jobs on the same runner type failed without lines at the same time (on a trunk
    # whose failures carry no lines, `lineless`: failed from other commits than this one's
    # first failure, as jobs do when their runners fail, not a commit).
    no_failure_lines: bool = False
    runner_peers_failing: int = 0
    runner: str = ""
    lineless: bool = False
    # The source says the CI's agent failed the job, not its code (`cells.agent_failure`).
    agent_failure: str = ""
    confirmation: bool = True  # the trunk asks for reruns at all
    # A confirmed culprit inside the range failing the same way (`confirming_sibling`):
    # another job's, or this one's from an earlier judgement by a sibling. It names the
    # commit when the job did not run on every one.
    sibling: ConfirmedAlert | None = None


@dataclass(frozen=True)
class VerdictDecision:
    verdict: CulpritVerdict
    reason: str
    # The commit a sibling's reruns confirm as culprit (`Evidence.sibling`), when they decide;
    # None: the suspect's culprit, as the job's own reruns decide on it.
    culprit_sha: str | None = None

    @property
    def blames_culprit(self) -> bool:
        return self.verdict == CulpritVerdict.CONFIRMED


VERDICT_WORDS = {
    CulpritVerdict.CONFIRMED: "culprit confirmed by reruns",
    CulpritVerdict.ENVIRONMENTAL: "environmental, no commit to blame",
    CulpritVerdict.FLAKY: "flaky, the failure does not follow the code",
    CulpritVerdict.UNCONFIRMED: "culprit not confirmed yet",
}

# The reason of the update notification a verdict sends (Alertmanager's notification reason).
VERDICT_UPDATES = {
    CulpritVerdict.CONFIRMED: "culprit confirmed",
    CulpritVerdict.ENVIRONMENTAL: "environmental: the last green commit fails too",
    CulpritVerdict.FLAKY: "flaky",
}


def verdict_words(verdict: str) -> str:
    """The verdict as people read it; an unknown value as it is."""
    try:
        return VERDICT_WORDS[CulpritVerdict(verdict)]
    except ValueError:
        return verdict


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _short(sha: str | None) -> str:
    return (sha or "")[:12]


def decide(suspect: Suspect, evidence: Evidence) -> VerdictDecision:
    """The verdict on `suspect` from `evidence` (the module docstring's rules, in order)."""
    if not evidence.confirmation:
        return VerdictDecision(CulpritVerdict.UNCONFIRMED, "confirmation by reruns is off")
    if evidence.agent_failure:
        return VerdictDecision(
            CulpritVerdict.ENVIRONMENTAL,
            f"the CI's agent failed the job ({evidence.agent_failure}), not its code",
        )
    last, culprit = evidence.last_pass, evidence.culprit
    last_status = last.status if last else None
    culprit_status = culprit.status if culprit else None
    if last_status == RerunStatus.FAILURE:
        also = (
            "; the culprit passes on rerun (intermittent, or the environment changed)"
            if culprit_status == RerunStatus.SUCCESS
            else ""
        )
        return VerdictDecision(
            CulpritVerdict.ENVIRONMENTAL,
            f"the last pass {_short(suspect.last_pass_sha)} fails on rerun too{also}",
        )
    if culprit_status == RerunStatus.SUCCESS:
        retried = " (its first failure was a failed retry)" if evidence.culprit_failed_retry else ""
        return VerdictDecision(
            CulpritVerdict.FLAKY, f"the culprit {_short(suspect.culprit_sha)} passes on rerun{retried}"
        )
    culprit_fails = culprit_status == RerunStatus.FAILURE or (
        evidence.culprit_failed_retry and culprit_status != RerunStatus.PENDING
    )
    if last_status == RerunStatus.SUCCESS and culprit_fails:
        how = "on rerun" if culprit_status == RerunStatus.FAILURE else "on its retry"
        if suspect.unrun_between and evidence.sibling is not None:
            sibling = evidence.sibling
            named = (
                f"the job did not run on {_short(sibling.culprit_sha)}, which"
                if sibling.culprit_sha != suspect.culprit_sha
                else f"the job did not run on the {plural(suspect.unrun_between, 'commit')} before it; the"
                " first failure, which"
            )
            return VerdictDecision(
                CulpritVerdict.CONFIRMED,
                f"the last pass {_short(suspect.last_pass_sha)} passes on rerun and the first failure "
                f"{_short(suspect.culprit_sha)} fails again {how}; {named} reruns of {sibling.job} "
                f"confirm broke {'in another configuration' if evidence.lineless else 'the same test'}",
                culprit_sha=sibling.culprit_sha,
            )
        if suspect.unrun_between:
            return VerdictDecision(
                CulpritVerdict.UNCONFIRMED,
                f"the last pass passes on rerun and the culprit fails again {how}, but the job did "
                f"not run on the {plural(suspect.unrun_between, 'commit')} between them: any of the "
                "range may have broken it",
            )
        return VerdictDecision(
            CulpritVerdict.CONFIRMED,
            f"the last pass {_short(suspect.last_pass_sha)} passes on rerun and the culprit "
            f"{_short(suspect.culprit_sha)} fails again {how}",
        )
    if evidence.no_failure_lines and evidence.runner_peers_failing > 0:
        on = f" on {evidence.runner}" if evidence.runner else " on the same runner type"
        peers = f"{evidence.runner_peers_failing} other job(s){on}"
        return VerdictDecision(
            CulpritVerdict.ENVIRONMENTAL,
            f"{peers} failed at the same time from commits no one breakage spans: the runner, not a commit"
            if evidence.lineless
            else f"no failure lines while {peers} failed at the same time",
        )
    return VerdictDecision(CulpritVerdict.UNCONFIRMED, _unconfirmed_reason(suspect, evidence))


def confirming_sibling(
    last_pass_seq: int,
    first_fail_seq: int,
    failing: ConfirmedAlert,
    confirmed: Iterable[ConfirmedAlert],
    lines: bool = True,
) -> ConfirmedAlert | None:
    """The confirmed alert that names which commit of the range (`last_pass_seq`,
    `first_fail_seq`] broke the `failing` job: one whose confirmed culprit lies in the range
    and which fails alike (`fails_alike`). None when there is none, or when such alerts name
    different commits (two breakages in the range: which one broke this job is not known).
    `lines`: the trunk's failures carry failure lines."""
    found: dict[int, ConfirmedAlert] = {}
    for alert in confirmed:
        if last_pass_seq < alert.culprit_seq <= first_fail_seq and fails_alike(failing, alert, lines):
            found.setdefault(alert.culprit_seq, alert)
    return next(iter(found.values())) if len(found) == 1 else None


def fails_alike(failing: ConfirmedAlert, other: ConfirmedAlert, lines: bool) -> bool:
    """Whether two jobs' failures are one breakage's: they share a failure line; on a trunk
    whose failures carry none, the two are one job in two configurations (`configuration_free`:
    the same tests built the same way, which a breakage fails alike; a key without a
    configuration has no such sibling)."""
    if lines:
        return bool(set(failing.failure_lines).intersection(other.failure_lines))
    job = configuration_free(failing.job)
    return job is not None and job == configuration_free(other.job)


def _unconfirmed_reason(suspect: Suspect, evidence: Evidence) -> str:
    reruns = ((Role.LAST_PASS, evidence.last_pass), (Role.CULPRIT, evidence.culprit))
    for role, rerun in reruns:
        if rerun is not None and rerun.status == RerunStatus.REQUEST_FAILED:
            return f"the {_role_name(role)} rerun could not be requested: {rerun.reason or 'unknown error'}"
    if suspect.last_pass_sha is None:
        return "no last pass in the window to rerun"
    pending = [
        _role_name(role)
        for role, rerun in reruns
        if rerun is not None and rerun.status == RerunStatus.PENDING
    ]
    if pending:
        return f"waiting for the {' and '.join(pending)} rerun{'s' if len(pending) > 1 else ''}"
    return "no rerun requested"


def _role_name(role: Role) -> str:
    return "last pass" if role == Role.LAST_PASS else "culprit"


def shard_to_rerun(role: Role, failing: str | None, shards: Sequence[str]) -> str | None:
    """The shard of the job to rerun on the role's commit (`shards`: the job's runs there):
    the one that failed on the culprit (`failing`; None when none is known), else the first.
    On the last pass, only the failing shard: another shard passing again says nothing about
    the failure (a sharded job passes on a commit where its failing shard did not run), so
    None when it did not run there."""
    if failing is not None and failing in shards:
        return failing
    if role == Role.LAST_PASS and failing is not None:
        return None
    return shards[0] if shards else None


def shard_last_pass(shard: str, older: Iterable[Mapping[str, CellState]]) -> int | None:
    """Where the failing shard last passed when it did not run on the last pass: the index in
    `older` (the commits before the last pass, newest first, each with its shards' states) of
    the newest on which it passed; None when it failed there first (the range is not one
    failure's) or never ran. Rerunning it there tells `environmental` as the last pass would;
    the last pass itself, where it did not run, keeps the culprit from being `confirmed`."""
    for index, states in enumerate(older):
        state = states.get(shard)
        if state in (CellState.PASS, CellState.FLAKY):
            return index
        if state == CellState.FAIL:
            return None
    return None


@dataclass(frozen=True)
class RerunRequest:
    job: str
    sha: str
    role: Role


@dataclass(frozen=True)
class Plan:
    requests: tuple[RerunRequest, ...]
    # Why a rerun the episode would want is not requested (role -> reason).
    skipped: tuple[tuple[Role, str], ...] = ()


def plan_reruns(
    suspect: Suspect,
    *,
    requested: frozenset[Role] = frozenset(),
    newer_attempt: frozenset[Role] = frozenset(),
    culprit_failed_retry: bool = False,
    requested_this_hour: int = 0,
    hourly_cap: int = 0,
    confirmation: bool = True,
) -> Plan:
    """Which reruns to request now for the episode of `suspect`.

    `requested`: the roles already requested for this episode (each role at most once, so
    never more than `MAX_RERUNS_PER_EPISODE`); `newer_attempt`: the roles whose commit already
    has a newer attempt of the job (done or running); `requested_this_hour`: the trunk's reruns requested
    in the current hour, against `hourly_cap`.
    """
    if not confirmation:
        return Plan(
            (),
            (
                (Role.LAST_PASS, "confirmation by reruns is off"),
                (Role.CULPRIT, "confirmation by reruns is off"),
            ),
        )
    wanted: list[tuple[Role, str | None]] = [
        (Role.LAST_PASS, suspect.last_pass_sha),
        (Role.CULPRIT, suspect.culprit_sha),
    ]
    assert len(wanted) == MAX_RERUNS_PER_EPISODE  # each role at most once per episode
    room = max(0, hourly_cap - requested_this_hour)
    requests: list[RerunRequest] = []
    skipped: list[tuple[Role, str]] = []
    for role, sha in wanted:
        if role in requested:
            continue
        if sha is None:
            skipped.append((role, "no last pass in the window"))
        elif role == Role.CULPRIT and culprit_failed_retry:
            skipped.append((role, "the culprit's failure is already a failed retry"))
        elif role in newer_attempt:
            skipped.append((role, f"a newer attempt of the job on the {_role_name(role)} exists or runs"))
        elif len(requests) >= room:
            skipped.append((role, f"the trunk's cap of {hourly_cap} reruns an hour is reached"))
        else:
            requests.append(RerunRequest(suspect.job, sha, role))
    return Plan(tuple(requests), tuple(skipped))
