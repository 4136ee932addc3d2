"""A trunk's own small items in DynamoDB: its state (failing set, recent commits, open polls),
its job index and its source's state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError
from pynamodb.expressions.update import Action

from trunkwatch.domain.trunk_state import TrunkState
from trunkwatch.storage import keys
from trunkwatch.storage.items import JobIndex, SourceState, TrunkStateItem
from trunkwatch.storage.limits import ERROR_MAX, LAST_OK_PRECISION
from trunkwatch.storage.table import BoundModels

_CONDITION_FAILED = "ConditionalCheckFailedException"


class DynamoTrunks:
    def __init__(self, table: BoundModels) -> None:
        self.states = table.model(TrunkStateItem)
        self.job_indexes = table.model(JobIndex)
        self.source_states = table.model(SourceState)

    def state(self, trunk_id: str, consistent: bool = False) -> TrunkState:
        """The trunk's state (an empty one before the first poll)."""
        try:
            item = self.states.get(keys.trunk(trunk_id), keys.STATE, consistent_read=consistent)
        except DoesNotExist:
            return TrunkState()
        return TrunkState(
            failing={str(job) for job in item.failing or ()},
            unpaged={str(job) for job in item.unpaged or ()},
            recent_seqs=[int(seq) for seq in item.recent_seqs or []],
            unsettled=dict(_unsettled_entry(str(entry)) for entry in item.unsettled or ()),
            last_poll_ok_at=item.last_poll_ok_at,
            polls_failing_since=item.polls_failing_since,
            poll_error_cause=item.poll_error_cause,
            poll_error=item.poll_error,
            last_polled_at=item.last_polled_at,
            last_delivery_at=item.last_delivery_at,
            deliveries_missing_since=item.deliveries_missing_since,
        )

    def save_recent_seqs(self, trunk_id: str, old: list[int], new: list[int]) -> bool:
        """Replace the recent seqs if they are still `old` (False: another writer changed
        them, read them again)."""
        recent = TrunkStateItem.recent_seqs
        condition = (recent.does_not_exist() | (recent == old)) if not old else recent == old
        try:
            self.states.upsert(keys.trunk(trunk_id), keys.STATE, [recent.set(new)], condition)
        except UpdateError as err:
            if err.cause_response_code == _CONDITION_FAILED:
                return False
            raise
        return True

    def record_polled(self, trunk_id: str, at: datetime, missing_since: datetime | None = None) -> None:
        """A poll of a webhook-fed trunk, and since when deliveries are missing if it found
        results that none brought (a delivery with results ends that: `last_delivery_at`)."""
        actions: list[Action] = [TrunkStateItem.last_polled_at.set(at)]
        if missing_since is not None:
            actions.append(TrunkStateItem.deliveries_missing_since.set(missing_since))
        update_state(self.states, trunk_id, actions)

    def record_poll_failure(self, trunk_id: str, at: datetime, cause: str, error: str) -> None:
        """A failed poll: keep when failures started (the first of a run), and the latest cause."""
        update_state(
            self.states,
            trunk_id,
            [
                TrunkStateItem.polls_failing_since.set(TrunkStateItem.polls_failing_since | at),
                TrunkStateItem.poll_error_cause.set(cause),
                TrunkStateItem.poll_error.set(error[:ERROR_MAX]),
            ],
        )

    def record_poll_success(self, trunk_id: str, at: datetime, current: TrunkState) -> int:
        """A good poll ends a run of failures. Its time is kept to LAST_OK_PRECISION, so that a
        steady poll writes nothing. `current` is the trunk's state as the poll read it;
        returns the items written."""
        was_failing = current.polls_failing_since is not None
        last_ok = current.last_poll_ok_at
        if not was_failing and last_ok is not None and at - last_ok < LAST_OK_PRECISION:
            return 0
        actions: list[Action] = [TrunkStateItem.last_poll_ok_at.set(at)]
        if was_failing:
            actions += [
                TrunkStateItem.polls_failing_since.remove(),
                TrunkStateItem.poll_error_cause.remove(),
                TrunkStateItem.poll_error.remove(),
            ]
        update_state(self.states, trunk_id, actions)
        return 1

    def record_delivery(self, trunk_id: str, at: datetime) -> None:
        """A delivery wrote results (one that opens a group records it with the group)."""
        update_state(self.states, trunk_id, [TrunkStateItem.last_delivery_at.set(at)])

    def mark_unpaged(self, trunk_id: str, job: str, unpaged: bool) -> None:
        """Add the job to the trunk's unpaged set, or remove it (atomic, as the failing set)."""
        change = TrunkStateItem.unpaged.add if unpaged else TrunkStateItem.unpaged.delete
        update_state(self.states, trunk_id, [change({job})])

    def job_names(self, trunk_id: str) -> list[str]:
        try:
            return [str(name) for name in self.job_indexes.get(keys.trunk(trunk_id), keys.JOBS).names or []]
        except DoesNotExist:
            return []

    def add_job_names(self, trunk_id: str, known: list[str], names: list[str]) -> bool:
        """Append `names` as new columns if the index is still `known` (False: it changed,
        read it again), so concurrent writers never give two jobs one column and a column
        never changes its job."""
        condition = JobIndex.names.does_not_exist() if not known else JobIndex.names == known
        try:
            self.job_indexes.upsert(
                keys.trunk(trunk_id), keys.JOBS, [JobIndex.names.set([*known, *names])], condition
            )
        except UpdateError as err:
            if err.cause_response_code == _CONDITION_FAILED:
                return False
            raise
        return True

    def source_state(self, trunk_id: str) -> dict[str, Any]:
        try:
            return dict(self.source_states.get(keys.trunk(trunk_id), keys.SOURCE).state or {})
        except DoesNotExist:
            return {}

    def save_source_state(self, trunk_id: str, value: dict[str, Any]) -> None:
        self.source_states(keys.trunk(trunk_id), keys.SOURCE, state=value).save()


def update_state(states: type[TrunkStateItem], trunk_id: str, actions: list[Action]) -> None:
    """Update the trunk's state item (`states`: the model bound to the table)."""
    states.upsert(keys.trunk(trunk_id), keys.STATE, actions)


def open_poll(
    states: type[TrunkStateItem], trunk_id: str, poll: str, at: datetime, delivered: bool = False
) -> None:
    """A poll (or delivery group) whose tick has yet to settle: a sweep waits for it, and
    settles it if it stays open too long; a delivery group also records that deliveries
    arrive."""
    actions: list[Action] = [TrunkStateItem.unsettled.add({_unsettled_value(poll, at)})]
    if delivered:
        actions.append(TrunkStateItem.last_delivery_at.set(at))
    update_state(states, trunk_id, actions)


def close_poll(states: type[TrunkStateItem], trunk_id: str, poll: str, at: datetime) -> None:
    """The tick of `poll`, opened at `at`, settled."""
    update_state(states, trunk_id, [TrunkStateItem.unsettled.delete({_unsettled_value(poll, at)})])


def _unsettled_value(poll: str, at: datetime) -> str:
    return f"{poll}@{at.astimezone(UTC).isoformat()}"


def _unsettled_entry(value: str) -> tuple[str, datetime]:
    poll, _, at = value.rpartition("@")
    return poll, datetime.fromisoformat(at)
