"""Crash injection (`trunkwatch replay --chaos`): AWS calls that end their invocation."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from tests.support.scenarios import SCENARIOS
from trunkwatch_local.chaos import Chaos, InvocationDied
from trunkwatch_local.cli import main


@pytest.fixture
def sqs():
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def queues(sqs) -> list[str]:
    return sqs.list_queues().get("QueueUrls", [])


def dying_call(chaos: Chaos, sqs, name: str) -> str:
    """Create queue `name` inside an invocation that dies at it; where it died."""
    with chaos.installed(), chaos.invocation("evaluator"), pytest.raises(InvocationDied):
        sqs.create_queue(QueueName=name)
    return chaos.stats.crashes[-1].when


def test_a_call_that_dies_before_writes_nothing_and_after_writes_it(sqs) -> None:
    seen = {}
    for seed in range(20):
        when = dying_call(Chaos(seed, crash_rate=0.999), sqs, f"q{seed}")
        seen[when] = any(url.endswith(f"/q{seed}") for url in queues(sqs))
        if len(seen) == 2:
            break
    assert seen == {"before": False, "after": True}


def test_a_dead_invocation_makes_no_more_calls(sqs) -> None:
    chaos = Chaos(seed=7, crash_rate=0.999)
    with chaos.installed(), chaos.invocation("notifier"):
        with pytest.raises(InvocationDied):
            sqs.create_queue(QueueName="first")
        with pytest.raises(InvocationDied, match=r"notifier is dead; sqs\.CreateQueue was never made"):
            sqs.create_queue(QueueName="second")
    assert not any(url.endswith("/second") for url in queues(sqs))
    assert chaos.stats.calls == 1 and len(chaos.stats.crashes) == 1


def test_only_a_handlers_calls_die_and_the_patch_comes_off(sqs) -> None:
    chaos = Chaos(seed=1, crash_rate=0.999)
    with chaos.installed():
        sqs.create_queue(QueueName="the-runtime-s-own")  # outside any invocation
    assert chaos.stats.calls == 0
    with chaos.invocation("evaluator"):
        sqs.create_queue(QueueName="not-installed")  # the patch is off again
    assert len(queues(sqs)) == 2


def test_the_same_seed_dies_at_the_same_calls(sqs) -> None:
    def run(seed: int) -> list[tuple[str, str]]:
        chaos = Chaos(seed, crash_rate=0.3)
        for index in range(40):
            with chaos.installed(), chaos.invocation(f"f{index}"), contextlib.suppress(InvocationDied):
                sqs.create_queue(QueueName=f"s{seed}-{index}")
        return [(crash.function, crash.when) for crash in chaos.stats.crashes]

    first = run(3)
    assert first == run(3)
    assert 0 < len(first) < 40
    assert first != run(4)


@pytest.mark.parametrize("rate", ["1", "-0.1", "1.5"])
def test_a_crash_rate_outside_0_to_1_is_one_line(rate: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "tests/scenarios/basic-break.jsonl", "--chaos", "1", "--crash-rate", rate]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        error
        == f"trunkwatch: error: --crash-rate: crash rate must be at least 0 and below 1, not {float(rate)}"
    )


def test_the_chaos_benchmark_counts_lost_delayed_and_repeated_messages() -> None:
    from benchmarks.chaos import compare

    def row(at: str, status: str, job: str | None = "build") -> dict[str, object]:
        return {"at": at, "status": status, "alertname": "TrunkJobFailing", "job": job, "priority": "P3"}

    expected = [row("2026-11-18T10:00:00Z", "firing"), row("2026-11-18T11:00:00Z", "resolved")]
    published = [
        row("2026-11-18T10:01:00Z", "firing"),  # a minute late
        row("2026-11-18T10:02:00Z", "firing"),  # sent again
        row("2026-11-18T10:30:00Z", "resolved"),  # before it was due: not the expected one
    ]
    lost, extra, matched = compare(expected, published)
    assert lost == [expected[1]]
    assert extra == [published[1], published[2]]
    assert matched == [(expected[0], published[0])]


def test_a_message_is_due_by_the_first_quiet_tick_two_minutes_on() -> None:
    from benchmarks.chaos import due_by

    at, minute = datetime(2026, 11, 18, 10, tzinfo=UTC), timedelta(minutes=1)
    assert due_by(at, [], minute) == at + 2 * minute  # a tick left open waits 2 minutes
    # Ticks at which an invocation died (a webhook group's half second on included) do not count.
    died = [at, at + 2 * minute, at + 3.5 * minute]
    assert due_by(at, died, minute) == at + 4 * minute
    assert due_by(at, died, 5 * minute) == at + 7 * minute


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trunkwatch_local.cli", "replay", str(SCENARIOS / "silenced.jsonl"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_replay_without_crashes_is_the_plain_replay() -> None:
    # The plain replay on the in-memory store (it publishes what the emulated one does).
    plain, chaos = (
        replay("--json", "--store", "memory"),
        replay("--json", "--chaos", "1", "--crash-rate", "0"),
    )
    assert plain.returncode == chaos.returncode == 0

    def sent(stdout: str) -> list[tuple[str, str, str]]:  # the API's port and ids differ per run
        rows = [json.loads(line) for line in stdout.splitlines()]
        return [(row["at"], row["subject"], json.dumps(row["attributes"], sort_keys=True)) for row in rows]

    assert sent(plain.stdout) and sent(chaos.stdout) == sent(plain.stdout)
    assert chaos.stderr.splitlines()[-1] == (
        "trunkwatch: chaos seed 1: 0 of "
        + chaos.stderr.splitlines()[-1].split(" of ")[1].split(" ")[0]
        + " AWS calls killed their invocation (0 before the call, 0 after it; 0 right after a publish); "
        "0 stream batch retries, "
        "0 records dead-lettered, 0 scheduled invocations lost, 0 webhook deliveries failed"
    )


@pytest.mark.long
def test_a_replay_with_crashes_runs_to_its_end_and_counts_them() -> None:
    run = replay("--chaos", "5", "--crash-rate", "0.08")
    assert run.returncode == 0, run.stderr[-2000:]
    summary = re.fullmatch(
        r"trunkwatch: chaos seed 5: (\d+) of (\d+) AWS calls killed their invocation "
        r"\((\d+) before the call, (\d+) after it; (\d+) right after a publish\); "
        r"(\d+) stream batch retries, "
        r"(\d+) records dead-lettered, (\d+) scheduled invocations lost, 0 webhook deliveries failed",
        run.stderr.splitlines()[-1],
    )
    assert summary is not None, run.stderr.splitlines()[-1]
    crashes, calls, before, after, after_publish, retries, _, lost = map(int, summary.groups())
    assert 0 < crashes < calls and before + after == crashes and after_publish <= crashes
    assert retries + lost > 0  # every crash ends a stream batch (retried) or a schedule event
