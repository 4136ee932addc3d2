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
Every answer and every count stays what it would have been.
"""

from __future__ import annotations

import bisect
import calendar
import contextlib
import json
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from moto import mock_aws
from moto.core.responses import ActionResult
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.responses import DynamoResult

ITEM_SIZE_LIMIT = 405000  # moto's own threshold (DynamoDB's 400 KB, as moto measures it)
# Responses that are DynamoDB JSON items already: written as they are.
PLAIN_JSON_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})


@contextlib.contextmanager
def emulation() -> Iterator[None]:
    """moto for every AWS client made in this process, from an empty account, with
    `fast_dynamodb`; the account is emptied again on the way out."""
    with mock_aws(), fast_dynamodb():
        yield


@contextlib.contextmanager
def fast_dynamodb() -> Iterator[None]:
    original, serialize = Table.query, DynamoResult.execute_result
    serialize_action = ActionResult.execute_result
    put, delete = Table.put_item, Table.delete_item
    build_item = Item.__init__
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
        if range_comparison == "BEGINS_WITH" and range_objs and range_objs[0].type == "S":
            prefix = range_objs[0].value
            names, keys = key_index(self, hash_key, partition)
            start = end = bisect.bisect_left(names, prefix)
            while end < len(names) and names[end].startswith(prefix):
                end += 1
            candidates = [partition[key] for key in keys[start:end]]
        else:
            candidates = list(partition.values())
        with lock:
            self.all_items = lambda: candidates  # type: ignore[method-assign]
            try:
                return original(self, hash_key, range_comparison, range_objs, *args, **kwargs)
            finally:
                del self.all_items

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

    ActionResult.execute_result = execute_action  # type: ignore[method-assign]
    Item.__init__ = _build_item  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]
    Table.put_item = forgetting(put)  # type: ignore[method-assign]
    Table.delete_item = forgetting(delete)  # type: ignore[method-assign]
    DynamoResult.execute_result = execute_result  # type: ignore[assignment]
    try:
        yield
    finally:
        Table.query = original  # type: ignore[method-assign]
        Table.put_item, Table.delete_item = put, delete  # type: ignore[method-assign]
        DynamoResult.execute_result = serialize  # type: ignore[method-assign]
        ActionResult.execute_result = serialize_action  # type: ignore[method-assign]
        Item.__init__ = build_item  # type: ignore[method-assign]


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
