"""The local AWS emulation: moto in this process, answering reads at DynamoDB-like cost.

Costs of moto 5 that DynamoDB does not have would otherwise be most of what the local
runtime spends at PyTorch scale (tens of thousands of cell items, as many stream records):
- `Table.query` sorts every item of the table on each Query and walks the sorted list
  (about half a second per Query). Inside `fast_dynamodb()`, moto's own query is handed only
  the items of the queried partition (for `begins_with` on a string sort key, of that
  prefix, found in a sorted index of the partition's keys that is dropped on every put or
  delete); it still applies every key condition, filter, order, limit and page itself.
- building an item re-measures the whole item for each attribute it sets (moto's 400 KB
  check, quadratic in the attributes: a millisecond per cell item). Items are measured once,
  with the same sum and the same limit.
- its response serializer walks the API model for every attribute of every item (tens of
  milliseconds for a page of cells, about ten for each stream record). Responses of item
  reads and of the stream's GetRecords, which are DynamoDB JSON already, are written with
  `json.dumps` instead (a record's creation time as epoch seconds to the millisecond, the
  wire format); the bytes parse to the same response.
- a Query deep-copies every item it returns and measures each twice (for the 1 MB page
  limit). Within a Query the items are measured once and returned as they are stored (the
  response is built from them, nothing changes them).
Every answer and every count stays what it would have been.

What moto keeps that grows with the run, where DynamoDB's cost stays flat:
- `TransactWriteItems` deep-copies every table a transaction names, to restore it if the
  transaction is cancelled: a cost that grows with the table and its whole stream history.
  DynamoDB's transaction costs per item it names. Here moto keeps the table and the items
  the transaction names are copied instead; a cancelled transaction restores those items
  and drops the stream records it wrote, which is all moto's copy would have restored (and
  the stream's open iterators keep reading the same shard).
- a table's stream keeps every record written since the table was made. DynamoDB keeps
  stream records 24 hours. Here a record leaves the stream 24 hours (of the clock the
  emulation is given: the local runtime's simulated clock) after it was written, or once
  every consumer has read it
  (`release_stream`, which the local runtime's stream pump calls after each drain); the
  shard's first sequence number moves on, so TRIM_HORIZON starts at the oldest record kept
  and an iterator behind it gets DynamoDB's TrimmedDataAccessException.
- every GetRecords call leaves a new shard iterator in moto's backend, forever. DynamoDB's
  iterators expire 15 minutes after they are issued (ExpiredIteratorException); so do these.
- moto keeps every model object it ever made (each item version, each item copied into a
  response, each stream record and iterator) in a class-level list for its server's
  dashboard, until the account is reset. Inside `emulation()` the services the local
  runtime uses keep none (`untracked_models`); what the backends hold is unchanged.
"""

from __future__ import annotations

import bisect
import calendar
import contextlib
import copy
import importlib
import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from moto import mock_aws
from moto.core.exceptions import JsonRESTError
from moto.core.model_instances import model_data
from moto.core.responses import ActionResult
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import StreamShard, Table
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.responses import DynamoResult
from moto.dynamodbstreams.models import DynamoDBStreamsBackend

from trunkwatch.domain.clock import Clock, SystemClock

ITEM_SIZE_LIMIT = 405000  # moto's own threshold (DynamoDB's 400 KB, as moto measures it)
# Responses that are DynamoDB JSON items already: written as they are.
PLAIN_JSON_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})
STREAM_RETENTION = timedelta(hours=24)  # DynamoDB Streams keeps a record this long
ITERATOR_LIFETIME = timedelta(minutes=15)  # and a shard iterator is good for this long


@contextlib.contextmanager
def emulation(clock: Clock | None = None) -> Iterator[None]:
    """moto for every AWS client made in this process, from an empty account, with
    `fast_dynamodb` on `clock` (real time by default); the account is emptied again on the
    way out."""
    with mock_aws(), fast_dynamodb(clock), untracked_models():
        yield


# The services the local runtime uses.
SERVICES = ("dynamodb", "dynamodbstreams", "sqs", "sns", "ssm")


class _NotKept(list[Any]):
    """A model class's instance list that keeps nothing."""

    def append(self, instance: Any) -> None:
        pass


