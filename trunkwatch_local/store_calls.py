"""Every call of a `Storage`'s stores, through one function: crash injection
(`trunkwatch_local.chaos`) and the benchmarks' count of store calls wrap the storage port
this way, not the library below it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from trunkwatch.storage.port import Storage

T = TypeVar("T")


class Around(Protocol):
    def __call__(self, name: str, make: Callable[[], T]) -> T: ...


def each_call(storage: Storage, around: Around) -> Storage:
    """`storage` whose every store method runs as `around("<store>.<method>", make)`, `make`
    making the call."""
    stores = {part.name: getattr(storage, part.name) for part in dataclasses.fields(storage)}
    wrapped = {name: _Store(name, store, around) for name, store in stores.items()}
    return dataclasses.replace(storage, **wrapped)


class _Store:
    def __init__(self, name: str, store: Any, around: Around) -> None:
        self._name, self._store, self._around = name, store, around

    def __getattr__(self, method: str) -> Any:
        found = getattr(self._store, method)
        if method.startswith("_") or not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._around(f"{self._name}.{method}", lambda: found(*args, **kwargs))

        return call
