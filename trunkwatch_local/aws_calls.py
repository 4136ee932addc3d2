"""Every AWS call this process makes through botocore, told to the listeners that want them
(crash injection, the benchmarks' meter) through botocore's public event hooks.

The handlers below join `botocore.handlers.BUILTIN_HANDLERS` when this module is imported
(as moto's do), so every client made afterwards emits to them: the call as made
(`before-parameter-build`, kept in the request's `context`), before it is sent
(`before-call`: a listener may raise to stop it), the wall and CPU time of the emulation
answering it (around moto's `before-send`), and its parsed answer (`after-call`: a
listener may raise to lose it).

They also let moto answer one request at a time: its backends are not thread-safe (two
writes answered at once, as a poll's pending cells are written, may share one stream
sequence number, and the tick counting them by it would never settle). The lock is taken
at the first `before-send`, given back at the last or at `after-call-error`.
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
_sending = threading.local()  # .wall_since, .cpu_since: when this thread's request went out


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
        _sending.wall_since = time.perf_counter()
        _sending.cpu_since = time.thread_time()


def _sending_answered(**_: Any) -> None:
    try:
        cpu_since = getattr(_sending, "cpu_since", None)
        if cpu_since is not None:
            _sending.cpu_since = None
            wall, cpu = time.perf_counter() - _sending.wall_since, time.thread_time() - cpu_since
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