@contextlib.contextmanager
def untracked_models() -> Iterator[None]:
    """moto's models of `SERVICES` stop collecting their instances while this runs."""
    for service in SERVICES:  # their model classes exist (and are listed) once imported
        importlib.import_module(f"moto.{service}.models")
    classes = [model for service in SERVICES for model in model_data.get(service, {}).values()]
    kept = [(model, model.__dict__.get("instances_tracked")) for model in classes]
    for model in classes:
        model.instances_tracked = _NotKept()  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for model, instances in kept:
            model.instances_tracked = instances if instances is not None else []  # type: ignore[attr-defined]


@contextlib.contextmanager
def fast_dynamodb(clock: Clock | None = None) -> Iterator[None]:
    """moto's DynamoDB at DynamoDB-like cost (see above); stream retention and iterator
    expiry on `clock` (real time by default)."""
    time_of: Clock = clock or SystemClock()
    original = Table.query
    serialize, serialize_action = DynamoResult.execute_result, ActionResult.execute_result
    transact = DynamoDBBackend.transact_write_items
    lock = threading.Lock()  # the candidates are lent through the table instance
    # id(table) -> (table, {partition key: (sorted string sort keys, their DynamoTypes)});
    # forgotten whenever the table's key set may change.
    indexes: dict[int, tuple[Table, dict[Any, tuple[list[str], list[Any]]]]] = {}

    def key_index(table: Table, hash_key: Any, partition: dict[Any, Any]) -> tuple[list[str], list[Any]]:
        _, by_partition = indexes.setdefault(id(table), (table, {}))
        if hash_key not in by_partition:
            keys = sorted((key for key in partition if key.type == "S"), key=lambda key: key.value)
            by_partition[hash_key] = ([key.value for key in keys], keys)
        return by_partition[hash_key]

    def forgetting(write: Any) -> Any:
        def wrapped(self: Table, *args: Any, **kwargs: Any) -> Any:
            indexes.pop(id(self), None)
            return write(self, *args, **kwargs)

        return wrapped

    def query(
        self: Table, hash_key: Any, range_comparison: Any, range_objs: Any, *args: Any, **kwargs: Any
    ) -> Any:
        index_name = args[4] if len(args) > 4 else kwargs.get("index_name")
        if index_name or hash_key is None or not self.range_key_attr:
            return original(self, hash_key, range_comparison, range_objs, *args, **kwargs)
        partition = self.items.get(hash_key, {})  # .get: no new partition in the defaultdict
        by_prefix = range_comparison == "BEGINS_WITH" and range_objs and range_objs[0].type == "S"
        if by_prefix or (range_comparison is None and self.range_key_type == "S"):
            prefix = range_objs[0].value if by_prefix else ""
            names, keys = key_index(self, hash_key, partition)
            start = end = bisect.bisect_left(names, prefix)
            while end < len(names) and names[end].startswith(prefix):
                end += 1
            # moto's backend passes the limit, the start key and the direction positionally.
            limit, after, forward = args[:3] if len(args) >= 3 else (None, {}, True)
            after_key = (after or {}).get(self.range_key_attr, {}).get("S")
            if after is None or after_key is not None:
                start, end = _page(names, start, end, limit, after_key, forward is not False)
            candidates = [partition[key] for key in keys[start:end]]
        else:
            candidates = list(partition.values())
        with lock:
            self.all_items = lambda: candidates  # type: ignore[method-assign]
            _reading.sizes = {}
            try:
                return original(self, hash_key, range_comparison, range_objs, *args, **kwargs)
            finally:
                del self.all_items
                _reading.sizes = None

    def execute_result(self: DynamoResult, context: Any) -> Any:
        if context.operation_model.name not in PLAIN_JSON_READS:
            return serialize(self, context)
        try:
            body = json.dumps(self.result)
        except TypeError:  # binary values: base64 is the serializer's job
            return serialize(self, context)
        return 200, {"Content-Type": "application/x-amz-json-1.0"}, body

    def execute_action(self: ActionResult, context: Any) -> Any:
        if context.operation_model.name != "GetRecords":
            return serialize_action(self, context)
        body = json.dumps(self.result, default=_epoch_seconds)
        return 200, {"Content-Type": "application/x-amz-json-1.0"}, body

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        undo = _Undo(self, transact_items)
        with lock:  # moto's table backup is the table itself while this runs
            Table.__deepcopy__ = _same_table  # type: ignore[attr-defined]
            try:
                return transact(self, transact_items)
            except BaseException:
                undo.restore()
                for table in undo.tables:
                    indexes.pop(id(table), None)
                raise
            finally:
                del Table.__deepcopy__  # type: ignore[attr-defined]

    patches: list[tuple[Any, str, Any]] = [
        (ActionResult, "execute_result", execute_action),
        (DynamoResult, "execute_result", execute_result),
        (Item, "__init__", _build_item),
        (Table, "query", query),
        (Item, "__deepcopy__", _read_only_copy(Item.__deepcopy__)),
        (Item, "size", _measured_once(Item.size)),
        (Table, "put_item", forgetting(Table.put_item)),
        (Table, "delete_item", forgetting(Table.delete_item)),
        (DynamoDBBackend, "transact_write_items", transact_write_items),
        (StreamShard, "add", _retaining(StreamShard.add, time_of)),
        (StreamShard, "get", _trimmed_get(StreamShard.get)),
        (
            DynamoDBStreamsBackend,
            "get_shard_iterator",
            _expiring(DynamoDBStreamsBackend.get_shard_iterator, time_of),
        ),
        (DynamoDBStreamsBackend, "get_records", _expiring(DynamoDBStreamsBackend.get_records, time_of)),
    ]
    # What each class defines itself (None: it inherits the attribute, and will again).
    originals = [(owner, name, owner.__dict__.get(name)) for owner, name, _ in patches]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, was in originals:
            if was is None:
                delattr(owner, name)
            else:
                setattr(owner, name, was)


