"""The PynamoDB base model and pointing every model at one table. PynamoDB keeps the table on
the model classes, so `dynamodb.open_table` (built at a function's edge) calls `bind`; until
then there is no table: a model used unbound raises `StorageNotBound` instead of reaching a
placeholder."""

from __future__ import annotations

from typing import Any

from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from trunkwatch.storage.errors import StorageNotBound
from trunkwatch.storage.keys import TTL_ATTRIBUTE


class BaseItem(Model):
    """Every item of the table; each subclass is one `kind` (PynamoDB polymorphism)."""

    class Meta:
        table_name = ""  # set by `bind`
        region: str | None = None
        host: str | None = None

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    kind = DiscriminatorAttribute()

    @classmethod
    def _get_connection(cls) -> Any:
        if not cls.Meta.table_name:
            raise StorageNotBound(
                f"{cls.__name__} used before a storage opened its table "
                "(storage.dynamodb.open_table, at the edge)"
            )
        return super()._get_connection()

    @classmethod
    def upsert(cls, pk: str, sk: str, actions: list[Action], condition: Condition | None = None) -> Any:
        """UpdateItem that also stamps `kind`, so an item created by an update is typed."""
        return cls(pk, sk).update(actions=[*actions, cls.kind.set(cls)], condition=condition)


def _all_models(cls: type[Model] = BaseItem) -> list[type[Model]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found.extend(_all_models(sub))
    return found


def bind(table_name: str, region: str | None = None, host: str | None = None) -> None:
    """Point every model at `table_name` (`host`: a local emulation's endpoint)."""
    for model in _all_models():
        model.Meta.table_name = table_name
        if region:
            model.Meta.region = region
        model.Meta.host = host
        model._connection = None


def connection() -> Connection:
    """The models' own connection to the bound table, for transactions: its botocore client
    is made once per binding (per warm container), not once per transaction."""
    return BaseItem._get_connection().connection


__all__ = ["TTL_ATTRIBUTE", "BaseItem", "StorageNotBound", "bind", "connection"]
