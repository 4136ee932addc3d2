"""The silence shape the API accepts (Alertmanager's postableSilence), validated by pydantic.

Only the API's path imports this module (and pydantic): the pipeline functions read stored
silences (`model.Silence`) and never parse a posted one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from trunkwatch.domain.clock import parse_time
from trunkwatch.silences.matchers import MAX_NAME_LENGTH, MAX_VALUE_LENGTH, SilenceError
from trunkwatch.silences.model import MAX_COMMENT_LENGTH, MAX_CREATED_BY_LENGTH, MAX_MATCHERS


def _timestamp(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("expected an RFC 3339 timestamp string such as 2026-01-02T15:04:05Z")
    try:
        return parse_time(value)
    except (ValueError, OverflowError):
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp with a timezone") from None


def _utf8(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("text is not valid UTF-8") from None
    return value


Timestamp = Annotated[datetime, BeforeValidator(_timestamp)]
Text = Annotated[StrictStr, BeforeValidator(_utf8)]


class MatcherBody(BaseModel):
    """One matcher as Alertmanager's API writes it."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: Text = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    value: Text = Field(max_length=MAX_VALUE_LENGTH)
    is_regex: StrictBool = Field(False, alias="isRegex")
    is_equal: StrictBool = Field(True, alias="isEqual")


class PostableSilence(BaseModel):
    """Alertmanager's postableSilence; `id` updates that silence, `createdBy` defaults to the caller."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: Text | None = None
    matchers: list[MatcherBody] = Field(min_length=1, max_length=MAX_MATCHERS)
    starts_at: Timestamp | None = Field(None, alias="startsAt")
    ends_at: Timestamp = Field(alias="endsAt")
    created_by: Text | None = Field(None, alias="createdBy", min_length=1, max_length=MAX_CREATED_BY_LENGTH)
    comment: Text = Field(min_length=1, max_length=MAX_COMMENT_LENGTH)


def describe_errors(errors: Sequence[Any]) -> str:
    """Pydantic errors as one sentence naming each field that is wrong."""
    problems = []
    for error in errors:
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        kind = error.get("type")
        if kind == "json_invalid":
            problems.append("request body is not valid JSON")
        elif kind == "extra_forbidden":
            problems.append(f"unknown field {where!r}")
        elif kind == "missing":
            problems.append(f"{where or 'request body'} is required")
        elif where == "matchers" and kind == "too_short":
            problems.append("at least one matcher is required")
        elif where == "matchers" and kind == "too_long":
            problems.append(f"too many matchers (at most {MAX_MATCHERS})")
        else:
            message = str(error.get("msg", "is invalid")).removeprefix("Value error, ")
            problems.append(f"{where or 'request body'}: {message}")
    return "; ".join(problems) or "invalid request"


def parse_postable(data: Any) -> PostableSilence:
    if isinstance(data, PostableSilence):
        return data
    if not isinstance(data, dict):
        raise SilenceError("a silence must be a JSON object")
    try:
        return PostableSilence.model_validate(data)
    except ValidationError as err:
        raise SilenceError(describe_errors(err.errors())) from None
