"""`trunkwatch serve` and `poll` on bad input (one line, exit 2), an organization's
configuration served, a scenario served at its own time, and `poll` keeping its state."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.component.test_cli import one_line_error, trunkwatch
from tests.support.paths import ROOT
from tests.support.scenarios import SCENARIOS
from trunkwatch.domain.clock import parse_time
from trunkwatch_local.hud_server import HudServer

TOKENS_SHAPE = '{"tokens": [{"sha256":'


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        yield listening.getsockname()[1]


def test_serve_on_a_busy_port_names_it_and_the_fix(busy_port: int) -> None:
    one_line_error(trunkwatch("serve", "--port", str(busy_port)), f"port {busy_port}", "--port")


@pytest.mark.parametrize("port", ["80000", "-1", "http", "9093.5"])
def test_serve_on_an_invalid_port(port: str) -> None:
    one_line_error(trunkwatch("serve", "--port", port), "--port", f"'{port}' is not a port number")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"tokens": "alice"}', ["tokens: Input should be a valid list", TOKENS_SHAPE]),
        ('[{"sha256": "ab"}]', ["invalid API tokens document", TOKENS_SHAPE]),
        ('{"tokens": [{"sha256": "ab", "principal": "a", "scope": "admin"}]}', ["tokens.0", TOKENS_SHAPE]),
        ("tokens: [", ["not valid JSON"]),
    ],
)
def test_serve_with_a_tokens_file_of_the_wrong_shape(tmp_path: Path, content: str, words: list[str]) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content)
    one_line_error(trunkwatch("serve", "--tokens", str(path), "--port", "0"), str(path), *words)


@pytest.mark.parametrize("option", ["--tokens", "--config", "--scenario"])
def test_serve_with_a_missing_file(tmp_path: Path, option: str) -> None:
    missing = str(tmp_path / "absent.json")
    one_line_error(trunkwatch("serve", option, missing, "--port", "0"), missing, "No such file")


def test_replay_refuses_a_snapshot_the_hud_source_would_refuse_before_it_starts(tmp_path: Path) -> None:
    """A `hud` body that is an object but not a HUD response: its line, before any output."""
    lines = (SCENARIOS / "basic-break.jsonl").read_text().splitlines()
    broken = json.loads(lines[3])
    broken["hud"]["shaGrid"][0]["jobs"] = broken["hud"]["shaGrid"][0]["jobs"][1:]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([*lines[:3], json.dumps(broken), *lines[4:]]) + "\n")
    one_line_error(trunkwatch("replay", str(path)), f"{path}:4:", "not a valid HUD API response", "jobNames")


def serving(*args: str) -> tuple[subprocess.Popen[str], str]:
    """`trunkwatch serve ARGS --port 0`, once it says it serves (polling or not); its API URL."""
    command = [sys.executable, "-m", "trunkwatch_local.cli", "serve", *args, "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen: list[str] = []
    url = None
    while line := process.stderr.readline():
        seen.append(line)
        found = re.search(r"API on (http://127\.0\.0\.1:\d+)", line)
        url = found.group(1) if found else url
        if "Ctrl-C stops" in line:
            break
    assert url is not None and "Ctrl-C stops" in seen[-1], "".join(seen)
    return process, url


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    return err


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 - 127.0.0.1
        return json.loads(response.read())


def test_serve_lists_every_trunk_of_an_organization() -> None:
    """examples/organization.yaml: 100 trunks, every one of them on /api/v2/trunks."""
    process, url = serving("--config", str(ROOT / "examples" / "organization.yaml"))
    try:
        trunks = get(f"{url}/api/v2/trunks")
    finally:
        stop(process)
    assert len(trunks) == 100 == len({trunk["trunk"] for trunk in trunks})
    assert {"acme/payments-api#main", "acme/payments-infra#production"} <= {t["trunk"] for t in trunks}


def test_serve_scenario_serves_the_scenarios_time() -> None:
    """After the replay the clock goes on from the scenario's last event, not from today."""
    scenario = SCENARIOS / "basic-break.jsonl"
    last = parse_time(json.loads(scenario.read_text().splitlines()[-1])["at"])
    process, url = serving("--scenario", str(scenario))
    try:
        trunk = urllib.parse.quote("pytorch/pytorch#main")
        history = get(f"{url}/api/v2/trunks/history?trunk={trunk}")
    finally:
        stop(process)
    served = parse_time(history["until"])
    assert last <= served and (served - last).total_seconds() < 3600, history["until"]


