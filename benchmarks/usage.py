"""Counting what the code asks of AWS: every botocore API call, and DynamoDB's request units.

`Meter` listens to every AWS call the process makes (botocore's public event hooks:
`trunkwatch_local.aws_calls`), so each call is counted under the label current at the time
(`Meter.as_` labels calls by the function that makes them; calls the code sends from its own
threads carry the label when they run in a copy of its context). Calls made under no label
(the benchmark's own set-up and the local stream pump) are not counted.

DynamoDB request units follow the on-demand billing rules, from item sizes as moto (which
runs in this process, behind both the harness and the local runtime) computes them:
- a write costs one unit per started KB of the larger of the item before and after it
  (minimum one, also for a failed conditional write); a transactional write costs double;
- GetItem costs one unit per started 4 KB of the item (0.5 unit per 4 KB eventually
  consistent, minimum 0.5 unit also when the item does not exist); a Query or Scan costs the
  same for the summed size of every item it evaluated, before any filter or projection.
Numbers are one byte per digit in moto's sizes (DynamoDB's own encoding is about half),
which slightly overstates items with many numbers.

Time: an invocation's wall time (`seconds`) includes the meter's own item sizing
(`meter_seconds`, left out of every reported time) and, with moto's in-process mock, the
emulator answering requests (`emulator_seconds`, the time any request was being answered:
requests sent from several threads at once count their shared time once); what remains is
the code's own time.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import boto3
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from pynamodb.models import Model

from trunkwatch_local import aws_calls

WRITE_UNIT_BYTES = 1024
STORAGE_OVERHEAD_BYTES = 100
READ_UNIT_BYTES = 4096
READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})

_label: contextvars.ContextVar[str | None] = contextvars.ContextVar("usage_label", default=None)
_sizing: contextvars.ContextVar[bool] = contextvars.ContextVar("usage_sizing", default=False)


@dataclass
class Usage:
    """What one labelled part of the code asked of AWS."""

    calls: Counter[str] = field(default_factory=Counter)  # "dynamodb.Query" -> requests
    items_written: int = 0
    items_read: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    invocations: int = 0  # Lambda invocations (for handler labels)
    seconds: float = 0.0  # wall time of those invocations
    emulator_seconds: float = 0.0  # of which moto (in-process) answering requests
    meter_seconds: float = 0.0  # of which this module sizing items
    # The same two as this thread's CPU time (`time.thread_time`), which other processes on
    # a shared machine do not inflate as they do wall time.
    emulator_cpu_seconds: float = 0.0
    meter_cpu_seconds: float = 0.0

    @property
    def wall_seconds(self) -> float:
        """Wall time less the meter's own bookkeeping: the time as if unmetered."""
        return max(0.0, self.seconds - self.meter_seconds)

    @property
    def code_seconds(self) -> float:
        """Wall time less the emulator's and the meter's: what the code itself spent."""
        return max(0.0, self.wall_seconds - self.emulator_seconds)

    def ddb(self, *operations: str) -> int:
        return sum(self.calls[f"dynamodb.{op}"] for op in operations)

    @property
    def ddb_requests(self) -> int:
        return sum(n for name, n in self.calls.items() if name.startswith("dynamodb."))

    @property
    def ddb_write_requests(self) -> int:
        return self.ddb(*WRITES)

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


