"""Every AWS call this process makes through botocore, told to the listeners that want them
(crash injection, `trunkwatch_local.chaos`; the benchmarks' meter), through botocore's
public event hooks.

botocore registers the handlers of `botocore.handlers.BUILTIN_HANDLERS` on each session it
makes (moto adds its own stand-in there the same way); the handlers below join them when this
module is imported, so every client made afterwards, boto3's, Powertools' and PynamoDB's
alike, emits to them. They do nothing while no listener is attached (`listening`):
- `before-parameter-build`: the call as its caller made it (`Call`, kept in botocore's
  per-request `context` for the events after it);
- `before-call`: the request is about to be sent (a listener may raise to stop it);
- `before-send`, first and last: around the emulation answering the request (moto's
  handler of the same event), its wall and CPU time (one request at a time, see below;
  each told the wall time not told yet, so the parts add up to the time any request was
  being answered);
- `after-call`: the answer, parsed, before botocore returns it or raises its error (a listener
  may raise to lose it).

They also let moto answer one request at a time, whatever the listeners: its backends are
not thread-safe (two DynamoDB writes answered at once, as a poll's pending cells are
written, may give two stream records one sequence number, and the tick that counts them by
that number would never settle). The lock is taken at the first `before-send` and given
back at the last, or at `after-call-error` when the sending raised in between.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import boto3
from botocore import handlers

_CONTEXT_KEY = "trunkwatch_call"


@dataclass(frozen=True)
class Call:
    service: str  # "dynamodb", "sns", ...
    operation: str  # "Query", "Publish", ...
    params: dict[str, Any]  # as the caller passed them
    region: str

    @property
    def name(self) -> str:
        return f"{self.service}.{self.operation}"


class Listener(Protocol):
    def before(self, call: Call) -> None: ...
    def answered(self, wall_seconds: float, cpu_seconds: float) -> None: ...
    def after(self, call: Call, response: dict[str, Any], failed: bool) -> None: ...


_listeners: list[Listener] = []
_emulating = threading.Lock()  # held while moto answers a request
_holding = threading.local()  # .lock: whether this thread holds `_emulating`
_sending = threading.local()  # .cpu_since: this thread's CPU time when its request went out


class _Answering:
    """The requests being answered, in any thread, and since when their wall time is untold."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.untold_since = 0.0

    def started(self) -> None:
        with self.lock:
            if not self.requests:
                self.untold_since = time.perf_counter()
            self.requests += 1

    def answered(self) -> float:
        """The wall time since the last request answered (or since this one started)."""
        with self.lock:
            now = time.perf_counter()
            wall, self.untold_since = now - self.untold_since, now
            self.requests -= 1
            return wall


_answering = _Answering()


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """`listener` is told of every AWS call while the block runs."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def _parameters_built(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    if _listeners:
        service = model.service_model.service_name
        context[_CONTEXT_KEY] = Call(service, model.name, params, str(context.get("client_region")))


def _before_call(context: dict[str, Any], **_: Any) -> None:
    call = context.get(_CONTEXT_KEY)
    if call is not None:
        for listener in list(_listeners):
            listener.before(call)


def _sending_started(**_: Any) -> None:
    if not getattr(_holding, "lock", False):
        _emulating.acquire()
        _holding.lock = True
    if _listeners:
        _answering.started()
        _sending.cpu_since = time.thread_time()


def _sending_answered(**_: Any) -> None:
    try:
        cpu_since = getattr(_sending, "cpu_since", None)
        if cpu_since is not None:
            _sending.cpu_since = None
            wall, cpu = _answering.answered(), time.thread_time() - cpu_since
            for listener in list(_listeners):
                listener.answered(wall, cpu)
    finally:
        _release()


def _after_call(http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    call = context.get(_CONTEXT_KEY)
    if call is not None:
        for listener in list(_listeners):
            listener.after(call, parsed, failed=http_response.status_code >= 300)


def _call_failed(**_: Any) -> None:
    _release()


def _release() -> None:
    if getattr(_holding, "lock", False):
        _holding.lock = False
        _emulating.release()


HANDLERS: list[tuple[Any, ...]] = [
    ("before-parameter-build", _parameters_built),
    ("before-call", _before_call),
    ("before-send", _sending_started, handlers.REGISTER_FIRST),
    ("before-send", _sending_answered, handlers.REGISTER_LAST),
    ("after-call", _after_call),
    ("after-call-error", _call_failed),
]


def _install() -> None:
    """Join botocore's handlers of every new session (once per process), and those of boto3's
    default session if one was made already (its later clients see them)."""
    if HANDLERS[0] in handlers.BUILTIN_HANDLERS:
        return
    handlers.BUILTIN_HANDLERS.extend(HANDLERS)
    session = boto3.DEFAULT_SESSION
    if session is not None:
        for event, handler, *order in HANDLERS:
            if order == [handlers.REGISTER_FIRST]:
                session.events.register_first(event, handler)
            elif order == [handlers.REGISTER_LAST]:
                session.events.register_last(event, handler)
            else:
                session.events.register(event, handler)


_install()
