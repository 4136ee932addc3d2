"""The receivers as channels: the stack's SNS topic and the configured ones (top-level
`receivers`).

Each receiver's type (channels/<type>.py, found through `channels.REGISTRY` when the
configuration was loaded) builds its channel; here it gets its matchers (parsed by the
silences' matcher engine, so a receiver and a silence read `team=~"infra.*"` the same way),
the secrets' resolver, and a unique name that keys its notification log: the type's own
name for it (from what the receiver is, not from its position), `-2`, `-3` for repeats.
Secrets are resolved only when a message is due, and cached (sources/credentials.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from trunkwatch.channels.base import Channel, Receiver, Route
from trunkwatch.domain.config import ConfigError, ReceiverConfig
from trunkwatch.silences.matchers import parse_matchers
from trunkwatch.sources.credentials import resolve_token


def receiver_channels(receivers: Sequence[ReceiverConfig]) -> list[Channel]:
    channels: list[Channel] = []
    seen: dict[str, int] = {}
    for receiver in receivers:
        base = receiver_name(receiver)
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base}-{seen[base]}"
        channels.append(_typed(receiver).channel(name, _route(receiver), resolve_token))
    return channels


def receiver_name(receiver: ReceiverConfig) -> str:
    # `#` separates the log key's parts (storage/keys.py).
    return _typed(receiver).log_name().replace("#", "_")


def _typed(receiver: ReceiverConfig) -> Receiver:
    if not isinstance(receiver, Receiver):  # only a hand-made base ReceiverConfig gets here
        raise ConfigError(f"receiver type {receiver.type!r} was not read with the receiver registry")
    return receiver


def _route(receiver: ReceiverConfig) -> Route:
    matchers = parse_matchers(list(receiver.matchers))
    return lambda labels: all(m.matches(labels) for m in matchers)
