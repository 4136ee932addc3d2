"""Acknowledging firing alerts (design.md §4.3): through `POST /api/v2/acks`, the status
page, or a silence whose comment starts with `ACK!` (karma's convention).

For the API, read, decide, write: the firing alerts the matchers match, as
`GET /api/v2/alerts` shows them; an acknowledgement for each that has none live (the first
stands: a second one, or the same request retried, changes nothing); then each alert with
the acknowledgement it has now. The notifier tells the receivers at its next tick, and
makes the acknowledgements of active `ACK!` silences (`by_ack_silences`) for alerts that
start firing while they last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from trunkwatch.domain import alerts
from trunkwatch.domain.acks import Acknowledgement, is_ack_comment, live_by_fingerprint, note_of
from trunkwatch.domain.alerts import AlertView, Links
from trunkwatch.domain.config import Deployment
from trunkwatch.silences.matchers import Matcher, SilenceError
from trunkwatch.silences.model import Silence
from trunkwatch.storage.port import Storage


@dataclass(frozen=True)
class Acknowledged:
    """A firing alert and its live acknowledgement."""

    view: AlertView
    ack: Acknowledgement


@dataclass(frozen=True)
class AckRequest:
    """Who acknowledges what (matchers, as a silence's), with a note, through what."""

    matchers: tuple[Matcher, ...]
    by: str
    comment: str
    via: str


def acknowledge(
    storage: Storage, deployment: Deployment, request: AckRequest, now: datetime, links: Links
) -> list[Acknowledged]:
    """Acknowledge every firing alert `request` matches that has no live acknowledgement;
    each matched alert with the acknowledgement it has now (by fingerprint). Matchers that
    could match every alert are refused (SilenceError), as for a silence."""
    _check(request.matchers)
    matched = _firing(storage, deployment, now, links, request.matchers)
    for view in matched:
        if view.acknowledgement is None:
            ack = _acknowledgement(view, now, request.by, request.comment, request.via)
            storage.logs.add_ack(view.trunk, ack)  # False: another came first, and stands
    live = {trunk: live_by_fingerprint(storage.logs.acks(trunk)) for trunk in {v.trunk for v in matched}}
    return [
        Acknowledged(view, live[view.trunk][view.alert.fingerprint])
        for view in matched
        if view.alert.fingerprint in live[view.trunk]
    ]


def by_ack_silences(
    views: Sequence[AlertView], silences: Sequence[Silence], now: datetime
) -> list[tuple[AlertView, Acknowledgement]]:
    """The acknowledgements that active `ACK!` silences (of `silences`) make: one for each
    firing alert that one matches and that has none live, in the first one's name."""
    acking = [silence for silence in silences if is_ack_comment(silence.comment)]
    made = []
    for view in views:
        if view.alert.status != alerts.FIRING or view.acknowledgement is not None:
            continue
        silence = next((s for s in acking if s.matches(view.alert.labels)), None)
        if silence is not None:
            ack = _acknowledgement(
                view, now, silence.created_by, note_of(silence.comment), f"silence {silence.id}"
            )
            made.append((view, ack))
    return made


def _acknowledgement(view: AlertView, now: datetime, by: str, comment: str, via: str) -> Acknowledgement:
    alert = view.alert
    return Acknowledgement(alert.fingerprint, alert.name, alert.labels.get("job"), now, by, comment, via)


def _check(matchers: Sequence[Matcher]) -> None:
    if not matchers:
        raise SilenceError("at least one matcher is required")
    if all(matcher.matches_empty() for matcher in matchers):
        raise SilenceError("at least one matcher must not match the empty string")
    if all(matcher.matches_any_value() for matcher in matchers):
        raise SilenceError("these matchers would acknowledge every alert; match something specific")


def acknowledged(
    storage: Storage, deployment: Deployment, now: datetime, links: Links, matchers: Sequence[Matcher] = ()
) -> list[Acknowledged]:
    """The firing alerts (those `matchers` match) that are acknowledged, by fingerprint."""
    return [
        Acknowledged(view, view.acknowledgement)
        for view in _firing(storage, deployment, now, links, matchers)
        if view.acknowledgement is not None
    ]


def _firing(
    storage: Storage, deployment: Deployment, now: datetime, links: Links, matchers: Sequence[Matcher]
) -> list[AlertView]:
    # Imported here: the alert overview pulls in the evaluation code, which only these need.
    from trunkwatch.app.views import current_alerts

    views = current_alerts(storage, deployment, now, links)
    found = [
        view
        for view in views
        if view.alert.status == alerts.FIRING and all(m.matches(view.alert.labels) for m in matchers)
    ]
    return sorted(found, key=lambda view: view.alert.fingerprint)
