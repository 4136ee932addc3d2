"""Bearer-token authentication: the Lambda authorizer, the API's write scope, and the local gateway."""

from __future__ import annotations

import json
import logging
import logging.handlers
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters

from tests.support.aws import table_items
from tests.support.peers import READER, call_api, invoke, load_function
from trunkwatch.api import auth
from trunkwatch.domain.clock import format_time
from trunkwatch.silences import store
from trunkwatch_local.apigw import serve_api
from trunkwatch_local.runtime import ACCOUNT

PARAMETER = "/trunkwatch/api-tokens"
METHOD_ARN = f"arn:aws:execute-api:us-east-1:{ACCOUNT}:abcdef1234/v1/POST/api/v2/silences"
SILENCE = {
    "matchers": [{"name": "job", "value": "pull / .*", "isRegex": True}],
    "endsAt": format_time(datetime.now(UTC) + timedelta(days=1)),
    "comment": "known breakage",
}


@pytest.fixture
def tokens() -> dict[str, str]:
    """Fresh random tokens for this test (none is ever written to a file)."""
    return {"write": secrets.token_urlsafe(24), "read": secrets.token_urlsafe(24)}


def document(tokens: dict[str, str]) -> dict[str, Any]:
    return {
        "tokens": [
            {"sha256": auth.token_hash(tokens["write"]), "principal": "alice", "scope": "write"},
            {"sha256": auth.token_hash(tokens["read"]), "principal": "bob", "scope": "read"},
        ]
    }


@pytest.fixture
def authorizer(
    aws: dict[str, Any], tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[Any]]:
    """The tokens document in SSM as a SecureString; yields the authorizer's log records."""
    monkeypatch.setenv("API_TOKENS_PARAMETER", PARAMETER)
    boto3.client("ssm").put_parameter(Name=PARAMETER, Type="SecureString", Value=json.dumps(document(tokens)))
    parameters.clear_caches()
    records = logging.handlers.BufferingHandler(capacity=1000)
    records.setLevel(logging.DEBUG)
    log = logging.getLogger(load_function("authorizer").logger.name)
    # At the template's default LogLevel: the functions share this logger, and one loaded by an
    # earlier test of this process may have left it at the local runtime's WARNING.
    level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(records)
    yield records.buffer
    log.removeHandler(records)
    log.setLevel(level)
    parameters.clear_caches()


def token_event(authorization: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "TOKEN", "methodArn": METHOD_ARN}
    if authorization is not None:
        event["authorizationToken"] = authorization
    return event


def request_event(headers: dict[str, str]) -> dict[str, Any]:
    return {"type": "REQUEST", "methodArn": METHOD_ARN, "headers": headers, "httpMethod": "POST"}


def test_valid_token_gets_an_allow_policy_with_principal_and_scope(
    authorizer: list[Any], tokens: dict[str, str]
) -> None:
    policy = invoke("authorizer", token_event(f"Bearer {tokens['write']}"))
    assert policy["principalId"] == "alice"
    assert policy["context"] == {"scope": "write"}
    [statement] = policy["policyDocument"]["Statement"]
    assert statement["Effect"] == "Allow" and statement["Action"] == "execute-api:Invoke"
    assert statement["Resource"] == [f"arn:aws:execute-api:us-east-1:{ACCOUNT}:abcdef1234/v1/*/*"]


def test_read_token_is_let_through_with_read_scope(authorizer: list[Any], tokens: dict[str, str]) -> None:
    policy = invoke("authorizer", request_event({"authorization": f"bearer {tokens['read']}"}))
    assert (policy["principalId"], policy["context"]) == ("bob", {"scope": "read"})


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Basic YWxpY2U6c2VjcmV0", "Bearer unknown-token-value"],
)
def test_missing_or_unknown_token_is_unauthorized(authorizer: list[Any], authorization: str | None) -> None:
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        invoke("authorizer", token_event(authorization))
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        invoke("authorizer", request_event({"Authorization": authorization} if authorization else {}))


def test_tokens_never_reach_the_logs(authorizer: list[Any], tokens: dict[str, str]) -> None:
    invoke("authorizer", token_event(f"Bearer {tokens['write']}"))
    with pytest.raises(Exception, match="Unauthorized"):
        invoke("authorizer", token_event(f"Bearer {tokens['write']}x"))
    logged = " ".join(f"{record.getMessage()} {record.__dict__}" for record in authorizer)
    assert "API request not authenticated" in logged
    assert tokens["write"] not in logged and tokens["read"] not in logged


