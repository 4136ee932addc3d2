"""The `trunkwatch` command: demo output, and one-line errors for bad input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.scenarios import SCENARIOS


def trunkwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trunkwatch_local.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("store", [(), ("--store", "dynamodb")], ids=["memory", "dynamodb"])
def test_demo_timeline_shows_trunk_broken_firing_and_resolving(store: tuple[str, ...]) -> None:
    run = trunkwatch("demo", *store)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    firing = [line for line in lines if "FIRING" in line and "TrunkBroken" in line]
    resolved = [line for line in lines if "RESOLVED" in line and "TrunkBroken" in line]
    assert len(firing) == 1 and len(resolved) == 1
    assert lines.index(firing[0]) < lines.index(resolved[0])
    assert any(line.strip().startswith("culprit:") and "#160004" in line for line in lines)
    assert lines[-1] == "-- 4 notifications sent"


def one_line_error(run: subprocess.CompletedProcess[str], *words: str) -> None:
    assert run.returncode == 2
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "Traceback" not in run.stderr
    for word in words:
        assert word in run.stderr


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("", ["empty file"]),
        ("not json\n", [":1:", "not valid JSON"]),
        ('{"branch": "main"}\n', [":1:", "repo"]),
        ('{"repo": "a/b", "config": {"failures_to_open": "many"}}\n', ["failures_to_open"]),
        ('{"repo": "a/b", "config": {"no_such_key": 1}}\n', ["no_such_key", "unknown key"]),
        ('{"repo": "a/b", "config": {"include": "("}}\n', ["include", "invalid regex"]),
        ('{"repo": "a/b", "config": {"max_failure_age": "1 day"}}\n', ["max_failure_age", "duration"]),
        ('{"repo": "a/b"}\n{"at": "2026-11-18T15:00:00Z"}\n', [":2:", "exactly one of"]),
        ('{"repo": "a/b"}\n{"at": "yesterday", "tick": true}\n', [":2:", "RFC 3339"]),
        ('{"repo": "a/b"}\n{"at": "2026-11-18T15:00:00Z", "hud": []}\n', [":2:", "HUD"]),
        ('{"repo": "a/b"}\n{"at": "2026-11-18T15:00:00Z", "expire": "nope"}\n', ["nope"]),
        ('{"repo": "a/b"}\n{"at": "2026-11-18T15:00:00Z", "hud_status": "down"}\n', [":2:", "hud_status"]),
        ('{"repo": "a/b"}\n{"at": "2026-11-18T15:00:00Z", "hud_status": 42}\n', [":2:", "HTTP status"]),
        ('{"repo": "a/b", "config": {"source_down_after": "soon"}}\n', ["source_down_after", "duration"]),
        ('{"repo": "a/b", "receivers": [{"type": "email"}]}\n', [":1:", "receivers.0.type", "'email'"]),
        (
            '{"repo": "a/b"}\n'
            '{"at": "2026-11-18T15:00:00Z", "tick": true}\n'
            '{"at": "2026-11-18T14:00:00Z", "tick": true}\n',
            [":3:", "time order"],
        ),
    ],
)
def test_malformed_replay_file(tmp_path: Path, content: str, words: list[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    one_line_error(trunkwatch("replay", str(path)), *words)


def test_closed_stdout_ends_quietly() -> None:
    """`trunkwatch demo --json | head -1`: the reader goes away after one line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "trunkwatch_local.cli", "demo", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    assert process.wait(timeout=120) == 0
    assert json.loads(first)["message"]["status"] == "firing"
    assert "BrokenPipeError" not in process.stderr.read()


def test_version() -> None:
    run = trunkwatch("--version")
    assert run.returncode == 0 and run.stdout.startswith("trunkwatch ")


def test_missing_replay_file(tmp_path: Path) -> None:
    one_line_error(trunkwatch("replay", str(tmp_path / "absent.jsonl")), "cannot read", "absent.jsonl")


