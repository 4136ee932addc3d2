"""What a settled tick starts (the notifier's use case): the trunk's due notifications
(`notify`), and at a sweep's tick its daily digest (`digest`, which delivers through
`notify`'s stages) and the heartbeat."""

from __future__ import annotations

from aws_lambda_powertools import Logger

from trunkwatch.app.notify import (
    RemainingSeconds,
    Tick,
    TickResult,
    channels_for,
    notify_trunk,
    receivers_for,
    send_heartbeat,
)
from trunkwatch.app.settings import Settings
from trunkwatch.domain.alerts import Links
from trunkwatch.domain.clock import Clock
from trunkwatch.domain.config import Deployment
from trunkwatch.domain.ticks import is_sweep_tick
from trunkwatch.storage.port import Storage

logger = Logger(child=True)


def on_settled_tick(
    storage: Storage,
    trunk_id: str,
    clock: Clock,
    settings: Settings,
    deployment: Deployment,
    remaining_s: RemainingSeconds,
    tick_id: str = "",
) -> TickResult | None:
    """A poll's evaluation or a sweep finished (`tick_id`: the settled tick's): notify its
    trunk; a sweep's tick (one per trunk every schedule period) then sends the trunk's daily
    digest and the heartbeat if they are due."""
    from trunkwatch.silences import store

    now = clock.now()
    trunk = deployment.trunk(trunk_id)
    result = None
    if trunk is None:
        logger.warning("tick of a trunk no longer configured", extra={"trunk": trunk_id})
    else:
        links = Links(settings.api_url, settings.dashboard_url)
        tick = Tick(storage, trunk, deployment.rule_for(trunk), links, now, clock, settings, remaining_s)
        result = notify_trunk(tick, store.active(storage.silences, now), channels_for(settings, deployment))
        if is_sweep_tick(tick_id):
            from trunkwatch.app.digest import digest_channels, send_digests

            send_digests(tick, digest_channels(receivers_for(settings, deployment)))
    if is_sweep_tick(tick_id) and deployment.heartbeat is not None:
        send_heartbeat(deployment.heartbeat, storage, clock, settings, remaining_s)
    return result
