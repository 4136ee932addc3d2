"""The status page's routes, `GET /api/v2/alerts/groups` (checked against Alertmanager's
schema), the `silence_url` helper, and the template's unauthenticated page routes."""

from __future__ import annotations

import sys
import types
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from tests.support.api import NOW, FakeView, fake_alert, get_page, headers_of
from tests.support.peers import call_api
from trunkwatch.api import auth, page
from trunkwatch.domain.links import matcher_filter, silence_url
from trunkwatch_local import apigw
from trunkwatch_local.template import find_template

# Alertmanager's `alertGroups` response (api/v2/openapi.yaml in prometheus/alertmanager:
# alertGroups -> alertGroup -> gettableAlert, alertStatus, receiver, labelSet), restated as a
# JSON schema; `allOf` of gettableAlert's two parts is merged into one object here.
_LABEL_SET = {"type": "object", "additionalProperties": {"type": "string"}}
_DATE_TIME = {"type": "string", "format": "date-time"}
_RECEIVER = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
_GETTABLE_ALERT = {
    "type": "object",
    "properties": {
        "labels": _LABEL_SET,
        "generatorURL": {"type": "string", "format": "uri"},
        "annotations": _LABEL_SET,
        "receivers": {"type": "array", "items": _RECEIVER},
        "fingerprint": {"type": "string"},
        "startsAt": _DATE_TIME,
        "updatedAt": _DATE_TIME,
        "endsAt": _DATE_TIME,
        "status": {
            "type": "object",
            "properties": {
                "state": {"type": "string", "enum": ["unprocessed", "active", "suppressed"]},
                "silencedBy": {"type": "array", "items": {"type": "string"}},
                "inhibitedBy": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["state", "silencedBy", "inhibitedBy"],
        },
    },
    "required": [
        "labels",
        "receivers",
        "fingerprint",
        "startsAt",
        "updatedAt",
        "endsAt",
        "annotations",
        "status",
    ],
}
SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "labels": _LABEL_SET,
            "receiver": _RECEIVER,
            "alerts": {"type": "array", "items": _GETTABLE_ALERT},
        },
        "required": ["labels", "receiver", "alerts"],
    },
}


# --- silence_url ----------------------------------------------------------------------


def test_silence_url_is_the_prefilled_form_with_the_identifying_labels() -> None:
    labels = {
        "alertname": "TrunkJobFailing",
        "repo": "pytorch/pytorch",
        "branch": "main",
        "priority": "P3",
        "team": "dev-infra",
        "job": "pull / linux-jammy / test (default, linux.2xlarge)",
        "workflow": "pull",
    }
    url = silence_url("https://abc.execute-api.us-east-1.amazonaws.com/v1/", labels)
    base, _, query = url.partition("#/silences/new?filter=")
    assert base == "https://abc.execute-api.us-east-1.amazonaws.com/v1/"
    # Everything after `filter=` is percent-encoded: no raw space, quote, brace, comma or plus.
    assert all(c not in query for c in ' "{},+&#')
    assert urllib.parse.unquote(query) == (
        '{alertname="TrunkJobFailing",repo="pytorch/pytorch",branch="main",'
        'job="pull / linux-jammy / test (default, linux.2xlarge)"}'
    )


def test_silence_url_without_a_job_and_with_awkward_values() -> None:
    url = silence_url("http://127.0.0.1:9093", {"alertname": "TrunkBroken", "repo": "o/r", "branch": "main"})
    assert url == (
        "http://127.0.0.1:9093/#/silences/new?filter="
        + urllib.parse.quote('{alertname="TrunkBroken",repo="o/r",branch="main"}', safe="")
    )
    assert matcher_filter({"alertname": "A", "job": 'say "hi"\\now\nx'}) == (
        '{alertname="A",job="say \\"hi\\"\\\\now\\nx"}'
    )
    assert matcher_filter({"alertname": "A", "job": ""}) == '{alertname="A"}'


