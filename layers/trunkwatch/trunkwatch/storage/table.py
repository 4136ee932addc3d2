"""The PynamoDB base model, and the table its requests go to.

PynamoDB reads a model's table from its class (`Meta`). Here `Meta` reads it from the table
in use: the one of the DynamoDB store whose method is running (`TableStore`, a context
variable set for the call). Nothing is bound process-wide: two storages on two tables work
side by side in one process, and a model used outside a store raises `StorageNotBound`
instead of reaching whatever table was opened last."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute
from pynamodb.connection import Connection, TableConnection
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from trunkwatch.storage.errors import StorageNotBound
from trunkwatch.storage.keys import TTL_ATTRIBUTE

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(eq=False)
class Table:
    """One DynamoDB table as a storage opened it (`host`: a local emulation's endpoint), with
    its models' connections, made once per table and model class (per warm container)."""

    name: str
    region: str | None = None
    host: str | None = None
    connections: dict[type[Model], TableConnection] = field(default_factory=dict, repr=False)


_IN_USE: ContextVar[Table | None] = ContextVar("trunkwatch_table_in_use", default=None)


class _TableInUse:
    """Every model's `Meta`: PynamoDB reads the table's name, region and endpoint from it
    when it builds a connection and when it reads batch answers."""

    @property
    def table_name(self) -> str | None:
        table = _IN_USE.get()
        return table.name if table else None

    @property
    def region(self) -> str | None:
        table = _IN_USE.get()
        return table.region if table else None

    @property
    def host(self) -> str | None:
        table = _IN_USE.get()
        return table.host if table else None


class BaseItem(Model):
    """Every item of the table; each subclass is one `kind` (PynamoDB polymorphism)."""

    Meta = _TableInUse()  # type: ignore[assignment]  # PynamoDB only reads its attributes

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    kind = DiscriminatorAttribute()

    @classmethod
    def _get_connection(cls) -> Any:
        table = _IN_USE.get()
        if table is None:
            raise StorageNotBound(
                f"{cls.__name__} used outside a DynamoDB store (storage.dynamodb.open_table builds them)"
            )
        found = table.connections.get(cls)
        if found is None:
            cls._connection = None  # PynamoDB's own per-class cache holds another table's
            found = table.connections[cls] = super()._get_connection()
        return found

    @classmethod
    def upsert(cls, pk: str, sk: str, actions: list[Action], condition: Condition | None = None) -> Any:
        """UpdateItem that also stamps `kind`, so an item created by an update is typed."""
        return cls(pk, sk).update(actions=[*actions, cls.kind.set(cls)], condition=condition)


def _on_own_table(method: F) -> F:
    @functools.wraps(method)
    def on_table(self: TableStore, *args: Any, **kwargs: Any) -> Any:
        token = _IN_USE.set(self.table)
        try:
            return method(self, *args, **kwargs)
        finally:
            _IN_USE.reset(token)

    return on_table  # type: ignore[return-value]


class TableStore:
    """Base of the DynamoDB stores: each public method runs with the models on the store's
    own table. (No public method may return a lazy iterator: it would run after the call.)"""

    def __init__(self, table: Table) -> None:
        self.table = table

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in list(vars(cls).items()):
            if not name.startswith("_") and inspect.isfunction(member):
                if inspect.isgeneratorfunction(member):
                    raise TypeError(f"{cls.__name__}.{name}: a store method may not be a generator")
                setattr(cls, name, _on_own_table(member))


def connection() -> Connection:
    """The connection to the table in use, for transactions (inside a store's method)."""
    return BaseItem._get_connection().connection


__all__ = ["TTL_ATTRIBUTE", "BaseItem", "StorageNotBound", "Table", "TableStore", "connection"]
