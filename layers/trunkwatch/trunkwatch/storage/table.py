"""Binding the PynamoDB models to the table named in the environment (or by the caller)."""

from __future__ import annotations

import os
from typing import Any

from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model

TTL_ATTRIBUTE = "expires_at"


class BaseItem(Model):
    """Every item of the table; each subclass is one `kind` (PynamoDB polymorphism)."""

    class Meta:
        table_name = os.environ.get("TABLE_NAME", "trunkwatch")
        region = os.environ.get("AWS_REGION", os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
        host = os.environ.get("DYNAMODB_ENDPOINT") or None

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    kind = DiscriminatorAttribute()

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
    """Point every model at `table_name` (the local runtime binds to the emulator)."""
    for model in _all_models():
        model.Meta.table_name = table_name
        if region:
            model.Meta.region = region
        model.Meta.host = host
        model._connection = None


def connection() -> Connection:
    """A connection to the bound table's endpoint, for transactions."""
    return Connection(region=BaseItem.Meta.region, host=BaseItem.Meta.host)


def trunk_pk(trunk_id: str) -> str:
    return f"TRUNK#{trunk_id}"


def seq_key(seq: int) -> str:
    return f"{seq:08d}"


__all__ = ["TTL_ATTRIBUTE", "BaseItem", "bind", "connection", "seq_key", "trunk_pk"]