# --- the page and its assets ----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "content_type", "marker"),
    [
        ("/", "text/html; charset=utf-8", '<script src="static/app.js" defer></script>'),
        ("/static/app.js", "text/javascript; charset=utf-8", "textContent"),
        ("/static/app.css", "text/css; charset=utf-8", "--p1"),
    ],
)
def test_page_and_assets_need_no_token_and_carry_a_strict_policy(
    aws: Any, path: str, content_type: str, marker: str
) -> None:
    response = get_page(path)
    assert response["statusCode"] == 200
    headers = headers_of(response)
    assert headers["content-type"] == content_type
    assert headers["x-content-type-options"] == "nosniff"
    policy = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))
    assert policy["script-src"] == "'self'"
    assert policy["object-src"] == "'none'" and policy["base-uri"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    assert "'unsafe-inline'" not in headers["content-security-policy"]
    assert marker in response["body"]


def test_the_page_has_no_inline_script_or_style() -> None:
    html = page.asset("index.html")
    assert "<script>" not in html and "style=" not in html and "<style" not in html
    script = page.asset("app.js")
    for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script


def test_unknown_assets_are_404(aws: Any) -> None:
    for path in ("/static/index.html", "/static/..%2Ftemplate.yaml", "/static/app.py"):
        assert get_page(path)["statusCode"] == 404


def test_the_stage_root_without_a_slash_redirects(aws: Any) -> None:
    response = get_page("/", stage_path="/v1")
    assert response["statusCode"] == 301
    assert headers_of(response)["location"] == "/v1/"


def test_local_gateway_serves_the_page_without_a_token_but_not_the_api() -> None:
    calls: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls.append(event)
        return {"statusCode": 200, "headers": {"Content-Type": "text/plain"}, "body": "ok"}

    tokens = {"tokens": [{"sha256": auth.token_hash("s3cret"), "principal": "alice", "scope": "write"}]}
    server = apigw.serve_api(handler, port=0, tokens=tokens)
    url = server.url

    def status(path: str, method: str = "GET") -> int:
        request = urllib.request.Request(url + path, method=method)  # noqa: S310 - 127.0.0.1
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - 127.0.0.1
                return int(response.status)
        except urllib.error.HTTPError as err:
            return err.code

    try:
        assert status("/") == 200
        assert status("/static/app.js") == 200
        assert status("/api/v2/alerts") == 401
        assert status("/api/v2/trunks") == 401
        assert status("/api/v2/trunks/grid?trunk=pytorch%2Fpytorch%23main") == 401
        assert status("/", "POST") == 403
        assert status("/static/a/b") == 403
    finally:
        server.stop()
    assert [(e["resource"], e["pathParameters"]) for e in calls] == [
        ("/", None),
        ("/static/{file}", {"file": "app.js"}),
    ]
    assert all(e["requestContext"]["authorizer"] == {} for e in calls)


def test_template_serves_the_page_without_the_authorizer() -> None:
    from trunkwatch_local.template import load_template

    events = load_template(find_template())["Resources"]["ApiFunction"]["Properties"]["Events"]
    routes = {(e["Properties"]["Path"], e["Properties"]["Method"]): e["Properties"] for e in events.values()}
    assert routes[("/", "GET")]["Auth"] == {"Authorizer": "NONE"}
    assert routes[("/static/{file}", "GET")]["Auth"] == {"Authorizer": "NONE"}
    assert "Auth" not in routes[("/api/v2/{proxy+}", "ANY")]


# --- GET /api/v2/alerts/groups --------------------------------------------------------


@pytest.fixture
def views(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeView]]:
    found = [
        FakeView(fake_alert("TrunkBroken")),
        FakeView(fake_alert("TrunkJobFailing", "pull / a"), silenced_by=["s-1"]),
        FakeView(fake_alert("TrunkJobFailing", "trunk / b")),
    ]
    # The API's contract with the overview module, faked as tests/support/api.py does.
    fake = types.ModuleType("trunkwatch.app.views")
    fake.current_alerts = lambda storage, deployment, now, links: found  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "trunkwatch.app.views", fake)
    aws["clock"].set(NOW)
    yield found


def test_alert_groups_have_alertmanagers_schema_and_the_notifiers_grouping(views: list[FakeView]) -> None:
    status, groups = call_api("GET", "/api/v2/alerts/groups")
    assert status == 200
    jsonschema.validate(groups, SCHEMA)
    assert [(g["labels"], sorted(a["labels"].get("job", "") for a in g["alerts"])) for g in groups] == [
        ({"alertname": "TrunkBroken", "repo": "pytorch/pytorch"}, [""]),
        ({"alertname": "TrunkJobFailing", "repo": "pytorch/pytorch"}, ["pull / a", "trunk / b"]),
    ]
    assert all(g["receiver"] == {"name": "trunkwatch-sns"} for g in groups)
    # The alerts are the same objects /api/v2/alerts returns.
    _, alerts = call_api("GET", "/api/v2/alerts")
    assert sorted((a for g in groups for a in g["alerts"]), key=lambda a: a["fingerprint"]) == alerts


@pytest.mark.parametrize(
    ("query", "jobs"),
    [
        ("silenced=false", ["", "trunk / b"]),
        ("active=false", ["pull / a"]),
        ("filter=alertname%3DTrunkJobFailing", ["pull / a", "trunk / b"]),
        ("filter=job%3D~%22trunk.*%22", ["trunk / b"]),
        ("receiver=nomatch", []),
        ("receiver=trunkwatch-.*", ["", "pull / a", "trunk / b"]),
    ],
)
def test_alert_groups_honour_the_alerts_query_parameters(
    views: list[FakeView], query: str, jobs: list[str]
) -> None:
    status, groups = call_api("GET", "/api/v2/alerts/groups", query=query)
    assert status == 200
    jsonschema.validate(groups, SCHEMA)
    assert sorted(a["labels"].get("job", "") for g in groups for a in g["alerts"]) == jobs
    assert all(g["alerts"] for g in groups)


def test_alert_groups_refuse_a_bad_filter(views: list[FakeView]) -> None:
    status, body = call_api("GET", "/api/v2/alerts/groups", query="filter=job%3D~%22(%22")
    assert status == 400 and "error" in body
