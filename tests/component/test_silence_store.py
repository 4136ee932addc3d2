"""The silence store on a moto table: create, update-or-replace, expire, TTL and the audit trail."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.aws import table_items
from trunkwatch.silences import SilenceError, store
from trunkwatch.silences.store import SilenceConflict, SilenceNotFound
from trunkwatch.storage.port import Silences


@pytest.fixture
def silences(aws: dict[str, Any]) -> Silences:
    return aws["storage"].silences


NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
JOB_MATCHERS = [{"name": "job", "value": "pull / .*", "isRegex": True, "isEqual": True}]


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def postable(starts_at: datetime = NOW, ends_at: datetime = NOW + 2 * HOUR, **changes: Any) -> dict[str, Any]:
    body = {
        "matchers": JOB_MATCHERS,
        "startsAt": stamp(starts_at),
        "endsAt": stamp(ends_at),
        "createdBy": "alice",
        "comment": "known breakage",
    }
    body.update(changes)
    return {key: value for key, value in body.items() if value is not None}


def actions(silences: Silences) -> list[tuple[str, str, str]]:
    return [(r["action"], r["silenceID"], r["who"]) for r in store.audit_log(silences)]


def test_create_stores_the_silence_with_ttl_and_audit(silences: Silences) -> None:
    sid = store.upsert(silences, postable(), "alice", NOW)
    assert uuid.UUID(sid)
    got = store.get(silences, sid, NOW)
    assert got.to_api(NOW)["status"] == {"state": "active"}
    assert (got.starts_at, got.ends_at, got.created_by, got.updated_at) == (NOW, NOW + 2 * HOUR, "alice", NOW)

    [item] = table_items("silence")
    assert (item["pk"]["S"], item["sk"]["S"]) == ("SILENCE", sid)
    assert int(item["expires_at"]["N"]) == int((NOW + 2 * HOUR + timedelta(hours=120)).timestamp())

    [audit] = table_items("audit")
    assert audit["pk"]["S"] == "SILENCE#AUDIT"
    assert audit["sk"]["S"] == f"2026-11-18T15:00:00.000Z#{sid}#create"
    [record] = store.audit_log(silences)
    assert record["who"] == "alice" and record["before"] is None
    assert record["after"]["endsAt"] == "2026-11-18T17:00:00.000Z"


def test_past_start_is_clamped_to_now(silences: Silences) -> None:
    sid = store.upsert(silences, postable(starts_at=NOW - HOUR), "alice", NOW)
    assert store.get(silences, sid, NOW).starts_at == NOW


def test_created_by_defaults_to_the_principal(silences: Silences) -> None:
    sid = store.upsert(silences, postable(createdBy=None), "carol", NOW)
    assert store.get(silences, sid, NOW).created_by == "carol"
    explicit = store.upsert(silences, postable(createdBy="dave"), "carol", NOW)
    assert store.get(silences, explicit, NOW).created_by == "dave"
    assert ("create", explicit, "carol") in actions(silences)


def test_created_by_is_needed_without_a_principal(silences: Silences) -> None:
    with pytest.raises(SilenceError, match="createdBy is required"):
        store.upsert(silences, postable(createdBy=None), None, NOW)
    assert table_items() == []


@pytest.mark.parametrize(
    "changes",
    [
        {"matchers": []},
        {"matchers": [{"name": "job", "value": "(", "isRegex": True}]},
        {"endsAt": stamp(NOW - MINUTE)},
        {"startsAt": stamp(NOW + 3 * HOUR)},
        {"comment": None},
    ],
)
def test_invalid_silence_writes_nothing(silences: Silences, changes: dict[str, Any]) -> None:
    with pytest.raises(SilenceError):
        store.upsert(silences, postable(**changes), "alice", NOW)
    assert table_items() == []


def test_active_silence_updates_in_place_when_history_is_kept(silences: Silences) -> None:
    sid = store.upsert(silences, postable(), "alice", NOW)
    later = NOW + 10 * MINUTE
    same = store.upsert(silences, postable(ends_at=NOW + 5 * HOUR, id=sid, comment="longer"), "bob", later)
    assert same == sid
    got = store.get(silences, sid, later)
    assert (got.ends_at, got.comment, got.updated_at) == (NOW + 5 * HOUR, "longer", later)
    [item] = table_items("silence")
    assert int(item["expires_at"]["N"]) == int((NOW + 5 * HOUR + timedelta(hours=120)).timestamp())
    assert actions(silences) == [("create", sid, "alice"), ("update", sid, "bob")]
    update = store.audit_log(silences)[-1]
    assert update["before"]["comment"] == "known breakage" and update["after"]["comment"] == "longer"


def test_matcher_order_is_not_a_change(silences: Silences) -> None:
    two = [{"name": "job", "value": "pull / .*", "isRegex": True}, {"name": "repo", "value": "a/b"}]
    sid = store.upsert(silences, postable(matchers=two), "alice", NOW)
    assert store.upsert(silences, postable(matchers=two[::-1], id=sid), "alice", NOW + MINUTE) == sid


def test_changed_matchers_expire_the_old_silence_and_create_a_new_id(silences: Silences) -> None:
    sid = store.upsert(silences, postable(), "alice", NOW)
    later = NOW + 10 * MINUTE
    new = store.upsert(
        silences,
        postable(id=sid, matchers=[{"name": "job", "value": "trunk / .*", "isRegex": True}]),
        "bob",
        later,
    )
    assert new != sid
    old = store.get(silences, sid, later)
    assert (old.ends_at, old.status(later)) == (later, "expired")
    assert store.get(silences, new, later).starts_at == later
    assert sorted(actions(silences)[1:]) == sorted([("expire", sid, "bob"), ("create", new, "bob")])


def test_moving_an_active_silences_start_creates_a_new_id(silences: Silences) -> None:
    sid = store.upsert(silences, postable(starts_at=NOW - HOUR), "alice", NOW)
    later = NOW + MINUTE
    new = store.upsert(silences, postable(id=sid, starts_at=NOW + HOUR), "alice", later)
    assert new != sid
    assert store.get(silences, sid, later).status(later) == "expired"
    assert store.get(silences, new, later).status(later) == "pending"


def test_pending_silence_may_move_within_the_future(silences: Silences) -> None:
    sid = store.upsert(silences, postable(starts_at=NOW + HOUR), "alice", NOW)
    assert store.upsert(silences, postable(id=sid, starts_at=NOW + 30 * MINUTE), "alice", NOW + MINUTE) == sid
    assert store.get(silences, sid, NOW + MINUTE).starts_at == NOW + 30 * MINUTE


def test_pending_silence_moved_into_the_past_is_replaced(silences: Silences) -> None:
    sid = store.upsert(silences, postable(starts_at=NOW + HOUR), "alice", NOW)
    later = NOW + MINUTE
    new = store.upsert(silences, postable(id=sid, starts_at=NOW - HOUR), "alice", later)
    assert new != sid
    old = store.get(silences, sid, later)
    # It never became active: it starts and ends at the replacement time.
    assert (old.starts_at, old.ends_at) == (later, later)
    assert store.get(silences, new, later).starts_at == later


def test_updating_an_expired_silence_creates_a_new_one_and_leaves_the_old(silences: Silences) -> None:
    sid = store.upsert(silences, postable(ends_at=NOW + HOUR), "alice", NOW)
    later = NOW + 2 * HOUR
    new = store.upsert(silences, postable(id=sid, starts_at=later, ends_at=later + HOUR), "alice", later)
    assert new != sid
    assert store.get(silences, sid, later).ends_at == NOW + HOUR
    assert actions(silences) == [("create", sid, "alice"), ("create", new, "alice")]


def test_update_of_an_unknown_id_is_not_found_and_writes_nothing(silences: Silences) -> None:
    with pytest.raises(SilenceNotFound):
        store.upsert(silences, postable(id=str(uuid.uuid4())), "alice", NOW)
    with pytest.raises(SilenceError, match="not a silence id"):
        store.upsert(silences, postable(id="nope"), "alice", NOW)
    assert table_items() == []


def test_expire_active_silence(silences: Silences) -> None:
    sid = store.upsert(silences, postable(), "alice", NOW)
    later = NOW + 10 * MINUTE
    store.expire(silences, sid, "bob", later)
    got = store.get(silences, sid, later)
    assert (got.starts_at, got.ends_at, got.updated_at, got.status(later)) == (NOW, later, later, "expired")
    [item] = table_items("silence")
    assert int(item["expires_at"]["N"]) == int((later + timedelta(hours=120)).timestamp())
    assert actions(silences) == [("create", sid, "alice"), ("expire", sid, "bob")]


def test_expire_pending_silence_never_makes_it_active(silences: Silences) -> None:
    sid = store.upsert(silences, postable(starts_at=NOW + HOUR), "alice", NOW)
    store.expire(silences, sid, "bob", NOW + MINUTE)
    got = store.get(silences, sid, NOW + MINUTE)
    assert (got.starts_at, got.ends_at) == (NOW + MINUTE, NOW + MINUTE)


def test_expire_twice_or_unknown_is_refused(silences: Silences) -> None:
    sid = store.upsert(silences, postable(), "alice", NOW)
    store.expire(silences, sid, "bob", NOW + MINUTE)
    with pytest.raises(SilenceError, match="already expired"):
        store.expire(silences, sid, "bob", NOW + 2 * MINUTE)
    with pytest.raises(SilenceNotFound):
        store.expire(silences, str(uuid.uuid4()), "bob", NOW)
    assert len(store.audit_log(silences)) == 2


def test_list_and_active_follow_the_clock(silences: Silences) -> None:
    running = store.upsert(silences, postable(), "alice", NOW)
    later = store.upsert(silences, postable(starts_at=NOW + HOUR), "alice", NOW)
    ended = store.upsert(silences, postable(ends_at=NOW + 30 * MINUTE), "alice", NOW)
    at = NOW + 45 * MINUTE
    assert {s.id: s.status(at) for s in store.list_silences(silences, at)} == {
        running: "active",
        later: "pending",
        ended: "expired",
    }
    assert [s.id for s in store.active(silences, at)] == [running]


def test_items_past_their_ttl_are_gone_before_dynamodb_deletes_them(silences: Silences) -> None:
    sid = store.upsert(silences, postable(ends_at=NOW + HOUR), "alice", NOW)
    retained = NOW + HOUR + timedelta(hours=119)
    assert [s.id for s in store.list_silences(silences, retained)] == [sid]
    past_ttl = NOW + HOUR + timedelta(hours=120)
    assert len(table_items("silence")) == 1
    assert store.list_silences(silences, past_ttl) == []
    with pytest.raises(SilenceNotFound):
        store.get(silences, sid, past_ttl)


def test_concurrent_change_loses_cleanly(silences: Silences, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = store.upsert(silences, postable(), "alice", NOW)
    stale = silences.get(sid)
    store.upsert(silences, postable(id=sid, comment="first writer"), "alice", NOW + MINUTE)
    # The second writer read the silence before the first one committed.
    with monkeypatch.context() as patch, pytest.raises(SilenceConflict):
        patch.setattr(silences, "get", lambda silence_id: stale)
        store.upsert(silences, postable(id=sid, comment="second writer"), "bob", NOW + 2 * MINUTE)
    assert store.get(silences, sid, NOW + 3 * MINUTE).comment == "first writer"
    assert [a for a, _, _ in actions(silences)] == ["create", "update"]