# While this thread runs a table Query: {id(item): size}, else None.
_reading = threading.local()


def _read_only_copy(deepcopy: Any) -> Any:
    """Item.__deepcopy__, but a Query's results are the stored items themselves: moto copies
    them only to build the response (and a projection makes new items), never to change them."""

    def wrapped(self: Item, memo: dict[int, Any]) -> Item:
        return self if getattr(_reading, "sizes", None) is not None else deepcopy(self, memo)

    return wrapped


def _measured_once(size: Any) -> Any:
    """Item.size, measured once per item within a Query (moto measures each result twice)."""

    def wrapped(self: Item) -> int:
        sizes = getattr(_reading, "sizes", None)
        if sizes is None:
            return int(size(self))
        if id(self) not in sizes:
            sizes[id(self)] = int(size(self))
        return int(sizes[id(self)])

    return wrapped


def _page(
    names: list[str], start: int, end: int, limit: int | None, after: str | None, forward: bool
) -> tuple[int, int]:
    """Of the matching sort keys names[start:end], the ones this page can reach: past the
    exclusive start key `after`, and at most one beyond the limit (which tells moto there is
    more)."""
    if after is not None:
        if forward:
            start = max(start, bisect.bisect_right(names, after))
        else:
            end = min(end, bisect.bisect_left(names, after))
    if limit:
        if forward:
            end = min(end, start + limit + 1)
        else:
            start = max(start, end - limit - 1)
    return start, end


def _same_table(self: Table, memo: dict[int, Any]) -> Table:
    return self


