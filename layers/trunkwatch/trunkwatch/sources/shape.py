"""Reading an API's JSON into plain frozen dataclasses (`Shape`): what the sources share.

Unknown fields are ignored; a missing or mistyped field that is read is a ShapeError naming
its dotted path, which a source turns into a `malformed` SourceError. No validation library:
this is the ingest function's path.
"""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime
from types import NoneType, UnionType
from typing import Any, Generic, TypeVar

from trunkwatch.net.rest import Page
from trunkwatch.sources.base import SourceError

T = TypeVar("T")


class ShapeError(ValueError):
    """Where (dotted path) and what is wrong, at most a few of them."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{where or '(body)'}: {what}" for where, what in problems))


def _datetime(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("Input should be a valid datetime")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("Input should be a valid datetime") from None
    if parsed.tzinfo is None:
        raise ValueError("Input should have timezone info")
    return parsed


def _read(kind: Any, value: Any, where: str) -> Any:
    """`value` as the type `kind` (str, int, datetime, X | None, list[X], a dataclass)."""
    origin = typing.get_origin(kind)
    if origin in (UnionType, typing.Union):
        options = typing.get_args(kind)
        if value is None and NoneType in options:
            return None
        return _read(next(o for o in options if o is not NoneType), value, where)
    if origin is list:
        if not isinstance(value, list):
            raise ShapeError([(where, "Input should be a valid list")])
        (item,) = typing.get_args(kind)
        return [_read(item, v, f"{where}.{i}" if where else str(i)) for i, v in enumerate(value)]
    if dataclasses.is_dataclass(kind):
        return _object(kind, value, where)
    try:
        if kind is datetime:
            return _datetime(value)
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError("Input should be a valid integer")
        if kind is str and not isinstance(value, str):
            raise ValueError("Input should be a valid string")
        if kind is bool and not isinstance(value, bool):
            raise ValueError("Input should be a valid boolean")
    except ValueError as err:
        raise ShapeError([(where, str(err))]) from None
    return value


def _object(cls: Any, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise ShapeError([(where, "Input should be a valid dictionary or object")])
    hints = _hints(cls)
    values: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for f in dataclasses.fields(cls):
        path = f"{where}.{f.name}" if where else f.name
        if f.name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                problems.append((path, "Field required"))
            continue
        try:
            values[f.name] = _read(hints[f.name], value[f.name], path)
        except ShapeError as err:
            problems += err.problems
    if problems:
        raise ShapeError(problems)
    return cls(**values)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


class Shape(Generic[T]):
    """A response shape: `Shape(list[CommitListEntry]).parse(json_value)`."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind

    def parse(self, data: Any) -> T:
        result: T = _read(self.kind, data, "")
        return result


def parsed(page: Page, shape: Shape[T]) -> T:
    """A page's JSON read as `shape`; a missing or mistyped field is a `malformed` error."""
    try:
        return shape.parse(page.data)
    except ShapeError as err:
        problems = "; ".join(f"{loc or '(body)'}: {what}" for loc, what in err.problems[:3])
        raise SourceError("malformed", f"{page.where}: unexpected response shape: {problems}") from None
