"""moto, answering reads at DynamoDB-like cost, so wall times measure trunkwatch.

Two costs of moto 5 that DynamoDB does not have would otherwise be most of what the
benchmarks time at PyTorch scale (tens of thousands of cell items in one partition):
- `Table.query` sorts every item of the table on each Query and walks the sorted list
  (about half a second per Query). Inside `fast_reads()`, moto's own query is handed only
  the items of the queried partition (for `begins_with` on a string sort key, of that
  prefix, found in a sorted index of the partition's keys that is dropped on every put or
  delete); it still applies every key condition, filter, order, limit and page itself.
- its response serializer walks the API model for every attribute of every item (tens of
  milliseconds for a page of cells). Responses of item reads, which are DynamoDB JSON
  already, are written with `json.dumps` instead; the bytes parse to the same response.
Every answer and every count stays what it would have been.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoResult

# Responses that are DynamoDB JSON items already: written as they are.
PLAIN_JSON_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})


@contextlib.contextmanager
def fast_reads() -> Iterator[None]:
    original, serialize = Table.query, DynamoResult.execute_result
    put, delete = Table.put_item, Table.delete_item
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