def test_a_gzipped_replay_gives_the_same_messages_as_the_plain_one(tmp_path: Path) -> None:
    plain = SCENARIOS / "basic-break.jsonl"
    zipped = tmp_path / "basic-break.jsonl.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    runs = [trunkwatch("replay", str(path), "--json") for path in (plain, zipped)]
    assert all(run.returncode == 0 for run in runs), runs[1].stderr
    plain_messages, zipped_messages = (
        [
            (m["at"], m["subject"], m["message"]["status"], m["message"]["alerts"][0]["labels"])
            for m in map(json.loads, run.stdout.splitlines())
        ]
        for run in runs
    )
    assert len(plain_messages) >= 2 and zipped_messages == plain_messages  # each run has its own port


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda data: data[: len(data) // 2], ["corrupt gzip data"]),  # cut short
        (lambda data: data[:20] + bytes(b ^ 0xFF for b in data[20:60]) + data[60:], ["corrupt gzip data"]),
        (lambda data: gzip.compress(b"\xff\xfe not text"), ["not UTF-8"]),
    ],
    ids=["truncated", "garbled", "not-text"],
)
def test_a_corrupt_gzipped_replay_is_refused_before_anything_runs(
    tmp_path: Path, damage: Callable[[bytes], bytes], words: list[str]
) -> None:
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(damage(gzip.compress((SCENARIOS / "basic-break.jsonl").read_bytes())))
    one_line_error(trunkwatch("replay", str(path)), "bad.jsonl.gz", *words)


def test_unknown_option() -> None:
    one_line_error(trunkwatch("demo", "--colour"), "--colour")


def test_missing_required_option() -> None:
    one_line_error(trunkwatch("poll"), "--config")


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"trunks": []}, ["trunks"]),
        ({"trunks": [{"branch": "main"}]}, ["trunks.0.repo"]),
        ({"trunks": [{"repo": "a/b", "source": "jenkins"}]}, ["trunks.0.source"]),
        ({"trunks": [{"repo": "a/b"}], "defaults": {"repeat_interval": "often"}}, ["repeat_interval"]),
        (
            {"trunks": [{"repo": "a/b", "token": {"env": "A", "ssm": "/b"}}]},
            ["exactly one of env, ssm, secret"],
        ),
        ({"trunks": [{"repo": "a/b"}], "colour": "blue"}, ["colour", "unknown key"]),
        (
            {"trunks": [{"repo": "a/b"}], "receivers": [{"type": "opsgenie"}]},
            [
                "receivers.0.type: unknown receiver type 'opsgenie' "
                "(known: github_culprit, github_issues, pagerduty, slack, sns, topic, webhook)"
            ],
        ),
        (
            {"trunks": [{"repo": "a/b"}], "receivers": [{"type": "github_culprit", "labels": ["x"]}]},
            ["receivers.0.labels: unknown key"],
        ),
    ],
)
def test_broken_config(tmp_path: Path, config: dict[str, object], words: list[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    one_line_error(trunkwatch("poll", "--config", str(path)), *words)


def test_config_that_is_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("trunks: [unclosed\n")
    run = trunkwatch("poll", "--config", str(path))
    assert run.returncode == 2 and "not valid YAML" in run.stderr and "Traceback" not in run.stderr


def test_example_configuration_is_valid() -> None:
    from trunkwatch.app.configuration import load_configuration

    deployment = load_configuration(ROOT / "examples" / "config.yaml")
    pytorch, vision = deployment.trunks
    rule = deployment.rule_for(pytorch)
    assert rule.in_scope("pull / linux-jammy / build") and not rule.in_scope("periodic / x")
    assert rule.team_for("trunk / linux-jammy-cuda12.8 / test") == "pytorch-gpu"
    assert vision.source == "github" and deployment.rule_for(vision).team == "ci-oncall"


def test_unknown_store() -> None:
    one_line_error(trunkwatch("replay", "x.jsonl", "--store", "sqlite"), "--store", "memory")
