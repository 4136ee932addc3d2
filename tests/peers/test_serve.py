"""`trunkwatch serve`: replay a scenario, then serve the API on 127.0.0.1 (for the real
amtool too) until Ctrl-C."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.peers import free_port, peer_binary, wait_until_serving
from tests.support.scenarios import SCENARIOS, scenario_ending_now

BROKEN = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"


@dataclass(frozen=True)
class Served:
    process: subprocess.Popen[str]
    url: str
    end: str  # the scenario's last event, where the served clock goes on from


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A `serve` process of its own for each test (one test stops it, another silences), so
    every test holds alone and in any order."""
    # basic-break up to 19:19: the broken job and TrunkBroken are firing. Moved to end an
    # hour ago: amtool judges a silence expired by the real clock, serve by the scenario's.
    lines = (SCENARIOS / "basic-break.jsonl").read_text().splitlines()
    cut = tmp_path / "firing.jsonl"
    cut.write_text("\n".join(lines[:27]) + "\n")
    scenario = scenario_ending_now(cut, tmp_path / "now")
    end = json.loads(scenario.read_text().splitlines()[-1])["at"]
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "trunkwatch_local.cli",
        "serve",
        "--scenario",
        str(scenario),
        "--port",
        f"{port}",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_serving(process)
        yield Served(process, f"http://127.0.0.1:{port}", end)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - 127.0.0.1
        return json.loads(response.read())


def test_api_serves_the_replayed_alerts(served: Served) -> None:
    url = served.url
    alerts = get(f"{url}/api/v2/alerts")
    assert sorted(a["labels"]["alertname"] for a in alerts) == ["TrunkBroken", "TrunkJobFailing"]
    assert all(a["status"]["state"] == "active" for a in alerts)
    assert "versionInfo" in get(f"{url}/api/v2/status")


def test_amtool_silence_lifecycle(served: Served) -> None:
    url = served.url
    amtool = peer_binary("amtool")

    def run(*args: str) -> str:
        done = subprocess.run(
            [amtool, f"--alertmanager.url={url}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    # serve goes on at the scenario's time, an hour before amtool's default start (the real
    # now): the silence starts at the scenario's last event.
    silence_id = run(
        "silence",
        "add",
        'job=~"pull / linux-jammy.*"',
        "--comment=fix in flight",
        "--author=oncall",
        f"--start={served.end}",
        "--duration=2h",
    ).strip()
    assert re.fullmatch(r"[0-9a-f-]{36}", silence_id)
    assert silence_id in run("silence", "query", "-q")
    # amtool's `alert query` shows active alerts only: the silenced job alert is gone from it.
    shown = run("alert", "query", "-o", "json")
    assert sorted(a["labels"]["alertname"] for a in json.loads(shown)) == ["TrunkBroken"]
    silenced = [a for a in get(f"{url}/api/v2/alerts") if a["status"]["state"] == "suppressed"]
    assert [a["labels"]["job"] for a in silenced] == [BROKEN]
    assert silenced[0]["status"]["silencedBy"] == [silence_id]
    run("silence", "expire", silence_id)
    assert silence_id not in run("silence", "query", "-q")
    assert silence_id in run("silence", "query", "--expired", "-q")


def test_ctrl_c_stops_cleanly(served: Served) -> None:
    process = served.process
    process.send_signal(signal.SIGINT)
    stdout, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "FIRING" in stdout and "TrunkBroken" in stdout


def test_serve_with_tokens_replays_silences_as_the_internal_principal(tmp_path: Any) -> None:
    """With `--tokens`, the scenario's silence events still go through: the replay calls the
    API with the session's own in-memory token, and any other caller needs a real token."""
    read_token = "read-token-for-the-serve-test"
    tokens = tmp_path / "tokens.json"
    digest = hashlib.sha256(read_token.encode()).hexdigest()
    tokens.write_text(json.dumps({"tokens": [{"sha256": digest, "principal": "carol", "scope": "read"}]}))
    port = free_port()
    command = [sys.executable, "-m", "trunkwatch_local.cli", "serve", "--port", f"{port}"]
    # The replay's silences, moved to end an hour ago, are still listed (their TTL is endsAt + 120h).
    scenario = scenario_ending_now(SCENARIOS / "silenced.jsonl", tmp_path / "scenario")
    command += ["--tokens", str(tokens), "--scenario", str(scenario)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/api/v2/silences"
    try:
        seen = wait_until_serving(process)
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(url)
        assert refused.value.code == 401
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {read_token}"})  # noqa: S310
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1
            silences = json.loads(response.read())
        assert len(silences) == 2  # both made by the replay
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    output = "".join(seen) + out + err
    assert "Bearer" not in output and "trunkwatch: error" not in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scenario", "tokens.json"]


def test_serve_takes_signed_github_deliveries_on_its_port() -> None:
    from tests.support import webhooks
    from trunkwatch.domain.config import load_deployment
    from trunkwatch_local.runtime import LocalRuntime
    from trunkwatch_local.session import Session

    secret = "a webhook secret for this test"
    trunk = {"repo": "pytorch/pytorch", "source": "github", "webhook": True, "poll_every": "0"}
    session = Session(LocalRuntime(webhook_secret=secret)).start(load_deployment({"trunks": [trunk]}))
    try:

        def deliver(event: str, payload: dict[str, Any], signed_with: str = secret) -> tuple[int, str]:
            body = json.dumps(payload).encode()
            request = urllib.request.Request(  # noqa: S310 - 127.0.0.1
                f"{session.api_url}/webhooks/github",
                data=body,
                method="POST",
                headers={
                    "Content-Type": "application/json",
                    "X-GitHub-Event": event,
                    "X-GitHub-Delivery": hashlib.sha256(body).hexdigest(),
                    "X-Hub-Signature-256": webhooks.sign(body, signed_with),
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                    return response.status, json.loads(response.read())["message"]
            except urllib.error.HTTPError as err:
                return err.code, json.loads(err.read())["message"]

        sha = "c" * 40
        assert deliver("push", webhooks.push([sha]), signed_with="not the secret")[0] == 401
        assert deliver("push", webhooks.push([sha])) == (200, "stored")
        failed = webhooks.workflow_job(sha, "linux-jammy / build", conclusion="failure")
        assert deliver("workflow_run", webhooks.run_of(failed)) == (200, "stored")
        assert deliver("workflow_job", failed) == (200, "stored")
        assert get(f"{session.api_url}/api/v2/alerts") == []  # one failure opens nothing
    finally:
        session.stop()
