"""Every interleaving of concurrent writers' storage calls, deterministically.

Each writer runs in its own thread on a view of one storage whose gated calls wait for the
writer's turn; only the writer holding the turn runs, so everything between two gated calls
of one writer is atomic. A schedule picks, at each step, which waiting writer makes its next
gated call. `schedules` explores the tree of those choices depth first (a run follows a
prefix of choices, then takes the first waiting writer; every other choice it passed by is
explored later), so every distinct interleaving runs exactly once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from trunkwatch.storage.port import Storage

Writer = Callable[[Storage], object]
TIMEOUT_S = 10


@dataclass
class _Run:
    """One schedule's run: whose turn it is, who waits at a gated call, who finished."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    turn: int | None = None
    waiting: set[int] = field(default_factory=set)
    finished: set[int] = field(default_factory=set)
    errors: list[BaseException] = field(default_factory=list)

    def gate(self, writer: int) -> None:
        with self.cond:
            self.waiting.add(writer)
            self.turn = None
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: self.turn == writer, TIMEOUT_S):
                raise TimeoutError(f"writer {writer} never got its turn")
            self.waiting.discard(writer)

    def settled(self, writers: int) -> bool:
        """No writer running: each waits at a gated call or has finished."""
        return self.turn is None and len(self.waiting) + len(self.finished) == writers


class _Gated:
    """A store whose `calls` wait for the writer's turn first."""

    def __init__(self, store: object, calls: frozenset[str], gate: Callable[[], None]) -> None:
        self._store, self._calls, self._gate = store, calls, gate

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if name not in self._calls:
            return attribute

        def gated(*args: Any, **kwargs: Any) -> Any:
            self._gate()
            return attribute(*args, **kwargs)

        return gated


def _view(storage: Storage, gated: dict[str, frozenset[str]], gate: Callable[[], None]) -> Storage:
    stores = {f.name: getattr(storage, f.name) for f in fields(storage)}
    return Storage(
        **{
            name: _Gated(store, gated[name], gate) if name in gated else store
            for name, store in stores.items()
        }
    )


def run(
    setup: Callable[[], Storage], writers: list[Writer], gated: dict[str, frozenset[str]], prefix: list[int]
) -> tuple[Storage, list[int], list[list[int]]]:
    """Run `writers` on a fresh `setup()` storage, following the choices of `prefix`, then the
    first waiting writer. The storage after, the choices made and the options at each."""
    storage = setup()
    state = _Run()
    choices: list[int] = []
    options: list[list[int]] = []

    def body(index: int, writer: Writer) -> None:
        try:
            writer(_view(storage, gated, lambda: state.gate(index)))
        except BaseException as err:  # re-raised by the test's thread
            state.errors.append(err)
        with state.cond:
            state.finished.add(index)
            state.turn = None
            state.cond.notify_all()

    threads = [threading.Thread(target=body, args=(i, w), daemon=True) for i, w in enumerate(writers)]
    with state.cond:
        # Each writer runs alone up to its first gated call.
        for index, thread in enumerate(threads):
            state.turn = index
            thread.start()
            if not state.cond.wait_for(lambda started=index + 1: state.settled(started), TIMEOUT_S):
                raise TimeoutError("a writer did not reach its first storage call")
        while state.waiting:
            ready = sorted(state.waiting)
            step = len(choices)
            chosen = prefix[step] if step < len(prefix) else ready[0]
            assert chosen in ready, "a replayed prefix must meet the same choices"
            choices.append(chosen)
            options.append(ready)
            state.turn = chosen
            state.cond.notify_all()
            if not state.cond.wait_for(lambda: state.settled(len(writers)), TIMEOUT_S):
                raise TimeoutError("a writer did not finish its step")
    for thread in threads:
        thread.join(TIMEOUT_S)
    if state.errors:
        raise state.errors[0]
    return storage, choices, options


def schedules(
    setup: Callable[[], Storage], writers: list[Writer], gated: dict[str, frozenset[str]]
) -> Iterator[tuple[list[int], Storage]]:
    """Every interleaving of `writers`' gated calls: its choices and the storage after it."""
    pending: list[list[int]] = [[]]
    while pending:
        prefix = pending.pop()
        storage, choices, options = run(setup, writers, gated, prefix)
        for step in range(len(prefix), len(choices)):
            pending.extend([*choices[:step], other] for other in options[step] if other != choices[step])
        yield choices, storage


def serial(setup: Callable[[], Storage], writers: list[Writer]) -> Storage:
    """The writers run one after the other, in the order given."""
    storage = setup()
    for writer in writers:
        writer(storage)
    return storage
