"""EventBridge schedule expressions, as far as the local runtime needs them."""

from __future__ import annotations

import re

from trunkwatch.domain.config import ConfigError

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86400}


def period_seconds(expression: str) -> float:
    """Seconds between ticks of a `rate(...)` expression (cron has no fixed period)."""
    match = _RATE.match(expression.strip())
    if not match:
        raise ConfigError(
            f"schedule {expression!r}: the local runtime runs rate(N minutes|hours|days) schedules only"
        )
    count, unit = int(match.group(1)), match.group(2).rstrip("s")
    if count < 1 or (count == 1) != (match.group(2) == unit):
        raise ConfigError(f"schedule {expression!r}: use 'rate(1 {unit})' or 'rate(N {unit}s)'")
    return float(count * _UNIT_S[unit])