def test_malformed_tokens_document_denies_with_an_error_naming_the_problem(
    authorizer: list[Any], tokens: dict[str, str]
) -> None:
    bad = {"tokens": [{"sha256": "abc", "principal": "alice", "scope": "admin", "note": "x"}]}
    boto3.client("ssm").put_parameter(
        Name=PARAMETER, Type="SecureString", Value=json.dumps(bad), Overwrite=True
    )
    parameters.clear_caches()
    with pytest.raises(Exception, match=r"^Unauthorized$"):  # API Gateway's 401, not a crash (500)
        invoke("authorizer", token_event(f"Bearer {tokens['write']}"))
    (record,) = [r for r in authorizer if r.levelname == "ERROR"]
    message = str(record.__dict__.get("error"))
    assert "tokens.0.sha256" in message and "tokens.0.scope" in message and "tokens.0.note" in message


def test_a_missing_tokens_parameter_denies_with_a_log_line_naming_it(
    authorizer: list[Any], tokens: dict[str, str]
) -> None:
    boto3.client("ssm").delete_parameter(Name=PARAMETER)
    parameters.clear_caches()
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        invoke("authorizer", token_event(f"Bearer {tokens['write']}"))
    (record,) = [r for r in authorizer if r.levelname == "ERROR"]
    assert PARAMETER in str(record.__dict__.get("error"))


# --- the API's own scope check ------------------------------------------------------------


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("body", [SILENCE, {"not": "a silence"}])
def test_read_scope_cannot_create(body: dict[str, Any]) -> None:
    status, answer = call_api("POST", "/api/v2/silences", body, caller=READER)
    assert status == 403 and "write token" in answer["error"]
    assert table_items() == []


@pytest.mark.usefixtures("aws")
def test_read_scope_cannot_expire() -> None:
    sid = call_api("POST", "/api/v2/silences", SILENCE)[1]["silenceID"]
    status, answer = call_api("DELETE", f"/api/v2/silence/{sid}", caller=READER)
    assert status == 403 and "write token" in answer["error"]
    assert call_api("GET", f"/api/v2/silence/{sid}")[1]["status"]["state"] == "active"


@pytest.mark.usefixtures("aws")
def test_no_authorizer_context_cannot_write() -> None:
    assert call_api("POST", "/api/v2/silences", SILENCE, caller=None)[0] == 403


# --- the local gateway --------------------------------------------------------------------


def http(url: str, method: str = "GET", body: Any = None, token: str | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310 - 127.0.0.1
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture
def local_api(aws: dict[str, Any], tokens: dict[str, str]) -> Iterator[str]:
    server = serve_api(load_function("api").lambda_handler, port=0, tokens=document(tokens))
    yield server.url
    server.stop()


def test_local_gateway_answers_401_without_a_known_token(local_api: str, tokens: dict[str, str]) -> None:
    assert http(f"{local_api}/api/v2/silences") == (401, {"error": "Unauthorized"})
    assert http(f"{local_api}/api/v2/silences", token="nope") == (401, {"error": "Unauthorized"})
    assert http(f"{local_api}/api/v2/silences", token=tokens["read"]) == (200, [])


def test_local_gateway_read_token_gets_403_on_write(local_api: str, tokens: dict[str, str]) -> None:
    status, answer = http(f"{local_api}/api/v2/silences", "POST", SILENCE, token=tokens["read"])
    assert status == 403 and "write token" in answer["error"]
    assert table_items() == []


def test_created_by_comes_from_the_principal(
    aws: dict[str, Any], local_api: str, tokens: dict[str, str]
) -> None:
    status, created = http(f"{local_api}/api/v2/silences", "POST", SILENCE, token=tokens["write"])
    assert status == 200
    status, silence = http(f"{local_api}/api/v2/silence/{created['silenceID']}", token=tokens["read"])
    assert (status, silence["createdBy"]) == (200, "alice")
    [record] = [r for r in store.audit_log(aws["storage"].silences) if r["action"] == "create"]
    assert record["who"] == "alice"


def test_local_gateway_outside_the_api_is_apigateways_403(local_api: str) -> None:
    assert http(f"{local_api}/other") == (403, {"error": "Missing Authentication Token"})


def test_local_gateway_without_tokens_lets_everyone_write_as_local(aws: dict[str, Any]) -> None:
    server = serve_api(load_function("api").lambda_handler, port=0)
    url = server.url
    try:
        status, created = http(f"{url}/api/v2/silences", "POST", SILENCE)
        assert status == 200
        assert http(f"{url}/api/v2/silence/{created['silenceID']}")[1]["createdBy"] == "local"
    finally:
        server.stop()


@pytest.mark.usefixtures("aws")
def test_serve_api_refuses_a_malformed_tokens_document() -> None:
    with pytest.raises(auth.TokensError, match="tokens"):
        serve_api(load_function("api").lambda_handler, port=0, tokens={"tokens": "nope"})
