"""A trunk's own small items: its state (failing set, recent commits, open poll), its job
index and its source's state."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError
from pynamodb.expressions.update import Action

from trunkwatch.storage import keys
from trunkwatch.storage.items import JobIndex, SourceState, TrunkState

ERROR_MAX = 500
LAST_OK_PRECISION = timedelta(minutes=5)


def state(trunk_id: str, consistent: bool = False) -> TrunkState:
    """The trunk's state item (an empty one before the first poll)."""
    try:
        return TrunkState.get(keys.trunk(trunk_id), keys.STATE, consistent_read=consistent)
    except DoesNotExist:
        return TrunkState(keys.trunk(trunk_id), keys.STATE)


def save_recent_seqs(trunk_id: str, recent: list[int]) -> None:
    TrunkState.upsert(keys.trunk(trunk_id), keys.STATE, [TrunkState.recent_seqs.set(recent)])


def open_poll(trunk_id: str, poll: str, at: datetime, delivered: bool = False) -> None:
    """The poll (or delivery group) whose tick a sweep waits for; a delivery group also
    records that deliveries arrive."""
    actions: list[Action] = [TrunkState.open_poll.set(poll), TrunkState.open_poll_at.set(at)]
    if delivered:
        actions.append(TrunkState.last_delivery_at.set(at))
    TrunkState.upsert(keys.trunk(trunk_id), keys.STATE, actions)


def close_poll(trunk_id: str, poll: str) -> None:
    """Clear the open poll if it is still `poll` (a newer poll's own tick closes that one)."""
    with contextlib.suppress(UpdateError):
        TrunkState.upsert(
            keys.trunk(trunk_id),
            keys.STATE,
            [TrunkState.open_poll.remove(), TrunkState.open_poll_at.remove()],
            condition=TrunkState.open_poll == poll,
        )


def record_polled(trunk_id: str, at: datetime, missing_since: datetime | None = None) -> None:
    """A poll of a webhook-fed trunk, and since when deliveries are missing if it found
    results that none brought (a delivery with results ends that: `last_delivery_at`)."""
    actions: list[Action] = [TrunkState.last_polled_at.set(at)]
    if missing_since is not None:
        actions.append(TrunkState.deliveries_missing_since.set(missing_since))
    TrunkState.upsert(keys.trunk(trunk_id), keys.STATE, actions)


def record_poll_failure(trunk_id: str, at: datetime, cause: str, error: str) -> None:
    """A failed poll: keep when failures started (the first of a run), and the latest cause."""
    TrunkState.upsert(
        keys.trunk(trunk_id),
        keys.STATE,
        [
            TrunkState.polls_failing_since.set(TrunkState.polls_failing_since | at),
            TrunkState.poll_error_cause.set(cause),
            TrunkState.poll_error.set(error[:ERROR_MAX]),
        ],
    )


def record_poll_success(trunk_id: str, at: datetime, current: TrunkState) -> int:
    """A good poll ends a run of failures. Its time is kept to LAST_OK_PRECISION, so that a
    steady poll writes nothing. `current` is the trunk's state as the poll read it; returns
    the items written."""
    was_failing = current.polls_failing_since is not None
    last_ok = current.last_poll_ok_at
    if not was_failing and last_ok is not None and at - last_ok < LAST_OK_PRECISION:
        return 0
    actions: list[Action] = [TrunkState.last_poll_ok_at.set(at)]
    if was_failing:
        actions += [
            TrunkState.polls_failing_since.remove(),
            TrunkState.poll_error_cause.remove(),
            TrunkState.poll_error.remove(),
        ]
    TrunkState.upsert(keys.trunk(trunk_id), keys.STATE, actions)
    return 1


def job_names(trunk_id: str) -> list[str]:
    try:
        return list(JobIndex.get(keys.trunk(trunk_id), keys.JOBS).names or [])
    except DoesNotExist:
        return []


def save_job_names(trunk_id: str, names: list[str]) -> None:
    JobIndex(keys.trunk(trunk_id), keys.JOBS, names=names).save()


def add_job_name(trunk_id: str, known: list[str], name: str) -> bool:
    """Append `name` as a new column if the index is still `known` (False: it changed, read
    it again), so concurrent writers never give two jobs one column."""
    condition = JobIndex.names.does_not_exist() if not known else JobIndex.names == known
    try:
        JobIndex.upsert(keys.trunk(trunk_id), keys.JOBS, [JobIndex.names.set([*known, name])], condition)
    except UpdateError as err:
        if err.cause_response_code == "ConditionalCheckFailedException":
            return False
        raise
    return True


def source_state(trunk_id: str) -> dict[str, Any]:
    try:
        return dict(SourceState.get(keys.trunk(trunk_id), keys.SOURCE).state or {})
    except DoesNotExist:
        return {}


def save_source_state(trunk_id: str, value: dict[str, Any]) -> None:
    SourceState(keys.trunk(trunk_id), keys.SOURCE, state=value).save()
