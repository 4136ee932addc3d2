"""Debian's real `amtool` against the API: local gateway + API handler + a moto server table."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import types
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from moto.server import ThreadedMotoServer

from tests.support.aws import CONFIG, template_environment
from tests.support.peers import load_function, peer_binary
from trunkwatch.api import auth
from trunkwatch.domain.acks import Acknowledgement, is_ack_comment, live_by_fingerprint
from trunkwatch.domain.alerts import Alert
from trunkwatch.silences import store
from trunkwatch.storage.dynamodb import open_table
from trunkwatch.storage.port import Storage
from trunkwatch_local.apigw import serve_api
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring

pytestmark = pytest.mark.slow

TABLE = "trunkwatch-amtool"
REGION = "us-east-1"
PULL_JOB = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
TRUNK = "pytorch/pytorch#main"


@dataclass
class View:
    alert: Alert
    silenced_by: list[str] = field(default_factory=list)
    inhibited_by: list[str] = field(default_factory=list)
    trunk: str = TRUNK
    acknowledgement: Acknowledgement | None = None


def _alert(job: str) -> Alert:
    labels = {
        "alertname": "TrunkJobFailing",
        "repo": "pytorch/pytorch",
        "branch": "main",
        "priority": "P3",
        "team": "ci-oncall",
        "job": job,
        "workflow": job.split(" / ")[0],
    }
    return Alert(labels, {"summary": f"{job} failing"}, starts_at=datetime.now(UTC) - timedelta(hours=1))


ALERTS = [_alert(PULL_JOB), _alert("trunk / win-vs2022-cpu-py3 / build")]


def _current_alerts(storage: Storage, deployment: object, now: datetime, links: object) -> list[View]:
    """The overview's contract: firing alerts, each with the active silences that match it
    (an `ACK!` one acknowledges instead) and its live acknowledgement."""
    silences = [s for s in store.active(storage.silences, now) if not is_ack_comment(s.comment)]
    acked = live_by_fingerprint(storage.logs.acks(TRUNK))
    return [
        View(
            alert,
            [s.id for s in silences if s.matches(alert.labels)],
            acknowledgement=acked.get(alert.fingerprint),
        )
        for alert in ALERTS
    ]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Storage]:
    """A moto server on 127.0.0.1 holding the template's table; the storage on it."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "POWERTOOLS_TRACE_DISABLED": "true",
            **template_environment(),
        }.items():
            patch.setenv(name, value)
        patch.setitem(
            sys.modules, "trunkwatch.app.views", types.SimpleNamespace(current_alerts=_current_alerts)
        )
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        definition = read_wiring(find_template()).table
        boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION).create_table(
            TableName=TABLE,
            KeySchema=definition["KeySchema"],
            AttributeDefinitions=definition["AttributeDefinitions"],
            BillingMode="PAY_PER_REQUEST",
        )
        config = tmp_path_factory.mktemp("opt") / "config.yaml"  # what the ConfigLayer holds
        config.write_text(json.dumps(CONFIG))
        # The API function opens its table from the environment, as in Lambda.
        patch.setenv("TABLE_NAME", TABLE)
        patch.setenv("AWS_REGION", REGION)
        patch.setenv("AWS_ENDPOINT_URL", endpoint)
        patch.setenv("CONFIG_FILE", str(config))
        parameters.clear_caches()
        try:
            yield open_table(TABLE, REGION, endpoint)  # for the tests' own reads of the store
        finally:
            server.stop()


@pytest.fixture(scope="module")
def tokens() -> dict[str, str]:
    return {"write": secrets.token_urlsafe(24), "read": secrets.token_urlsafe(24)}


def _serve(tokens: dict[str, Any] | None) -> Iterator[str]:
    server = serve_api(load_function("api").lambda_handler, port=0, tokens=tokens)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def open_api(table: Storage) -> Iterator[str]:
    yield from _serve(None)


@pytest.fixture(scope="module")
def guarded_api(table: Storage, tokens: dict[str, str]) -> Iterator[str]:
    document = {
        "tokens": [
            {"sha256": auth.token_hash(tokens["write"]), "principal": "alice", "scope": "write"},
            {"sha256": auth.token_hash(tokens["read"]), "principal": "bob", "scope": "read"},
        ]
    }
    yield from _serve(document)


class Amtool:
    def __init__(self, url: str, http_config: Path | None = None) -> None:
        self.binary = peer_binary("amtool")
        self.options = [f"--alertmanager.url={url}"]
        if http_config is not None:
            self.options.append(f"--http.config.file={http_config}")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *self.options, *args], capture_output=True, text=True, timeout=60, check=False
        )

    def __call__(self, *args: str) -> str:
        result = self.run(*args)
        assert result.returncode == 0, f"amtool {' '.join(args)} failed: {result.stderr}"
        return result.stdout

    def silences(self, *args: str) -> list[dict[str, Any]]:
        return list(json.loads(self("silence", "query", "-o", "json", *args)))

    def alerts(self, *args: str) -> list[dict[str, Any]]:
        return list(json.loads(self("alert", "query", "-o", "json", *args)))