def _failing_job_grid() -> dict[str, Any]:
    """Three commits, long ago, on which one job fails: TrunkJobFailing once polled."""
    commits = [
        ("ccc", "2020-01-01T02:00:00Z"),
        ("bbb", "2020-01-01T01:00:00Z"),
        ("aaa", "2020-01-01T00:00:00Z"),
    ]
    return {
        "jobNames": ["pull / linux / test", "lint / l"],
        "shaGrid": [
            {
                "sha": sha,
                "time": at,
                "prNum": n,
                "commitTitle": f"commit {sha}",
                "author": "dev",
                "jobs": [
                    {"conclusion": "failure", "status": "completed", "htmlUrl": f"u{sha}"},
                    {"conclusion": "success", "status": "completed", "htmlUrl": f"l{sha}"},
                ],
            }
            for n, (sha, at) in enumerate(commits, start=1)
        ],
    }


def test_poll_run_twice_sends_nothing_new_the_second_time(tmp_path: Path) -> None:
    hud = HudServer()
    hud.serve(_failing_job_grid())
    config = tmp_path / "config.yaml"
    # The commits are from 2020: failures of any age fire, whatever today's date is.
    config.write_text(
        f"defaults: {{max_failure_age: 876000h, retention: 876001h}}\ntrunks:\n  - repo: pytorch/pytorch\n"
        f"    url: {hud.url}\n"
    )
    state = tmp_path / "state" / "poll.json"
    try:
        first = trunkwatch("poll", "--config", str(config), "--state", str(state))
        second = trunkwatch("poll", "--config", str(config), "--state", str(state))
    finally:
        hud.stop()
    assert first.returncode == 0, first.stderr
    assert "FIRING" in first.stdout and "TrunkJobFailing" in first.stdout
    assert (
        first.stderr
        == f"trunkwatch: poll state starts in {state} (kept between runs; --state chooses another)\n"
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout == "-- 0 notifications sent\n" and second.stderr == ""


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("not json", ["not valid JSON", "delete it to start afresh"]),
        ('{"version": 99, "items": []}', ["is not a trunkwatch poll state", "delete it"]),
        ('{"version": 1, "items": [{"pk": "x"}]}', ["holds an item the table refuses", "delete it"]),
    ],
)
def test_poll_with_a_broken_state_file(tmp_path: Path, content: str, words: list[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("trunks:\n  - repo: pytorch/pytorch\n    url: http://127.0.0.1:9\n")
    state = tmp_path / "poll.json"
    state.write_text(content)
    one_line_error(trunkwatch("poll", "--config", str(config), "--state", str(state)), str(state), *words)


def test_poll_state_puts_its_items_back_without_their_stream_records(tmp_path: Path) -> None:
    """The restored items' changes were handled by the run that made them: the stream
    mappings start after them."""
    from trunkwatch import sources
    from trunkwatch.domain.config import load_deployment
    from trunkwatch_local import poll_state
    from trunkwatch_local.runtime import LocalRuntime

    state = tmp_path / "poll.json"
    item = {"pk": {"S": "TRUNK#pytorch/pytorch#main"}, "sk": {"S": "JOBS"}, "kind": {"S": "jobs"}}
    state.write_text(json.dumps({"version": poll_state.VERSION, "items": [item]}))
    deployment = load_deployment(
        {"trunks": [{"repo": "pytorch/pytorch", "url": "http://127.0.0.1:9"}]}, sources=sources.REGISTRY
    )
    with LocalRuntime(store="dynamodb") as runtime:
        runtime.start(deployment)
        assert poll_state.restore(runtime.stack, runtime.pump, state) == 1
        assert runtime.pump.drain() == 0