class Meter:
    """While entered, counts AWS calls per label. Use one at a time."""

    def __init__(self) -> None:
        self.usage: dict[str, Usage] = {}
        self._sizes_before: dict[int, list[int]] = {}  # id(call) -> its write's item sizes
        self._clients: dict[str, Any] = {}  # region -> the meter's own DynamoDB client
        self._lock = threading.Lock()  # the counts, for calls made from several threads

    def __enter__(self) -> Meter:
        self._listening = aws_calls.listening(self)
        self._listening.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listening.__exit__(None, None, None)

    def get(self, label: str) -> Usage:
        return self.usage.setdefault(label, Usage())

    def take(self) -> dict[str, Usage]:
        """The usage counted so far, per label; counting starts again from zero."""
        taken, self.usage = self.usage, {}
        return taken

    @contextlib.contextmanager
    def as_(self, label: str) -> Iterator[Usage]:
        """Count the calls made inside under `label`."""
        token = _label.set(label)
        try:
            yield self.get(label)
        finally:
            _label.reset(token)

    def invoke(self, label: str, handler: Callable[[], Any]) -> Any:
        """Run one handler invocation under `label`, counting it and its wall time."""
        usage = self.get(label)
        started = time.perf_counter()
        try:
            with self.as_(label):
                return handler()
        finally:
            usage.invocations += 1
            usage.seconds += time.perf_counter() - started

    # aws_calls.Listener: the calls of the current label, not the meter's own.
    def _counted(self) -> Usage | None:
        label = _label.get()
        return None if label is None or _sizing.get() else self.get(label)

    def before(self, call: aws_calls.Call) -> None:
        usage = self._counted()
        if usage is None:
            return
        with self._lock:
            usage.calls[call.name] += 1
        if call.service == "dynamodb" and call.operation in WRITES:
            with self._sizing(usage):
                self._sizes_before[id(call)] = _write_sizes(call.region, call.operation, call.params)

    def answered(self, wall_seconds: float, cpu_seconds: float) -> None:
        usage = self._counted()
        if usage is not None:
            with self._lock:
                usage.emulator_seconds += wall_seconds
                usage.emulator_cpu_seconds += cpu_seconds

    def after(self, call: aws_calls.Call, response: dict[str, Any], failed: bool) -> None:
        usage = self._counted()
        if usage is None or call.service != "dynamodb" or call.operation not in READS | WRITES:
            return
        operation, params, region = call.operation, call.params, call.region
        if operation in WRITES:
            before = self._sizes_before.pop(id(call), [])
            if failed:
                # A failed (conditional) write still costs its units; nothing was written.
                with self._lock:
                    usage.write_units += _write_units(operation, before, before)
                return
            with self._sizing(usage):
                after = _write_sizes(region, operation, params)
            checks = _checks(params) if operation == "TransactWriteItems" else 0
            with self._lock:
                usage.write_units += _write_units(operation, before, after)
                usage.items_written += len(before) - checks
        elif not failed:
            with self._sizing(usage):
                items, units = self._read_cost(region, operation, params, response)
            with self._lock:
                usage.items_read += items
                usage.read_units += units

    @contextlib.contextmanager
    def _sizing(self, usage: Usage) -> Iterator[None]:
        """Bookkeeping of the meter itself, kept out of the code's and the emulator's time."""
        token = _sizing.set(True)
        started, cpu_started = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            with self._lock:
                usage.meter_seconds += time.perf_counter() - started
                usage.meter_cpu_seconds += time.thread_time() - cpu_started
            _sizing.reset(token)

    def _client(self, region: str) -> Any:
        """The meter's own client (its requests are not counted: they run while sizing)."""
        if region not in self._clients:
            self._clients[region] = boto3.client("dynamodb", region_name=region)
        return self._clients[region]

    def _read_cost(
        self, region: str, operation: str, params: dict[str, Any], response: dict[str, Any]
    ) -> tuple[int, float]:
        """(items read, read units) of one read request."""
        if operation == "GetItem":
            size = _size(region, params["TableName"], params["Key"])
            return int(size is not None), _read_units(size or 0, params.get("ConsistentRead", False))
        if operation in ("Query", "Scan"):
            evaluated = response.get("Items", [])
            table = params["TableName"]
            if any(k in params for k in _NOT_EVALUATED) and not _every_one_returned(
                region, table, evaluated, response
            ):
                bare = _evaluation(params)
                read = self._client(region).query if operation == "Query" else self._client(region).scan
                evaluated = read(**bare).get("Items", [])
            sizes = [_size(region, table, _key_of(region, table, item)) or 0 for item in evaluated]
            return len(sizes), _read_units(sum(sizes), params.get("ConsistentRead", False))
        if operation == "BatchGetItem":
            count, units = 0, 0.0
            for table, spec in params["RequestItems"].items():
                found = [_size(region, table, key) for key in spec["Keys"]]
                count += sum(size is not None for size in found)
                units += sum(_read_units(size or 0, spec.get("ConsistentRead", False)) for size in found)
            return count, units
        # TransactGetItems: strongly consistent, twice the units.
        got = [_size(region, g["Get"]["TableName"], g["Get"]["Key"]) for g in params["TransactItems"]]
        return sum(s is not None for s in got), 2 * sum(_read_units(s or 0, True) for s in got)


