"""Every function of template.yaml, started cold as Lambda starts it, on each of its samples.

A new interpreter per invocation (`tests/support/cold_invoke.py`), exactly the environment the template
gives the function (Globals' variables and its own, references resolved to values shaped like
a deployed stack's) plus what Lambda's runtime sets, moto behind it, one invocation of the
sample event from `events/`. Nothing is bound or configured for the handler beforehand: it
has to find its table, region and configuration from that environment alone, as in AWS.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.hud import grid
from tests.support.paths import ROOT, TESTS
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import Wiring, read_wiring

DRIVER = TESTS / "support" / "cold_invoke.py"
REGION = "us-east-1"
# What CloudFormation's references resolve to in a deployed stack (names as it makes them).
DEPLOYED = {
    "Table": "trunkwatch-Table-1X2Y3Z4A5B6C",
    "AlertTopic": f"arn:aws:sns:{REGION}:123456789012:trunkwatch-AlertTopic-AbCdEfGh1234",
    "Api": "a1b2c3d4e5",
    "PollQueue": f"https://sqs.{REGION}.amazonaws.com/123456789012/trunkwatch-PollQueue-AbCdEfGh1234.fifo",
    "AWS::Region": REGION,
    "AWS::AccountId": "123456789012",
    "AWS::StackName": "trunkwatch",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::Partition": "aws",
}
# The webhook sample is signed with GitHub's documented test-vector secret.
WEBHOOK_SECRET = "It's a Secret to Everybody"
SAMPLE_TOKENS = {"example-write-token": "write", "example-read-token": "read"}
TRUNK = {"repo": "pytorch/pytorch", "branch": "main"}


def _wiring() -> Wiring:
    return read_wiring(find_template())


def _samples() -> list[tuple[str, str]]:
    """(function logical id, sample file) for every sample of every function."""
    wiring = _wiring()
    pairs = []
    for logical_id, handler in wiring.functions.items():
        folder = handler.parent.name
        pairs += [(logical_id, path.name) for path in sorted((ROOT / "events").glob(f"{folder}_*.json"))]
    return pairs


def lambda_environment(function: str, wiring: Wiring) -> dict[str, str]:
    """What a deployed function's process has: the runtime's variables and the template's."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        "AWS_LAMBDA_FUNCTION_NAME": f"trunkwatch-{function}-AbCdEf123456",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_ACCESS_KEY_ID": "ASIAEXAMPLEEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "example",
        "AWS_SESSION_TOKEN": "example",
        "_HANDLER": "app.lambda_handler",
        **wiring.environment_of(function, DEPLOYED),
    }


def _event_time(event: dict[str, Any]) -> float:
    """When the sample happened: the handler runs at that time on the clock."""
    if "time" in event:
        return datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
    if "Records" in event and event["Records"][0].get("eventSource") == "aws:sqs":
        return int(event["Records"][0]["attributes"]["SentTimestamp"]) / 1000
    if "Records" in event:
        return float(max(r["dynamodb"]["ApproximateCreationDateTime"] for r in event["Records"]))
    if "requestContext" in event:  # API Gateway's REST event, or a function URL's (2.0)
        context = event["requestContext"]
        return (context.get("requestTimeEpoch") or context["timeEpoch"]) / 1000
    return datetime.fromisoformat("2024-05-01T12:00:00+00:00").timestamp()


