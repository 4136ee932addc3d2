"""Bearer-token authentication of the API (design.md §5).

Tokens are never stored: the tokens document holds their SHA-256 hex digests, each with the
principal it stands for and a scope (`read` or `write`). In AWS the document is the SSM
SecureString named by `API_TOKENS_PARAMETER`; locally it is the file given to `--tokens`:

    {"tokens": [{"sha256": "<hex digest of the token>", "principal": "alice", "scope": "write"}]}

A digest for a new token: `printf %s "$TOKEN" | sha256sum`. Nothing here logs a token.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any, ClassVar

# The configuration's checks (no validation library: this is the authorizer's import path).
from trunkwatch.domain.config import _Checked, _choice, _Invalid, _items, _nested, _pattern, _string

# A revoked token stops working at most this long after the parameter changes.
TOKENS_CACHE_SECONDS = 60


class Unauthorized(Exception):
    """No token, or one that is not in the tokens document (API Gateway answers 401)."""


class TokensError(ValueError):
    """The tokens document cannot be read or is malformed: every request is refused."""


def _principal(value: Any) -> str:
    if not 1 <= len(_string(value)) <= 256:
        raise ValueError("String should have 1 to 256 characters")
    return str(value)


@dataclass(frozen=True, kw_only=True)
class TokenEntry(_Checked):
    sha256: str  # lowercase hex SHA-256 of the token
    principal: str
    scope: str  # "read" or "write"

    CHECKS: ClassVar[dict[str, Any]] = {
        "sha256": _pattern(re.compile(r"^[0-9a-f]{64}$")),
        "principal": _principal,
        "scope": _choice("read", "write"),
    }


@dataclass(frozen=True, kw_only=True)
class TokensDocument(_Checked):
    tokens: tuple[TokenEntry, ...]

    CHECKS: ClassVar[dict[str, Any]] = {"tokens": _items(_nested(TokenEntry))}


@dataclass(frozen=True)
class Caller:
    principal: str
    scope: str


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_tokens(document: Any) -> TokensDocument:
    try:
        parsed: TokensDocument = TokensDocument.from_dict(document)
    except _Invalid as err:
        problems = "; ".join(f"{key or '(document)'}: {message}" for key, message in err.problems)
        raise TokensError(f"invalid API tokens document: {problems}") from None
    except ValueError as err:
        raise TokensError(f"invalid API tokens document: (document): {err}") from None
    return parsed


def tokens_from_parameter(name: str) -> TokensDocument:
    """The tokens document from SSM (decrypted, cached for TOKENS_CACHE_SECONDS)."""
    from aws_lambda_powertools.utilities import parameters  # boto3: loaded by the first call

    try:
        document = parameters.get_parameter(
            name, decrypt=True, transform="json", max_age=TOKENS_CACHE_SECONDS
        )
    except parameters.exceptions.TransformParameterError:
        raise TokensError(f"the API tokens parameter {name} is not JSON") from None
    except parameters.exceptions.GetParameterError as err:
        # Not created yet by the operator, or not readable: nobody is let in.
        raise TokensError(f"cannot read the API tokens parameter {name}: {err}") from None
    return parse_tokens(document)


def bearer_token(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token")
    return token.strip()


def authenticate(authorization: str | None, tokens: TokensDocument) -> Caller:
    """The caller named by an `Authorization: Bearer <token>` header value."""
    digest = token_hash(bearer_token(authorization))
    # Every entry is compared in constant time, so timing does not reveal near misses.
    found = [entry for entry in tokens.tokens if hmac.compare_digest(entry.sha256, digest)]
    if not found:
        raise Unauthorized("unknown token")
    return Caller(principal=found[0].principal, scope=found[0].scope)


def authorization_header(event: dict[str, Any]) -> str | None:
    """The Authorization header value of a TOKEN or a REQUEST authorizer event."""
    if event.get("type") == "TOKEN":
        return event.get("authorizationToken")
    headers = event.get("headers") or {}
    return next((value for name, value in headers.items() if name.lower() == "authorization"), None)


def allow_all(method_arn: str, caller: Caller) -> dict[str, Any]:
    """The authorizer's answer: an IAM policy allowing every method and path of the stage
    `method_arn` belongs to (`arn:...:api-id/stage/VERB/path` -> `arn:...:api-id/stage/*/*`),
    with the scope in the context."""
    prefix, _, path = method_arn.partition("/")
    stage = path.split("/", 1)[0]
    return {
        "principalId": caller.principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": [f"{prefix}/{stage}/*/*"]}
            ],
        },
        "context": {"scope": caller.scope},
    }