class _Undo:
    """What a transaction may change, taken before it runs: a copy of each item it names
    (None if absent) and where each named table's stream ends."""

    def __init__(self, backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        self.items: list[tuple[Table, Any, Any, bool, Item | None]] = []
        self.stream_ends: dict[int, tuple[StreamShard, int]] = {}
        self.tables: list[Table] = []
        for entry in transact_items:
            for operation in entry.values():
                table = (
                    backend.tables.get(str(operation.get("TableName")))
                    if isinstance(operation, dict)
                    else None
                )
                if table is None:
                    continue
                try:
                    named = operation["Item"] if "Item" in operation else operation["Key"]
                    hash_key = DynamoType(named[table.hash_key_attr])
                    range_key = DynamoType(named[table.range_key_attr]) if table.range_key_attr else None
                except (KeyError, TypeError):
                    continue  # moto refuses the operation itself; it writes nothing for it
                item = table.get_item(hash_key, range_key)
                self.items.append((table, hash_key, range_key, hash_key in table.items, copy.deepcopy(item)))
                self.tables.append(table)
                shard = table.stream_shard
                if shard is not None:
                    self.stream_ends[id(shard)] = (shard, shard.starting_sequence_number + len(shard.items))

    def restore(self) -> None:
        for table, hash_key, range_key, had_partition, item in reversed(self.items):
            stored: Any = table.items  # {hash: item}, or {hash: {range: item}} with a sort key
            if not table.range_key_attr:
                if item is None:
                    stored.pop(hash_key, None)
                else:
                    stored[hash_key] = item
                continue
            if item is not None:
                stored[hash_key][range_key] = item
                continue
            partition = stored.get(hash_key)
            if partition is not None:
                partition.pop(range_key, None)
                if not partition and not had_partition:
                    del stored[hash_key]
        for shard, end in self.stream_ends.values():
            del shard.items[max(0, end - shard.starting_sequence_number) :]


def _retaining(add: Any, clock: Clock) -> Any:
    """StreamShard.add, then records older than DynamoDB's 24 hours leave the stream."""

    def wrapped(self: StreamShard, old: Any, new: Any) -> None:
        add(self, old, new)
        now = clock.now()
        if self.items:
            self.items[-1].written_at = now  # type: ignore[attr-defined]
        cutoff = now - STREAM_RETENTION
        expired = 0
        while expired < len(self.items) and getattr(self.items[expired], "written_at", now) < cutoff:
            expired += 1
        _trim(self, expired)

    return wrapped


def _trim(shard: StreamShard, count: int) -> None:
    if count > 0:
        del shard.items[:count]
        shard.starting_sequence_number += count


def release_stream(stream_arn: str, through_sequence: int) -> None:
    """Every consumer has read the table's stream through `through_sequence`: drop those
    records (DynamoDB would keep them for the rest of their 24 hours; nobody reads them)."""
    table_name = stream_arn.split(":", 5)[5].split("/")[1]
    shard = dynamodb_backends[_account(stream_arn)][_region(stream_arn)].get_table(table_name).stream_shard
    if shard is not None:
        _trim(shard, min(len(shard.items), through_sequence + 1 - shard.starting_sequence_number))


def _account(arn: str) -> str:
    return arn.split(":")[4]


def _region(arn: str) -> str:
    return arn.split(":")[3]


def _trimmed_get(get: Any) -> Any:
    """StreamShard.get with DynamoDB's answer for an iterator behind the oldest record kept."""

    def wrapped(self: StreamShard, start: int, quantity: int) -> Any:
        if start < self.starting_sequence_number:
            raise JsonRESTError(
                "TrimmedDataAccessException",
                f"sequence number {start} is beyond the trim horizon of the stream "
                f"(the oldest record kept is {self.starting_sequence_number})",
            )
        return get(self, start, quantity)

    return wrapped


def _expiring(call: Any, clock: Clock) -> Any:
    """A streams backend call on the iterators not yet 15 minutes old (an older one gets
    DynamoDB's ExpiredIteratorException); the iterators it issues are stamped with the time."""

    def wrapped(self: DynamoDBStreamsBackend, *args: Any, **kwargs: Any) -> Any:
        now = clock.now()
        for arn, iterator in list(self.shard_iterators.items()):
            if now - iterator.__dict__.get("issued_at", now) > ITERATOR_LIFETIME:
                del self.shard_iterators[arn]
        if call.__name__ == "get_records" and args[0] not in self.shard_iterators:
            raise JsonRESTError("ExpiredIteratorException", "Iterator expired (issued over 15 minutes ago)")
        result = call(self, *args, **kwargs)
        for iterator in self.shard_iterators.values():
            iterator.__dict__.setdefault("issued_at", now)
        return result

    return wrapped


def _build_item(
    self: Item, hash_key: DynamoType, range_key: DynamoType | None, attrs: dict[str, Any]
) -> None:
    """moto's Item.__init__ with its size check done once for the whole item."""
    self.hash_key = hash_key
    self.range_key = range_key
    converted = {key: DynamoType(value) for key, value in attrs.items()}
    if sum(bytesize(key) + value.size() for key, value in converted.items()) > ITEM_SIZE_LIMIT:
        raise ItemSizeTooLarge
    self.attrs = LimitedSizeDict()
    dict.update(self.attrs, converted)  # later updates still go through moto's own check


def _epoch_seconds(value: Any) -> float:
    """A timestamp on the wire: epoch seconds truncated to milliseconds, as moto writes it."""
    if isinstance(value, datetime):
        return calendar.timegm(value.utctimetuple()) + value.microsecond // 1000 / 1000
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
