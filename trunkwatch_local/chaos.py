"""Crash injection: calls that end the invocation making them, as a killed container, an
out-of-memory error or a timeout ends a Lambda.

Under `Chaos.invocation`, each AWS call (`trunkwatch_local.aws_calls`) and each store call
(`Chaos.storage`, for the in-memory store, which makes no AWS calls) dies with probability
`crash_rate`, half the time before the call (nothing written), half after it (the answer
lost). Every later call of that invocation dies too: a dead process reaches nothing, not
even from its `finally`. `InvocationDied` is a BaseException so no handler catches it. The
draws come from one seeded generator: the same seed dies at the same calls.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from trunkwatch.storage.port import Storage
from trunkwatch_local import aws_calls, store_calls

T = TypeVar("T")


class InvocationDied(BaseException):
    """The invocation's container died at a call."""


# The call whose success a crash right after it can hide: the message went out, and the
# invocation died before recording it, so it is sent again (the one duplicate allowed).
PUBLISH = "sns.Publish"


@dataclass
class Crash:
    function: str
    call: str  # service.Operation, or storage.<store>.<method>
    when: str  # "before" (nothing written) or "after" (written, the answer lost)
    after_publish: bool = False  # right after a publish that went out: it may be sent again


@dataclass
class ChaosStats:
    calls: int = 0  # calls made under chaos (the ones that died included)
    crashes: list[Crash] = field(default_factory=list)
    # What Lambda did about them (counted by the local runtime).
    stream_retries: int = 0
    dead_lettered: int = 0  # stream records sent to the DLQ
    dropped_schedule_events: int = 0  # scheduled invocations that died: never retried
    failed_deliveries: int = 0  # webhook invocations that died: GitHub does not redeliver
    recovery_ticks: list[datetime] = field(default_factory=list)  # schedule ticks run after crashes
    died_at: list[datetime] = field(default_factory=list)  # each crash's time on the runtime's clock

    @property
    def after_publish(self) -> int:
        """Crashes that came right after a message went out: each may send it once more."""
        return sum(crash.after_publish for crash in self.crashes)

    def line(self) -> str:
        before = sum(crash.when == "before" for crash in self.crashes)
        return (
            f"{len(self.crashes)} of {self.calls} calls killed their invocation "
            f"({before} before the call, {len(self.crashes) - before} after it; "
            f"{self.after_publish} right after a publish); "
            f"{self.stream_retries} stream batch retries, {self.dead_lettered} records dead-lettered, "
            f"{self.dropped_schedule_events} scheduled invocations lost, "
            f"{self.failed_deliveries} webhook deliveries failed"
        )


class Chaos:
    def __init__(
        self, seed: int, crash_rate: float, spared: Collection[str] = (), calls: Collection[str] = ()
    ) -> None:
        if not 0 <= crash_rate < 1:
            raise ValueError(f"crash rate must be at least 0 and below 1, not {crash_rate}")
        self.seed = seed
        self.crash_rate = crash_rate
        self.spared = frozenset(spared)  # logical ids of functions that never die
        # The calls (`service.Operation`) that may kill an invocation; none given: every call.
        self.calls = frozenset(calls)
        self.stats = ChaosStats()
        self._draws = random.Random(seed)  # noqa: S311 - reproducible draws, not secrets
        # .function while an invocation runs, .died once dead, .last_call, .dies_after
        self._local = threading.local()

    @contextlib.contextmanager
    def installed(self) -> Iterator[Chaos]:
        """This object hears of every AWS call while the block runs."""
        with aws_calls.listening(self):
            yield self

    def storage(self, storage: Storage) -> Storage:
        """`storage` with each store method a call that may kill the invocation making it."""
        return store_calls.each_call(storage, self._store_call)

    @contextlib.contextmanager
    def invocation(self, function: str) -> Iterator[None]:
        """The calls made in this block are `function`'s and may kill it (unless spared)."""
        if function in self.spared:
            yield
            return
        self._local.function, self._local.died, self._local.last_call = function, False, None
        try:
            yield
        finally:
            self._local.function = None

    def _store_call(self, name: str, make: Callable[[], T]) -> T:
        call = aws_calls.Call("storage", name, {}, "")
        self.before(call)
        result = make()
        self.after(call, {}, failed=False)
        return result

    # aws_calls.Listener
    def before(self, call: aws_calls.Call) -> None:
        """Draw for the call about to be made; it may die now (nothing made)."""
        name = call.name
        function = getattr(self._local, "function", None)
        self._local.dies_after = False
        if function is None:  # the runtime's own calls (the stream's poller, the topic's log)
            return
        if self._local.died:
            raise InvocationDied(f"{function} is dead; {name} was never made")
        self.stats.calls += 1
        # Drawn for every call, so that the same seed dies at the same calls with or without `calls`.
        dies = self._draws.random() < self.crash_rate and (not self.calls or name in self.calls)
        when = "before" if self._draws.random() < 0.5 else "after"
        if dies and when == "before":
            self._die(function, name, when, after_publish=self._local.last_call == PUBLISH)
        self._local.dies_after = dies

    def answered(self, wall_seconds: float, cpu_seconds: float) -> None:
        pass

    def after(self, call: aws_calls.Call, response: dict[str, Any], failed: bool) -> None:
        """The call was made; it may die now (the answer lost)."""
        function = getattr(self._local, "function", None)
        if function is None:
            return
        if self._local.dies_after:
            self._die(function, call.name, "after", after_publish=call.name == PUBLISH)
        self._local.last_call = call.name

    def _die(self, function: str, call: str, when: str, after_publish: bool) -> None:
        self._local.died = True
        self._local.dies_after = False
        self.stats.crashes.append(Crash(function, call, when, after_publish))
        raise InvocationDied(f"{function} died {when} {call}")
