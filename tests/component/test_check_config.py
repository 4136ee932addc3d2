"""`trunkwatch check-config FILE`: the file loaded as the deployed functions load theirs, and
one line for each thing wrong, naming the file, the line and the key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.component.test_cli import one_line_error, trunkwatch
from tests.support.paths import ROOT


@pytest.mark.parametrize(
    ("path", "summary"),
    [
        ("examples/organization.yaml", "100 trunks (100 github; 80 webhook-fed), 2 receivers"),
        ("examples/config.yaml", "2 trunks (1 github, 1 hud; 0 webhook-fed), 0 receivers"),
        ("examples/vllm.yaml", "1 trunk (1 buildkite; 0 webhook-fed), 0 receivers"),
        ("config/trunkwatch.yaml", "1 trunk (1 hud; 0 webhook-fed), 0 receivers"),
    ],
)
def test_a_valid_file_is_summed_up_in_one_line(path: str, summary: str) -> None:
    run = trunkwatch("check-config", str(ROOT / path))
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"{ROOT / path}: valid: {summary}\n" and run.stderr == ""


TRUNKS = "trunks:\n  - repo: acme/api\n"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        # A typo in `defaults`: under `defaults`, with the key it looks like and the valid ones.
        (
            "defaults:\n  failures_to_opn: 2\n" + TRUNKS,
            [
                ":2: defaults.failures_to_opn: unknown key",
                "did you mean 'failures_to_open'?",
                "reruns_per_hour",
            ],
        ),
        ("defaults:\n  repeat_interval: often\n" + TRUNKS, [":2: defaults.repeat_interval:", "duration"]),
        (
            TRUNKS + "    brnach: dev\n",
            [":3: trunks.0.brnach: unknown key", "did you mean 'branch'?", "poll_every"],
        ),
        (
            TRUNKS + "    config: {failures_to_open: many}\n",
            [":3: trunks.0.config.failures_to_open:", "integer"],
        ),
        (TRUNKS + "    config: {incude: x}\n", [":3: trunks.0.config.incude: unknown key", "'include'"]),
        (
            "trunk_defaults: {webhok: true}\n" + TRUNKS,
            [":1: trunk_defaults.webhok: unknown key", "did you mean 'webhook'?"],
        ),
        ("trunk_defaults: {source: jenkins}\n" + TRUNKS, [":1: trunk_defaults.source:", "unknown source"]),
        ("trunk_defaults: {repo: a/b}\n" + TRUNKS, [":1: trunk_defaults.repo: unknown key"]),
        ("colour: blue\n" + TRUNKS, [":1: colour: unknown key", "trunk_defaults"]),
        # YAML syntax: the file and the line.
        ("trunks: [unclosed\n", [":2: not valid YAML", "line 1"]),
        (
            TRUNKS + "  - repo: acme/web\n    repo: acme/www\n",
            [":4: not valid YAML", "'repo' is given twice"],
        ),
        # Wrong types.
        ("trunks: acme/api\n", [":1: trunks: Input should be a valid list"]),
        (TRUNKS + "    per_page: lots\n", [":3: trunks.0.per_page:", "integer"]),
        (TRUNKS + "    webhook: yes\n", [":3: trunks.0.webhook:", "true or false"]),
        ("schedule: hourly\n" + TRUNKS, [":1: schedule:", "rate"]),
        ("- acme/api\n", [": a configuration is a mapping"]),
        ("", [": a configuration is a mapping"]),
        ("trunks: []\n", [":1: trunks: List should have at least 1 item"]),
        ("trunks:\n  - branch: main\n", [":2: trunks.0.repo: Field required"]),
        (TRUNKS + "receivers:\n  - type: opsgenie\n", [":4: receivers.0.type: unknown receiver type"]),
        # A Buildkite trunk: its pipeline, and only there.
        (
            TRUNKS + "    source: buildkite\n",
            [":2: trunks.0.pipeline: Field required for source 'buildkite'", "org/slug"],
        ),
        (TRUNKS + "    pipeline: acme/ci\n", [":3: trunks.0.pipeline: only for source 'buildkite'"]),
        (
            TRUNKS + "    source: buildkite\n    pipeline: acme\n",
            [":4: trunks.0.pipeline: String should match pattern"],
        ),
    ],
)
def test_each_thing_wrong_is_one_line_naming_file_line_and_key(
    tmp_path: Path, content: str, words: list[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(content)
    one_line_error(trunkwatch("check-config", str(path)), str(path), *words)


def test_a_missing_file() -> None:
    one_line_error(trunkwatch("check-config", "no-such-config.yaml"), "no-such-config.yaml", "No such file")


def test_every_problem_of_a_document_is_found_in_one_pass(tmp_path: Path) -> None:
    """A trunk's rule keys beside its own errors, and a defaults typo once, not once a trunk."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "defaults:\n"
        "  teem: infra\n"
        "trunks:\n"
        "  - repo: acme/api\n"
        "    brnach: dev\n"
        "    config:\n"
        "      failures_to_open: 0\n"
        "  - repo: acme/web\n"
    )
    run = trunkwatch("check-config", str(path))
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr
    assert [line.split(" (", 1)[0] for line in run.stderr.splitlines()] == [
        f"{path}:2: defaults.teem: unknown key",
        f"{path}:5: trunks.0.brnach: unknown key",
        f"{path}:7: trunks.0.config.failures_to_open: Input should be greater than or equal to 1",
    ]


def test_poll_and_serve_report_a_file_as_check_config_does(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("defaults:\n  failures_to_opn: 2\n" + TRUNKS)
    expected = trunkwatch("check-config", str(path)).stderr
    assert f"{path}:2: defaults.failures_to_opn: unknown key" in expected
    assert trunkwatch("poll", "--config", str(path)).stderr == expected
    assert trunkwatch("serve", "--config", str(path), "--port", "0").stderr == expected
