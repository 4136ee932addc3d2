"""The silences/alerts API through its Lambda handler, with real API Gateway proxy events."""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import types
import urllib.error
import urllib.request
import uuid
from datetime import timedelta
from typing import Any

import pytest

from tests.support.api import HOUR, NOW, FakeView, fake_alert
from tests.support.aws import set_clock, table_items
from tests.support.peers import READER, call_api
from trunkwatch.api import routes
from trunkwatch.api.routes import MAX_BODY_BYTES
from trunkwatch.domain.clock import parse_time
from trunkwatch.silences.model import MAX_MATCHERS
from trunkwatch_local.apigw import serve_api

JOB = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"


@pytest.fixture(autouse=True)
def api(aws: dict[str, Any]) -> None:
    aws["clock"].set(NOW)


def postable(**changes: Any) -> dict[str, Any]:
    body = {
        "matchers": [{"name": "job", "value": "pull / .*", "isRegex": True, "isEqual": True}],
        "startsAt": "2026-11-18T15:00:00Z",
        "endsAt": "2026-11-18T17:00:00Z",
        "createdBy": "alice@example.com",
        "comment": "known breakage",
    }
    body.update(changes)
    return {key: value for key, value in body.items() if value is not None}


def create(**changes: Any) -> str:
    status, body = call_api("POST", "/api/v2/silences", postable(**changes))
    assert status == 200, body
    return str(body["silenceID"])


def test_create_get_and_list() -> None:
    sid = create()
    status, got = call_api("GET", f"/api/v2/silence/{sid}")
    assert status == 200
    assert got == {
        "id": sid,
        "status": {"state": "active"},
        "updatedAt": "2026-11-18T15:00:00.000Z",
        "matchers": [{"name": "job", "value": "pull / .*", "isRegex": True, "isEqual": True}],
        "startsAt": "2026-11-18T15:00:00.000Z",
        "endsAt": "2026-11-18T17:00:00.000Z",
        "createdBy": "alice@example.com",
        "comment": "known breakage",
    }
    assert call_api("GET", "/api/v2/silences") == (200, [got])


def test_created_by_defaults_to_the_authenticated_principal() -> None:
    sid = create(createdBy=None)
    assert call_api("GET", f"/api/v2/silence/{sid}")[1]["createdBy"] == "alice"


def test_update_in_place_and_replacement() -> None:
    sid = create()
    assert create(id=sid, endsAt="2026-11-18T19:00:00Z") == sid
    new = create(id=sid, matchers=[{"name": "job", "value": "trunk / .*", "isRegex": True}])
    assert new != sid
    listed = {s["id"]: s["status"]["state"] for s in call_api("GET", "/api/v2/silences")[1]}
    assert listed == {sid: "expired", new: "active"}


def test_delete_expires_and_keeps_the_silence() -> None:
    sid = create()
    later = NOW + timedelta(minutes=5)
    set_clock(later)
    assert call_api("DELETE", f"/api/v2/silence/{sid}") == (200, None)
    status, got = call_api("GET", f"/api/v2/silence/{sid}")
    assert status == 200
    assert (got["status"]["state"], got["endsAt"]) == ("expired", "2026-11-18T15:05:00.000Z")


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("", ["pull", "team"]),
        ("filter=" + "job%3D~%22pull+%2F+.%2A%22", ["pull"]),
        ("filter=team%3D%22ci-oncall%22", ["team"]),
        ("filter=team%3D%22ci-oncall%22&filter=job%3D~%22pull+%2F+.%2A%22", []),
        ("filter=job%3D%22pull+%2F+.%2A%22", []),
    ],
)
def test_silence_filter_is_alertmanagers(query: str, shown: list[str]) -> None:
    ids = {
        "pull": create(),
        "team": create(matchers=[{"name": "team", "value": "ci-oncall"}]),
    }
    status, listed = call_api("GET", "/api/v2/silences", query=query)
    assert status == 200
    assert sorted(s["id"] for s in listed) == sorted(ids[name] for name in shown)


