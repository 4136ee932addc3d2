"""Powertools' idempotency records on the runtime's simulated clock.

Powertools times its records out on the wall clock (`datetime.now()` in its idempotency
modules): the record's expiry, and how long an in-progress record left by a dead invocation
blocks the next delivery of the same transition. A replay runs hours of simulated time in
seconds of wall time, so on the wall clock such a record would block for the whole replay.
While the runtime runs, those modules read the simulated clock instead, the way a deployed
notifier would see time pass. Verified against the Powertools version of the lock
(`readers` checks that each still reads it that way)."""

from __future__ import annotations

import contextlib
import datetime as real_datetime
import importlib
import types
from collections.abc import Callable, Iterator

# The idempotency modules that read the clock, each as `dt` (`import datetime as dt`).
READERS = (
    "aws_lambda_powertools.utilities.idempotency.base",
    "aws_lambda_powertools.utilities.idempotency.persistence.base",
    "aws_lambda_powertools.utilities.idempotency.persistence.dynamodb",
    "aws_lambda_powertools.utilities.idempotency.persistence.datarecord",
)


def readers() -> list[types.ModuleType]:
    """The modules, each checked to read the clock the way this module replaces."""
    found = []
    for name in READERS:
        module = importlib.import_module(name)
        if getattr(module, "dt", None) is not real_datetime:
            raise RuntimeError(f"{name} no longer reads the clock as `dt.datetime.now()`")
        found.append(module)
    return found


@contextlib.contextmanager
def simulated(now: Callable[[], real_datetime.datetime]) -> Iterator[None]:
    """While the block runs, Powertools' idempotency reads `now()` (an aware datetime)."""

    class SimulatedDatetime(real_datetime.datetime):
        @classmethod
        def now(cls, tz: real_datetime.tzinfo | None = None) -> SimulatedDatetime:
            return cls.fromtimestamp(now().timestamp(), tz)  # naive local time without `tz`, as Python's

    shim = types.ModuleType("datetime")
    shim.__dict__.update(real_datetime.__dict__)
    shim.datetime = SimulatedDatetime  # type: ignore[attr-defined]
    modules = readers()
    for module in modules:
        module.dt = shim  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in modules:
            module.dt = real_datetime  # type: ignore[attr-defined]