def _http_config(directory: Path, token: str) -> Path:
    path = directory / f"http-{uuid.uuid4().hex}.yml"
    path.write_text(f"authorization:\n  type: Bearer\n  credentials: {token}\n")
    return path


def test_silence_lifecycle_with_amtool(open_api: str) -> None:
    amtool = Amtool(open_api)
    assert {a["labels"]["job"] for a in amtool.alerts()} == {PULL_JOB, "trunk / win-vs2022-cpu-py3 / build"}

    sid = amtool(
        "silence",
        "add",
        'job=~"pull / .*"',
        "--comment=cuda build broken upstream",
        "--author=oncall@example.com",
    ).strip()
    assert uuid.UUID(sid)

    [listed] = [s for s in amtool.silences() if s["id"] == sid]
    assert listed["matchers"] == [{"name": "job", "value": "pull / .*", "isRegex": True, "isEqual": True}]
    assert (listed["createdBy"], listed["comment"]) == ("oncall@example.com", "cuda build broken upstream")
    assert listed["status"] == {"state": "active"}
    assert sid in amtool("silence", "query")
    assert [s["id"] for s in amtool.silences('job=~"pull / .*"')] == [sid]
    assert amtool.silences('job=~"trunk / .*"') == []

    # `alert query` hides silenced alerts unless asked for them.
    assert {a["labels"]["job"] for a in amtool.alerts()} == {"trunk / win-vs2022-cpu-py3 / build"}
    [silenced] = amtool.alerts("--silenced")
    assert silenced["labels"]["job"] == PULL_JOB
    assert silenced["status"] == {"state": "suppressed", "silencedBy": [sid], "inhibitedBy": []}

    amtool("silence", "expire", sid)
    assert sid not in [s["id"] for s in amtool.silences()]
    [expired] = [s for s in amtool.silences("--expired") if s["id"] == sid]
    assert expired["status"] == {"state": "expired"}
    assert {a["labels"]["job"] for a in amtool.alerts()} == {PULL_JOB, "trunk / win-vs2022-cpu-py3 / build"}


def test_an_ack_silence_from_amtool_acknowledges_and_silences_nothing(open_api: str, table: Storage) -> None:
    amtool = Amtool(open_api)
    sid = amtool(
        "silence",
        "add",
        f'job="{PULL_JOB}"',
        "--comment=ACK! reverting the culprit",
        "--author=oncall@example.com",
        "--duration=15m",
    ).strip()
    assert sid in [s["id"] for s in amtool.silences()]  # kept and listed as a silence
    # Nothing is held back: `alert query` (which hides silenced alerts) shows both.
    assert {a["labels"]["job"] for a in amtool.alerts()} == {PULL_JOB, "trunk / win-vs2022-cpu-py3 / build"}
    (ack,) = table.logs.acks(TRUNK)
    assert (ack.by, ack.comment, ack.via, ack.job) == (
        "oncall@example.com",
        "reverting the culprit",
        f"silence {sid}",
        PULL_JOB,
    )
    amtool("silence", "expire", sid)
    assert table.logs.acks(TRUNK) == [ack]  # expiring it does not take it back


def test_amtool_update_and_bad_input(open_api: str) -> None:
    amtool = Amtool(open_api)
    sid = amtool("silence", "add", "alertname=TrunkBroken", "--comment=known", "--duration=1h").strip()
    # Only the end moves: the same silence, updated in place.
    [updated] = json.loads(amtool("silence", "update", sid, "--duration=3h", "-o", "json"))
    assert updated["id"] == sid
    [silence] = [s for s in amtool.silences() if s["id"] == sid]
    ends = datetime.fromisoformat(silence["endsAt"].replace("Z", "+00:00"))
    assert ends - datetime.now(UTC) > timedelta(hours=2)

    # amtool checks regex syntax itself; this one it sends, and the API refuses it.
    refused = amtool.run("silence", "add", 'alertname=~".+"', "--comment=everything")
    assert refused.returncode != 0
    assert not [s for s in amtool.silences() if s["matchers"][0]["value"] == ".+"]


def test_amtool_with_bearer_tokens(
    table: Storage, guarded_api: str, tokens: dict[str, str], tmp_path: Path
) -> None:
    anonymous = Amtool(guarded_api)
    refused = anonymous.run("silence", "query")
    assert refused.returncode != 0 and "401" in refused.stderr

    writer = Amtool(guarded_api, _http_config(tmp_path, tokens["write"]))
    sid = writer(
        "silence", "add", "alertname=TrunkBadlyBroken", "--comment=infra outage", "--author=alice"
    ).strip()
    assert sid in [s["id"] for s in writer.silences()]

    reader = Amtool(guarded_api, _http_config(tmp_path, tokens["read"]))
    assert sid in [s["id"] for s in reader.silences()]
    forbidden = reader.run("silence", "expire", sid)
    assert forbidden.returncode != 0 and "403" in forbidden.stderr
    assert [s["status"]["state"] for s in reader.silences() if s["id"] == sid] == ["active"]
    writer("silence", "expire", sid)
    audit = [r for r in store.audit_log(table.silences) if r["silenceID"] == sid]
    assert [(r["action"], r["who"]) for r in audit] == [("create", "alice"), ("expire", "alice")]