def test_every_answer_says_the_apis_clock(aws: dict[str, Any]) -> None:
    # The status page counts from it: a replay's clock is not the browser's.
    from tests.support.peers import invoke
    from trunkwatch_local import apigw

    def clock(path: str) -> list[str]:
        response = invoke("api", apigw.proxy_event("GET", path, caller=READER))
        return list(response["multiValueHeaders"][routes.CLOCK_HEADER])

    assert clock("/api/v2/silences") == ["2026-11-18T15:00:00.000Z"]
    aws["clock"].set(NOW + HOUR)
    assert clock("/api/v2/alerts") == ["2026-11-18T16:00:00.000Z"]


def test_status_and_receivers_have_alertmanagers_shape() -> None:
    status, body = call_api("GET", "/api/v2/status")
    assert status == 200
    assert body["cluster"] == {"status": "disabled", "peers": []}
    assert set(body["versionInfo"]) == {
        "version",
        "revision",
        "branch",
        "buildUser",
        "buildDate",
        "goVersion",
    }
    assert "receiver: trunkwatch-sns" in body["config"]["original"]
    assert parse_time(body["uptime"])
    assert call_api("GET", "/api/v2/receivers") == (200, [{"name": "trunkwatch-sns"}])


def test_openapi_document_describes_the_routes() -> None:
    status, document = call_api("GET", "/api/v2/openapi.json")
    assert status == 200
    assert set(document["paths"]) == {
        "/api/v2/silences",
        "/api/v2/silence/{silence_id}",
        "/api/v2/alerts",
        "/api/v2/alerts/groups",
        "/api/v2/acks",
        "/api/v2/status",
        "/api/v2/receivers",
        "/api/v2/trunks",
        "/api/v2/trunks/grid",
        "/api/v2/trunks/history",
    }
    grid = document["paths"]["/api/v2/trunks/grid"]["get"]
    assert [(p["name"], p["in"], p["required"]) for p in grid["parameters"]] == [("trunk", "query", True)]
    post = document["paths"]["/api/v2/silences"]["post"]
    assert "422" not in post["responses"]
    assert post["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/ApiError")
    assert set(document["components"]["schemas"]["PostableSilence"]["required"]) == {
        "matchers",
        "endsAt",
        "comment",
    }


def _json(**changes: Any) -> bytes:
    return json.dumps(postable(**changes)).encode()


def _regex(name: str, value: str) -> bytes:
    return _json(matchers=[{"name": name, "value": value, "isRegex": True}])


JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize(
    ("raw", "content_type", "status", "message"),
    [
        (b"{not json", JSON, 400, "request body is not valid JSON"),
        (_json(surprise=1), JSON, 400, "unknown field 'surprise'"),
        (_regex("job", "("), JSON, 400, "invalid regular expression"),
        (_json(matchers=[{"name": "job", "value": "x"}] * (MAX_MATCHERS + 1)), JSON, 400, "too many"),
        (_json(comment="x" * MAX_BODY_BYTES), JSON, 413, "larger than 65536 bytes"),
        (_json(matchers=[]), JSON, 400, "at least one matcher is required"),
        (_regex("job", ".*"), JSON, 400, "must not match the empty string"),
        (_regex("alertname", ".+"), JSON, 400, "would silence every alert"),
        (_json(startsAt="2026-11-18T17:00:00Z"), JSON, 400, "startsAt must be before endsAt"),
        (_json(startsAt="2026-11-18T13:00:00Z", endsAt="2026-11-18T14:00:00Z"), JSON, 400, "in the past"),
        (_json(id=str(uuid.UUID(int=7))), JSON, 404, "not found"),
        (_json(id="not-a-uuid"), JSON, 400, "not a silence id"),
        (_json(endsAt="soon"), JSON, 400, "endsAt"),
        (b"[]", JSON, 400, "request body: Input should be a valid dictionary"),
        (b"\xff\xfe", JSON, 400, "request body is not UTF-8 text"),
        (_json(), "text/plain", 415, "Content-Type must be application/json"),
        (b"matchers=job", FORM, 415, "Content-Type must be application/json"),
    ],
)  # fmt: skip
def test_bad_silences_are_refused_and_nothing_is_written(
    raw: bytes, content_type: str, status: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    got_status, body = call_api(
        "POST", "/api/v2/silences", raw_body=raw, headers={"Content-Type": content_type}
    )
    assert got_status == status
    assert set(body) == {"error"} and message in body["error"]
    assert table_items() == []
    assert '"ApiErrors":[1.0]' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("method", "path", "query", "status", "message"),
    [
        ("GET", f"/api/v2/silence/{uuid.UUID(int=7)}", "", 404, "not found"),
        ("DELETE", f"/api/v2/silence/{uuid.UUID(int=7)}", "", 404, "not found"),
        ("GET", "/api/v2/silence/not-a-uuid", "", 400, "not a silence id"),
        ("GET", "/api/v2/silences", "filter=job", 400, "invalid matcher"),
        ("GET", "/api/v2/silences", "filter=job%3D~%22%28%22", 400, "invalid regular expression"),
        ("GET", "/api/v2/alerts", "active=maybe", 400, "active"),
        ("GET", "/api/v2/alerts", "receiver=%28", 400, "invalid regular expression"),
        ("GET", "/api/v2/nothing-here", "", 404, "no endpoint GET /api/v2/nothing-here"),
        ("PUT", "/api/v2/silences", "", 404, "no endpoint PUT"),
    ],
)
def test_bad_requests_get_an_error_body(
    method: str, path: str, query: str, status: int, message: str
) -> None:
    got_status, body = call_api(method, path, query=query)
    assert got_status == status
    assert set(body) == {"error"} and message in body["error"]


def test_refusals_are_logged_with_what_was_wrong() -> None:
    records = logging.handlers.BufferingHandler(capacity=100)
    api_logger = logging.getLogger(routes.logger.name)
    api_logger.addHandler(records)
    try:
        call_api("POST", "/api/v2/silences", postable(matchers=[]))
    finally:
        api_logger.removeHandler(records)
    [record] = records.buffer
    assert record.getMessage() == "API request refused"
    logged = vars(record)
    assert (logged["status"], logged["error"], logged["path"]) == (
        400,
        "at least one matcher is required",
        "/api/v2/silences",
    )


def test_expiring_an_expired_silence_is_refused() -> None:
    sid = create()
    assert call_api("DELETE", f"/api/v2/silence/{sid}")[0] == 200
    status, body = call_api("DELETE", f"/api/v2/silence/{sid}")
    assert (status, body) == (400, {"error": f"silence {sid} has already expired"})
    assert len(table_items("audit")) == 2


def test_read_scope_can_read() -> None:
    sid = create()
    assert call_api("GET", f"/api/v2/silence/{sid}", caller=READER)[0] == 200
    assert call_api("GET", "/api/v2/silences", caller=READER)[0] == 200


# --- GET /api/v2/alerts, against the overview module's contract ---------------------------


@pytest.fixture
def overview(monkeypatch: pytest.MonkeyPatch) -> list[FakeView]:
    views = [
        FakeView(fake_alert("TrunkJobFailing", JOB)),
        FakeView(fake_alert("TrunkJobFailing", "trunk / build"), silenced_by=["s-1"]),
        FakeView(fake_alert("TrunkJobFailing", "pull / docs"), inhibited_by=["fp-1"]),
        FakeView(fake_alert("TrunkBadlyBroken")),
        FakeView(fake_alert("TrunkJobFailing", "pull / gone", ends_at=NOW - HOUR)),
    ]
    fake = types.ModuleType("trunkwatch.app.views")
    fake.current_alerts = lambda storage, deployment, now, links: views  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "trunkwatch.app.views", fake)
    return views


def _jobs(query: str) -> list[str]:
    status, alerts = call_api("GET", "/api/v2/alerts", query=query)
    assert status == 200, alerts
    return sorted(a["labels"].get("job", a["labels"]["alertname"]) for a in alerts)