_NOT_EVALUATED = ("FilterExpression", "ProjectionExpression", "Select")


def _every_one_returned(
    region: str, table: str, items: list[dict[str, Any]], response: dict[str, Any]
) -> bool:
    """Whether the items returned are every one evaluated (the filter dropped none; a
    filter on the kind, as PynamoDB adds to every Query of a model, most often drops
    none), each with its key: then they are sized without reading them again."""
    if response.get("ScannedCount") != len(items) or not items:
        return False
    return all(name in item for item in items for name in _key_names(region, table))


def _evaluation(params: dict[str, Any]) -> dict[str, Any]:
    """The same Query or Scan without filter and projection: the items it evaluated."""
    bare = {k: v for k, v in params.items() if k not in _NOT_EVALUATED}
    used = set(re.findall(r"[#:]\w+", bare.get("KeyConditionExpression", "")))
    for placeholders in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        kept = {k: v for k, v in (bare.pop(placeholders, None) or {}).items() if k in used}
        if kept:
            bare[placeholders] = kept
    return bare


def _table(region: str, name: str) -> Any:
    return dynamodb_backends[DEFAULT_ACCOUNT_ID][region].get_table(name)


def _key_names(region: str, table_name: str) -> list[str]:
    table = _table(region, table_name)
    return [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])


def _key_of(region: str, table_name: str, item: dict[str, Any]) -> dict[str, Any]:
    return {name: item[name] for name in _key_names(region, table_name)}


def _size(region: str, table_name: str, key: dict[str, Any]) -> int | None:
    """Bytes of the stored item with `key`, None when there is none."""
    item = dynamodb_backends[DEFAULT_ACCOUNT_ID][region].get_item(table_name, key)
    return item.size() if item is not None else None


def _written_keys(region: str, operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(table, key) of every item a write request touches, in request order."""
    if operation == "PutItem":
        return [(params["TableName"], _key_of(region, params["TableName"], params["Item"]))]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(params["TableName"], params["Key"])]
    if operation == "BatchWriteItem":
        keys = []
        for table, requests in params["RequestItems"].items():
            for request in requests:
                if "PutRequest" in request:
                    keys.append((table, _key_of(region, table, request["PutRequest"]["Item"])))
                else:
                    keys.append((table, request["DeleteRequest"]["Key"]))
        return keys
    keys = []
    for entry in params["TransactItems"]:
        ((kind, spec),) = entry.items()
        key = _key_of(region, spec["TableName"], spec["Item"]) if kind == "Put" else spec["Key"]
        keys.append((spec["TableName"], key))
    return keys


def _write_sizes(region: str, operation: str, params: dict[str, Any]) -> list[int]:
    return [_size(region, table, key) or 0 for table, key in _written_keys(region, operation, params)]


def _write_units(operation: str, before: list[int], after: list[int]) -> float:
    factor = 2 if operation == "TransactWriteItems" else 1
    return factor * sum(
        max(1, math.ceil(max(old, new) / WRITE_UNIT_BYTES)) for old, new in zip(before, after, strict=True)
    )


def _checks(params: dict[str, Any]) -> int:
    return sum("ConditionCheck" in entry for entry in params["TransactItems"])


def _read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return units if consistent else units / 2


def stored_by_kind(region: str, table_name: str) -> dict[str, tuple[int, int]]:
    """(items, bytes) of the table's items per `kind`, with the 100 bytes of overhead per item
    that storage is billed for."""
    table = _table(region, table_name)
    found: dict[str, tuple[int, int]] = {}
    for partition in table.items.values():
        for item in partition.values():
            kind = item.attrs["kind"].value
            count, size = found.get(kind, (0, 0))
            found[kind] = (count + 1, size + item.size() + STORAGE_OVERHEAD_BYTES)
    return found


def item_bytes(model: Model) -> int:
    """The billed size of one PynamoDB item as DynamoDB would store it (sized as moto does)."""
    attrs = {name: DynamoType(value) for name, value in model.serialize().items()}
    return Item(attrs["pk"], attrs["sk"], attrs).size() + STORAGE_OVERHEAD_BYTES
