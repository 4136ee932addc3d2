"""moto, reading a Query's key range the way DynamoDB does, so wall times measure trunkwatch.

moto 5's `Table.query` sorts every item of the table on each Query and then walks the
sorted list. At PyTorch scale (tens of thousands of cell items in one partition) that is
about half a second per Query, so the emulator rather than the code would be what the
benchmarks time. Inside `key_range_queries()`, moto's own query is handed only the items
of the queried partition (and, for `begins_with` on a string sort key, of that prefix); it
still applies every key condition, filter, order, limit and page itself, so every answer
and every count is what it would have been.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from moto.dynamodb.models.table import Table


@contextlib.contextmanager
def key_range_queries() -> Iterator[None]:
    original = Table.query
    lock = threading.Lock()  # the candidates are lent through the table instance

    def query(self: Table, hash_key: Any, range_comparison: Any, range_objs: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[4] if len(args) > 4 else kwargs.get("index_name")
        if index_name or hash_key is None or not self.range_key_attr:
            return original(self, hash_key, range_comparison, range_objs, *args, **kwargs)
        partition = self.items[hash_key] if hash_key in self.items else {}
        if range_comparison == "BEGINS_WITH" and range_objs and range_objs[0].type == "S":
            prefix = range_objs[0].value
            candidates = [item for key, item in partition.items() if str(key.value).startswith(prefix)]
        else:
            candidates = list(partition.values())
        with lock:
            self.all_items = lambda: candidates  # type: ignore[method-assign]
            try:
                return original(self, hash_key, range_comparison, range_objs, *args, **kwargs)
            finally:
                del self.all_items

    Table.query = query  # type: ignore[method-assign]
    try:
        yield
    finally:
        Table.query = original  # type: ignore[method-assign]
