"""The item models bound to one table.

PynamoDB reads a model's table from its class (`Meta`). `bind` makes, once per table, a
subclass of every model of `items.py` whose `Meta` names that table, on a base with its own
`kind` discriminator (PynamoDB keeps one registry of kinds per discriminator attribute, so
two tables' models never share one). A store is built on the `BoundModels` of its table and
uses only those: two storages on two tables work side by side in one process, and what a
store returns (a lazy Query iterator included) keeps reading its own table whenever it runs.
Conditions and update actions may name the attributes of the `items.py` classes: a bound
model shares them, all but `kind` (`kind.set` takes the bound model)."""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from typing import TypeVar, cast

from pynamodb.attributes import DiscriminatorAttribute
from pynamodb.connection import Connection

from trunkwatch.storage.items import BaseItem

M = TypeVar("M", bound=BaseItem)


@dataclass(frozen=True)
class Table:
    """One DynamoDB table as a storage opens it (`host`: a local emulation's endpoint)."""

    name: str
    region: str | None = None
    host: str | None = None


class BoundModels:
    """The models of `items.py` bound to one table, and the connection its transactions use."""

    def __init__(self, table: Table) -> None:
        self.table = table
        meta = type("Meta", (), {"table_name": table.name, "region": table.region, "host": table.host})
        # Every kind of the table (a Query that reads several kinds of one partition).
        self.any: type[BaseItem] = _subclass("Item", (BaseItem,), Meta=meta, kind=DiscriminatorAttribute())
        self._models: dict[type[BaseItem], type[BaseItem]] = {
            model: _subclass(
                model.__name__, (model, self.any), discriminator=BaseItem.kind.get_discriminator(model)
            )
            for model in BaseItem.kind.get_registered_subclasses(BaseItem)
        }
        self.connection = Connection(region=table.region, host=table.host)

    def model(self, item: type[M]) -> type[M]:
        """`item`'s model on this table."""
        return cast(type[M], self._models[item])


def _subclass(
    name: str, bases: tuple[type[BaseItem], ...], discriminator: str | None = None, **namespace: object
) -> type[BaseItem]:
    """A model class made here (`discriminator`: its kind, as in a class statement)."""
    keywords = {"discriminator": discriminator} if discriminator is not None else {}
    return types.new_class(name, bases, keywords, lambda ns: ns.update(__module__=__name__, **namespace))


@functools.cache
def bind(table: Table) -> BoundModels:
    """The models bound to `table`, made once per table (a warm container reuses them, and
    their connections)."""
    return BoundModels(table)
