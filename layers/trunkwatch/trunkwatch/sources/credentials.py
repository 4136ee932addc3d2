"""Source tokens from where the configuration says they live (design.md §2, §7).

A value read from SSM or Secrets Manager is kept for five minutes, so a warm Lambda does not
call them on every poll and a rotated token is picked up within that time. Errors name the
variable, parameter or secret and the AWS error code, never a value.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from aws_lambda_powertools.utilities import parameters
from botocore.exceptions import BotoCoreError, ClientError

from trunkwatch.domain.config import ConfigError, TokenRef

CACHE_AGE = timedelta(minutes=5)
# What SSM or Secrets Manager answered, and when: a warm container's reads.
_read: dict[TokenRef, tuple[str, datetime]] = {}


def resolve_token(ref: TokenRef | None, now: datetime | None = None) -> str | None:
    """The token `ref` points at; None when the trunk has no token configured. One read from
    AWS less than CACHE_AGE before `now` (the current time by default) is used again."""
    if ref is None:
        return None
    if ref.env:
        if ref.env not in os.environ:
            raise ConfigError(f"token: environment variable {ref.env} is not set")
        return _non_empty(os.environ[ref.env], f"environment variable {ref.env}")
    now = now or datetime.now(UTC)
    read = _read.get(ref)
    if read is not None and now - read[1] < CACHE_AGE:
        return read[0]
    token = _from_aws(ref)
    _read[ref] = (token, now)
    return token


def forget_tokens() -> None:
    """Read every token from AWS again at its next use."""
    _read.clear()


def _from_aws(ref: TokenRef) -> str:
    if ref.ssm:
        where = f"SSM parameter {ref.ssm}"
        try:
            value = parameters.get_parameter(ref.ssm, decrypt=True, force_fetch=True)
        except (parameters.GetParameterError, BotoCoreError, ClientError) as err:
            raise ConfigError(f"token: cannot read {where}: {_reason(err)}") from None
        return _non_empty(value, where)
    assert ref.secret  # TokenRef guarantees exactly one of env, ssm, secret
    where = f"secret {ref.secret}"
    try:
        value = parameters.get_secret(ref.secret, force_fetch=True)
    except (parameters.GetParameterError, BotoCoreError, ClientError) as err:
        raise ConfigError(f"token: cannot read {where}: {_reason(err)}") from None
    return _non_empty(value, where)


def _non_empty(value: str | bytes, where: str) -> str:
    if isinstance(value, bytes):  # a SecretBinary
        try:
            value = value.decode()
        except UnicodeDecodeError:
            raise ConfigError(f"token: {where} is binary, not text") from None
    token = value.strip()
    if not token:
        raise ConfigError(f"token: {where} is empty")
    return token


def _reason(err: Exception) -> str:
    """The AWS error code (ParameterNotFound, AccessDeniedException, ...), not its message,
    which can carry account ids and role names."""
    cause = err if isinstance(err, ClientError | BotoCoreError) else err.__context__
    if isinstance(cause, ClientError):
        return str(cause.response.get("Error", {}).get("Code", "ClientError"))
    if isinstance(cause, BotoCoreError):
        return type(cause).__name__
    return type(err).__name__