def cold_invoke(
    function: str,
    sample: str,
    hud_url: str,
    environ: dict[str, str] | None = None,
    then: tuple[dict[str, Any], ...] = (),
) -> Any:
    """The function's answer to `sample` in a cold container (and to each of `then`'s events
    in the same container after it: all the answers, in order)."""
    wiring = _wiring()
    event = json.loads((ROOT / "events" / sample).read_text())
    spec = {
        "function": function,
        "handler": str(wiring.functions[function]),
        "events": [event, *then],
        "at": _event_time(event),
        "table": wiring.table,
        # Polled and fed by webhooks (a webhook-fed trunk's first poll runs at once).
        "config": {"trunks": [{**TRUNK, "source": "hud", "url": hud_url, "webhook": True}]},
        "webhook_secret": WEBHOOK_SECRET,
        "tokens": {
            "tokens": [
                {"sha256": hashlib.sha256(token.encode()).hexdigest(), "principal": "sample", "scope": scope}
                for token, scope in SAMPLE_TOKENS.items()
            ]
        },
    }
    environ = dict(environ if environ is not None else lambda_environment(function, wiring))
    with tempfile.TemporaryDirectory() as opt:  # where Lambda extracts the layers: /opt
        if environ.get("CONFIG_FILE"):
            config = Path(opt) / Path(environ["CONFIG_FILE"]).relative_to("/opt")
            config.parent.mkdir(parents=True)
            config.write_text(yaml.safe_dump(spec.pop("config")))  # the ConfigLayer's file
            environ["CONFIG_FILE"] = str(config)
        done = subprocess.run(
            [sys.executable, str(DRIVER), json.dumps(spec)],
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    outcome = json.loads(lines[-1])
    assert "error" not in outcome, f"{outcome['error']}\n{done.stderr[-3000:]}"
    return outcome["results"] if then else outcome["results"][0]


@pytest.fixture(scope="module")
def hud() -> Iterator[str]:
    server = HudServer()
    server.serve(grid())
    yield server.url
    server.stop()


def test_every_function_has_a_sample_and_every_sample_a_function() -> None:
    wiring = _wiring()
    folders = {handler.parent.name for handler in wiring.functions.values()}
    sampled = {function for function, _ in _samples()}
    assert sampled == set(wiring.functions)
    assert {path.name.split("_", 1)[0] for path in (ROOT / "events").glob("*.json")} <= folders


# The API's silence sample is the first event of the amtool bar's cold container below.
COLD_FIRST_BY_THE_BAR = ("ApiFunction", "api_post_silence.json")


@pytest.mark.parametrize(("function", "sample"), [s for s in _samples() if s != COLD_FIRST_BY_THE_BAR])
def test_a_cold_container_handles_its_sample(function: str, sample: str, hud: str) -> None:
    result = cold_invoke(function, sample, hud)
    if "statusCode" in result:  # the API behind API Gateway
        assert 200 <= result["statusCode"] < 300, result
    elif sample.startswith("authorizer"):
        (statement,) = result["policyDocument"]["Statement"]
        assert statement["Effect"] == "Allow" and result["principalId"] == "sample"
    elif "polled" in result:  # ingest's poll message: the trunk was polled
        assert result["errors"] == [] and [p["trunk"] for p in result["polled"]] == ["pytorch/pytorch#main"]
        assert result["batchItemFailures"] == []
    elif "batchItemFailures" in result:  # a stream batch
        assert result["batchItemFailures"] == []
    elif "sent" in result:  # the dispatcher's schedule: one poll message for the trunk
        assert result == {"sent": ["pytorch/pytorch#main"], "failed": []}
    else:  # the evaluator's sweep
        assert result["rejudged"] == 0 and result["waiting"] == []


def test_cold_api_container_serves_what_amtool_asks_for(hud: str) -> None:
    """The bar: a cold API container creates a silence, lists it and lists alerts."""
    sample = json.loads((ROOT / "events" / "api_post_silence.json").read_text())
    get_silences = json.loads((ROOT / "events" / "api_get_silences.json").read_text())
    get_alerts = json.loads((ROOT / "events" / "api_get_alerts.json").read_text())
    everything = {**get_silences, "queryStringParameters": None, "multiValueQueryStringParameters": None}
    answers = cold_invoke(*COLD_FIRST_BY_THE_BAR, hud, then=(everything, get_silences, get_alerts))
    assert [answer["statusCode"] for answer in answers] == [200] * 4, answers
    created, listed, filtered, alerts = (json.loads(answer["body"]) for answer in answers)
    (silence,) = listed
    posted = json.loads(sample["body"])
    assert silence["id"] == created["silenceID"] and silence["status"] == {"state": "active"}
    assert [{**m, "isEqual": True} for m in posted["matchers"]] == silence["matchers"]
    assert (silence["createdBy"], silence["comment"]) == (posted["createdBy"], posted["comment"])
    assert filtered == []  # the sample's filter asks for a repo matcher, which the silence has not
    assert alerts == []  # nothing has fired on a new table


@pytest.mark.parametrize("missing", ["TABLE_NAME", "CONFIG_FILE"])
def test_a_function_missing_a_variable_fails_at_load_naming_it(missing: str, hud: str) -> None:
    environ = lambda_environment("ApiFunction", _wiring())
    del environ[missing]
    with pytest.raises(AssertionError, match=f"ConfigError: environment variable.*{missing}"):
        cold_invoke("ApiFunction", "api_get_silences.json", hud, environ)