@pytest.mark.usefixtures("overview")
@pytest.mark.parametrize(
    ("query", "jobs"),
    [
        ("", ["TrunkBadlyBroken", JOB, "pull / docs", "trunk / build"]),
        # amtool's `alert query`
        ("active=true&inhibited=false&silenced=false&unprocessed=false", ["TrunkBadlyBroken", JOB]),
        ("active=false&silenced=true&inhibited=false", ["trunk / build"]),
        ("active=false&silenced=false&inhibited=true", ["pull / docs"]),
        ("filter=alertname%3DTrunkJobFailing&filter=job%3D~%22pull.%2A%22", [JOB, "pull / docs"]),
        ("filter=job%21~%22.%2B%22", ["TrunkBadlyBroken"]),
        ("receiver=trunkwatch-sn.", ["TrunkBadlyBroken", JOB, "pull / docs", "trunk / build"]),
        ("receiver=email", []),
    ],
)
def test_alerts_filters(query: str, jobs: list[str]) -> None:
    assert _jobs(query) == sorted(jobs)


def test_alerts_have_the_gettable_alert_shape(overview: list[FakeView]) -> None:
    status, alerts = call_api("GET", "/api/v2/alerts")
    assert status == 200
    assert [a["fingerprint"] for a in alerts] == sorted(a["fingerprint"] for a in alerts)
    silenced = next(a for a in alerts if a["labels"].get("job") == "trunk / build")
    assert silenced == {
        "labels": overview[1].alert.labels,
        "annotations": {"summary": "TrunkJobFailing trunk / build"},
        "receivers": [{"name": "trunkwatch-sns"}],
        "fingerprint": overview[1].alert.fingerprint,
        "startsAt": "2026-11-18T14:00:00.000Z",
        "updatedAt": "2026-11-18T14:00:00.000Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "",
        "status": {"state": "suppressed", "silencedBy": ["s-1"], "inhibitedBy": []},
    }
    active = next(a for a in alerts if a["labels"]["alertname"] == "TrunkBadlyBroken")
    assert active["status"] == {"state": "active", "silencedBy": [], "inhibitedBy": []}


# --- the local stand-in for API Gateway ---------------------------------------------------


def _fetch(url: str, data: bytes | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_local_gateway_sends_api_gateway_proxy_events() -> None:
    seen: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(event)
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}

    server = serve_api(handler, port=0)
    try:
        url = f"{server.url}/api/v2/silences"
        _fetch(f"{url}?filter=job%3D~%22pull+%2F+.%2A%22&filter=team%3Dx")
        _fetch(url, data=b"\xff")
    finally:
        server.stop()
    get, post = seen
    assert (get["resource"], get["path"], get["httpMethod"]) == (
        "/api/v2/{proxy+}",
        "/api/v2/silences",
        "GET",
    )
    assert get["pathParameters"] == {"proxy": "silences"}
    assert get["multiValueQueryStringParameters"] == {"filter": ['job=~"pull / .*"', "team=x"]}
    assert get["queryStringParameters"] == {"filter": "team=x"}
    context = get["requestContext"]
    # Served at the root, like a custom domain mapped to the stage; the host is the domain.
    assert context["stage"] == "v1" and context["path"] == "/api/v2/silences"
    assert context["domainName"] == server.url.removeprefix("http://")
    assert get["headers"]["X-Forwarded-Proto"] == "http"
    assert get["requestContext"]["authorizer"]["principalId"] == "local"
    assert (get["body"], get["isBase64Encoded"]) == (None, False)
    assert (post["body"], post["isBase64Encoded"]) == ("/w==", True)


def test_local_gateway_answers_502_when_the_handler_fails() -> None:
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    server = serve_api(handler, port=0)
    try:
        status, body = _fetch(f"{server.url}/api/v2/status")
    finally:
        server.stop()
    assert (status, body) == (502, {"error": "Internal server error"})
