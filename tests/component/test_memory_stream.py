"""The in-memory store's stream (the local runtime's default store): its records, and the
local runtime's stream pump delivering them through the template's filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from trunkwatch.app import stream
from trunkwatch.domain.cells import Cell, CellState, CellWrite, Commit
from trunkwatch.domain.clock import SimulatedClock
from trunkwatch_local.memory_stream import MemoryStream, streamed_storage
from trunkwatch_local.pump import StreamPump
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
TRUNK = "pytorch/pytorch#main"
COMMIT = Commit(sha="a" * 40, time=NOW - timedelta(hours=1))


def write(state: str, poll: str = "p1") -> CellWrite:
    return CellWrite(Cell(job="pull / a", sha=COMMIT.sha, state=CellState(state)), COMMIT, 7, poll)


def test_cells_and_ticks_reach_the_templates_functions_through_the_pump() -> None:
    clock = SimulatedClock(NOW)
    changes = MemoryStream("arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/memory", clock)
    storage = streamed_storage(changes)
    delivered: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []

    def invoke(function: str, event: dict[str, Any]) -> dict[str, Any]:
        for record in event["Records"]:
            new, old = stream.image(record), stream.image(record, "OldImage")
            delivered.append((function, record["eventName"], new, old))
        return {"batchItemFailures": []}

    wiring = read_wiring(find_template())
    pump = StreamPump(changes, None, changes.arn, "dlq", "us-east-1", wiring.streams, invoke, changes.release)
    storage.ticks.open_poll(TRUNK, "p1", 1, NOW)
    storage.cells.save_all(TRUNK, [write("fail")], timedelta(days=30))
    storage.cells.save_all(TRUNK, [write("fail")], timedelta(days=30))  # no change: no record
    pump.drain()
    (cell,) = [(f, e, new, old) for f, e, new, old in delivered if new["kind"] == "cell"]
    assert cell[:2] == ("EvaluatorFunction", "INSERT") and cell[3] == {}
    assert (cell[2]["trunk"], cell[2]["job"], cell[2]["seq"], cell[2]["state"], cell[2]["poll"]) == (
        TRUNK,
        "pull / a",
        "7",
        "fail",
        "p1",
    )
    assert not [d for d in delivered if d[2]["kind"] == "tick"]  # open, not settled: filtered out
    assert changes.records == []  # every mapping read them: released

    delivered.clear()
    assert storage.ticks.count(TRUNK, "p1", ["101"], NOW)
    assert storage.ticks.settle(TRUNK, "p1", NOW)
    storage.cells.save_all(TRUNK, [write("pass", "p2")], timedelta(days=30))
    pump.drain()
    functions = sorted((f, e, new["kind"]) for f, e, new, _ in delivered)
    assert functions == [("EvaluatorFunction", "MODIFY", "cell"), ("NotifierFunction", "MODIFY", "tick")]
    (tick,) = [new for f, _, new, _ in delivered if f == "NotifierFunction"]
    assert (tick["trunk"], tick["poll"], tick["settled"]) == (TRUNK, "p1", True)
    (modified,) = [old for f, _, _, old in delivered if f == "EvaluatorFunction"]
    assert modified["state"] == "fail"
