"""Acknowledgements (design.md §4.3): someone said they are on a firing alert, with a note.

An acknowledgement stops the alert's reminders, never its updates or its resolution; it is
told once to the receivers that take acknowledgements (PagerDuty's `acknowledge`, a line in
Slack) and shown in every later message of the alert; it ends with the episode, when the
notifier first sees the alert no longer firing. One at a time per alert: the first stands
until it ends. Pure values and rules; the notifier and the API do the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from trunkwatch.domain.clock import format_time

# karma's convention: a silence whose comment starts with this acknowledges what it matches.
ACK_PREFIX = "ACK!"
# The notification reason of the transition that tells a receiver of the acknowledgement.
ACKNOWLEDGED = "acknowledged"
# What the alerts' annotations say of their acknowledgement, in every message after it.
BY_ANNOTATION = "acknowledged_by"
AT_ANNOTATION = "acknowledged_at"
NOTE_ANNOTATION = "acknowledged_note"
VIA_API = "api"


@dataclass(frozen=True)
class Acknowledgement:
    """Who acknowledged the alert of `fingerprint`, when, with what note, and through what
    (`api`, or `silence <id>` for an `ACK!` silence); `ended_at` once its episode ended."""

    fingerprint: str
    alertname: str
    job: str | None
    at: datetime
    by: str
    comment: str
    via: str = VIA_API
    ended_at: datetime | None = None

    @property
    def live(self) -> bool:
        return self.ended_at is None

    @property
    def key(self) -> str:
        """Which acknowledgement a receiver's log says it was told of."""
        return format_time(self.at)

    def annotations(self) -> dict[str, str]:
        return {
            BY_ANNOTATION: self.by,
            AT_ANNOTATION: format_time(self.at),
            NOTE_ANNOTATION: self.comment,
        }

    def ended(self, at: datetime) -> Acknowledgement:
        return replace(self, ended_at=at)


def is_ack_comment(comment: str) -> bool:
    """Whether a silence with this comment is an acknowledgement (karma's `ACK!`)."""
    return comment.startswith(ACK_PREFIX)


def note_of(comment: str) -> str:
    """An `ACK!` silence's comment without its marker: the acknowledgement's note."""
    return comment.removeprefix(ACK_PREFIX).strip() if is_ack_comment(comment) else comment


def live_by_fingerprint(acks: Iterable[Acknowledgement]) -> dict[str, Acknowledgement]:
    return {ack.fingerprint: ack for ack in acks if ack.live}


def over(acks: Iterable[Acknowledgement], firing: Sequence[str]) -> list[Acknowledgement]:
    """The live acknowledgements whose alert no longer fires (is none of the `firing`
    fingerprints): their episode is over."""
    still = set(firing)
    return [ack for ack in acks if ack.live and ack.fingerprint not in still]
