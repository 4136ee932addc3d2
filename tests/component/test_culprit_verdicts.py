"""Culprit verdicts confirmed by reruns (`confirm: rerun`) through the local runtime: the
scenario tests/scenarios/verdicts-by-reruns.jsonl has a code breakage (its culprit fails again
on rerun, its last pass passes), a dependency breakage (every rerun of the job fails while it
lasts, also on the last pass) and a flaky job (its failures pass on rerun);
tests/scenarios/sharded-last-pass.jsonl a sharded job failing in a dependency breakage whose
failing shard did not run on the last pass; tests/scenarios/sibling-confirms-a-skipped-commit.jsonl
two jobs broken by one commit, one of which did not run on it. The local GitHub stand-in
answers the rerun requests and the HUD stand-in shows their results. All on the in-memory
store: test_install replays these scenarios on moto's table."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.scenarios import SCENARIOS
from trunkwatch.domain.cells import job_key
from trunkwatch.domain.clock import parse_time
from trunkwatch_local.github_server import GitHubServer
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.replay import read_replay
from trunkwatch_local.session import Session, replay_steps

SCENARIO = SCENARIOS / "verdicts-by-reruns.jsonl"
MINUTE = timedelta(minutes=1)  # the template's schedule
CODE = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
DEPENDENCY = "trunk / linux-jammy-cuda12.8-py3.10-gcc11 / test (default, linux.g5.4xlarge.nvidia.gpu)"
FLAKE = "trunk / macos-py3-arm64 / test (default, macos-m1-stable)"
# A sharded job failing during a dependency breakage, its failing shard absent on the last pass.
SHARDED = SCENARIOS / "sharded-last-pass.jsonl"
# Two jobs broken by change 4 with one failure line; the crossref job did not run on change 4.
SIBLINGS = SCENARIOS / "sibling-confirms-a-skipped-commit.jsonl"


def _replay(refusals: int = 0, scenario: Path = SCENARIO) -> tuple[Session, list[dict[str, Any]], list[Any]]:
    """The scenario's messages (as JSON), and each job alert's annotations through the API
    after every event, with the first `refusals` rerun requests answered 403."""
    replay = read_replay(scenario)
    session = Session()
    session.github.repo = replay.repo
    session.github.refuse(refusals)
    session.start(replay.deployment(session.hud.url, session.github.url))
    sent: list[dict[str, Any]] = []
    seen: list[Any] = []
    try:
        for _event, published in replay_steps(session, replay):
            sent += [message.as_json() for message in published if not message.is_digest]
            alerts = session.call_api("GET", "/api/v2/alerts")
            now = session.runtime.clock.now()  # the event's, or a poll's the reruns brought
            seen += [(now, a["labels"].get("job"), a["annotations"]) for a in alerts if "job" in a["labels"]]
    except BaseException:
        session.stop()
        raise
    session.stop()
    return session, sent, seen


@pytest.fixture(scope="module")
def replayed() -> tuple[Session, list[dict[str, Any]], list[Any]]:
    return _replay()


def _job_messages(sent: list[dict[str, Any]], job: str) -> list[tuple[str, str, dict[str, str]]]:
    return [
        (
            m["message"]["status"],
            m["message"]["notification_reason"],
            m["message"]["alerts"][0]["annotations"],
        )
        for m in sent
        if m["message"]["alerts"][0]["labels"].get("job") == job
    ]


def test_paging_is_not_delayed_the_verdict_comes_as_an_update(replayed: Any) -> None:
    _, sent, _ = replayed
    expected = {
        CODE: ["firing", "update; culprit confirmed", "resolved"],
        DEPENDENCY: ["firing", "update; environmental: the last green commit fails too", "resolved"],
        FLAKE: ["firing", "update; flaky", "resolved"],
    }
    for job, reasons in expected.items():
        messages = _job_messages(sent, job)
        assert [reason for _, reason, _ in messages] == reasons, job
        assert messages[0][2]["culprit_verdict"] == "unconfirmed"
        assert messages[0][2]["culprit_verdict_reason"] == "waiting for the last pass and culprit reruns"


def test_a_code_breakage_is_confirmed_on_its_culprit(replayed: Any) -> None:
    _, sent, _ = replayed
    (_, _, page), (_, _, update), _ = _job_messages(sent, CODE)
    assert update["culprit_verdict"] == "confirmed"
    assert update["culprit_sha"] == page["culprit_sha"] and update["culprit_pr"] == "170004"
    assert "passes on rerun and the culprit" in update["culprit_verdict_reason"]


@pytest.mark.parametrize(("job", "verdict"), [(DEPENDENCY, "environmental"), (FLAKE, "flaky")])
def test_a_cleared_suspect_is_named_as_suspect_only(replayed: Any, job: str, verdict: str) -> None:
    _, sent, _ = replayed
    _, (_, _, update), (_, _, resolution) = _job_messages(sent, job)
    for notes in (update, resolution):
        assert notes["culprit_verdict"] == verdict
        assert {k for k in notes if k.startswith("culprit_")} == {"culprit_verdict", "culprit_verdict_reason"}
        assert notes["suspect_sha"] and notes["suspect_pr"].isdigit()
        assert "Suspect:" in notes["description"] and "Culprit:" not in notes["description"]


def test_the_email_and_the_trunk_alert_say_the_verdict(replayed: Any) -> None:
    _, sent, _ = replayed
    emails = [m["email"] for m in sent if m["message"]["alerts"][0]["labels"].get("job") == DEPENDENCY]
    assert "Verdict: environmental, no commit to blame (the last pass" in emails[1]
    assert "Suspect (not to blame): " in emails[1]
    trunk = [
        m["message"]["alerts"][0]["annotations"]["description"]
        for m in sent
        if m["message"]["alerts"][0]["labels"]["alertname"] == "TrunkBroken"
        and m["message"]["status"] == "firing"
    ]
    lines = [line for d in trunk for line in d.splitlines()]
    assert any(
        line.startswith(f"- {CODE}: ") and ", culprit " in line and "(confirmed)" in line for line in lines
    )
    assert any(
        line.startswith(f"- {DEPENDENCY}: ") and ", suspect " in line and "(environmental)" in line
        for line in lines
    )


def test_at_most_two_reruns_an_episode_each_answered_201(replayed: Any) -> None:
    session, _, _ = replayed
    per_job = Counter(job_key(rerun.job) for rerun in session.github.accepted)
    assert per_job == {CODE: 2, DEPENDENCY: 2, FLAKE: 2}


def test_a_refused_request_leaves_unconfirmed_with_the_reason_and_is_retried() -> None:
    session, sent, seen = _replay(refusals=1)
    page_at = parse_time(_first_firing(sent, CODE))
    # The schedule's next poll (a minute on) sends the planned reruns, though the page is the same.
    requested_at = page_at + MINUTE
    refused = [a for at, job, a in seen if job == CODE and at == requested_at]
    assert refused[0]["culprit_verdict"] == "unconfirmed"
    reason = refused[0]["culprit_verdict_reason"]
    assert reason.startswith("the last pass rerun could not be requested: ")
    assert "answered 403: Resource not accessible by integration" in reason
    # The replay configures no github_token: the reason says what reruns need.
    assert "(no github_token: reruns need a token with actions: write)" in reason
    # The culprit's is accepted; the last pass's retried at the poll after, accepted, and the
    # verdict follows one rerun later.
    accepted = [rerun.at for rerun in session.github.accepted if job_key(rerun.job) == CODE]
    assert accepted == [requested_at, requested_at + MINUTE]
    messages = _job_messages(sent, CODE)
    assert [reason for _, reason, _ in messages][:2] == ["firing", "update; culprit confirmed"]


def test_reruns_are_sent_and_seen_on_the_schedule_not_at_the_next_snapshot(replayed: Any) -> None:
    """The scenario's snapshots are 30 minutes apart and its reruns take 30 minutes: the
    replay polls as the deployed one-minute schedule would while reruns are planned or run."""
    session, sent, _ = replayed
    for job in (CODE, DEPENDENCY, FLAKE):
        page_at = parse_time(_first_firing(sent, job))
        assert {r.at for r in session.github.accepted if job_key(r.job) == job} == {page_at + MINUTE}
        verdict_at = next(
            parse_time(m["at"])
            for m in sent
            if m["message"]["alerts"][0]["labels"].get("job") == job
            and m["message"]["notification_reason"].startswith("update")
        )
        assert verdict_at == page_at + MINUTE + timedelta(minutes=30)


def _first_firing(sent: list[dict[str, Any]], job: str) -> str:
    return next(
        m["at"]
        for m in sent
        if m["message"]["alerts"][0]["labels"].get("job") == job and m["message"]["status"] == "firing"
    )


def _post(url: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=b"", method="POST")  # noqa: S310 - a stand-in on 127.0.0.1
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, answer.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_the_stand_ins_answer_reruns_as_github_and_the_hud_shows_them() -> None:
    now = [parse_time("2026-11-18T20:00:00Z")]
    hud = HudServer(clock=lambda: now[0])
    github = GitHubServer("pytorch/pytorch", hud=hud)
    failed = {"id": 7, "conclusion": "failure", "status": "completed", "failureLines": ["FAILED t"]}
    running = {"id": 8, "conclusion": "pending", "status": "in_progress"}
    hud.serve(
        {
            "jobNames": ["a", "b"],
            "shaGrid": [
                {
                    "sha": "s1",
                    "jobs": [{**failed, "rerun": {"conclusion": "success", "durationS": 600}}, running],
                }
            ],
        }
    )
    try:
        served = json.loads(urllib.request.urlopen(f"{hud.url}/api/hud/pytorch/pytorch/main/1").read())  # noqa: S310
        assert served["shaGrid"][0]["jobs"][0] == failed  # never the `rerun` key
        jobs = f"{github.url}/repos/pytorch/pytorch/actions/jobs"
        assert _post(f"{jobs}/7/rerun") == (201, b"")
        for job in (8, 99):  # still running; unknown
            status, body = _post(f"{jobs}/{job}/rerun")
            assert status == 404 and json.loads(body)["message"] == "Not Found"
        github.refuse(1)
        status, body = _post(f"{jobs}/7/rerun")
        assert status == 403 and json.loads(body)["message"] == "Resource not accessible by integration"
        assert _post(f"{github.url}/repos/other/repo/actions/jobs/7/rerun")[0] == 404
        now[0] += timedelta(minutes=10)
        newest = hud.served()["shaGrid"][0]["jobs"][0]
        assert newest["conclusion"] == "success" and newest["failedPreviousRun"] is True
        assert newest["id"] != 7 and "failureLines" not in newest and "rerun" not in newest
        assert [rerun.job_id for rerun in github.accepted] == [7]
    finally:
        github.stop()
        hud.stop()


def test_a_failing_shard_absent_on_the_last_pass_is_rerun_where_it_last_passed() -> None:
    # The job passed on the last pass by its other shard alone; that shard passing again would
    # have confirmed an innocent commit. The failing shard is rerun where it last passed
    # before, and fails there too: a dependency breakage, no commit blamed.
    session, sent, _ = _replay(scenario=SHARDED)
    job = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
    messages = _job_messages(sent, job)
    assert [(status, reason.split(";")[0]) for status, reason, _ in messages] == [
        ("firing", "firing"),
        ("firing", "update"),
        ("resolved", "resolved"),
    ]
    page, update = messages[0][2], messages[1][2]
    assert page["culprit_verdict"] == "unconfirmed"
    assert update["culprit_verdict"] == "environmental" and "culprit_sha" not in update
    assert all(m[2]["culprit_verdict"] != "confirmed" for m in messages)
    rerun_shas = [rerun.sha for rerun in session.github.accepted]
    assert len(rerun_shas) == 2 and page["culprit_sha"] in rerun_shas
    (older,) = set(rerun_shas) - {page["culprit_sha"]}
    assert older != page["last_pass_sha"]  # the commit before it, where the failing shard passed
    assert update["culprit_verdict_reason"] == f"the last pass {older[:12]} fails on rerun too"


def test_a_job_that_skipped_the_breaking_commit_is_confirmed_on_it_by_its_sibling() -> None:
    # The crossref job's own reruns confirm only its range (change 3 passes again, change 5
    # fails again): it did not run on change 4. The default job, failing with the same line,
    # had change 4 confirmed by its reruns: that names the commit, which the crossref job's
    # update then blames (its page had named change 5, the first failure it saw).
    session, sent, _ = _replay(scenario=SIBLINGS)
    default = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
    crossref = "pull / linux-jammy-py3.10-gcc11 / test (crossref, linux.2xlarge)"
    (_, _, page), (_, reason, update), (_, _, resolution) = _job_messages(sent, crossref)
    _, (_, _, sibling), _ = _job_messages(sent, default)
    assert sibling["culprit_verdict"] == "confirmed" and sibling["culprit_pr"] == "171004"
    assert page["culprit_verdict"] == "unconfirmed" and page["culprit_pr"] == "171005"
    assert reason == "update; culprit confirmed"
    assert update["culprit_sha"] == sibling["culprit_sha"] and update["culprit_pr"] == "171004"
    assert update["culprit_range"] == f"{page['last_pass_sha'][:12]}..{sibling['culprit_sha'][:12]}"
    assert (
        f"the job did not run on {sibling['culprit_sha'][:12]}, which reruns of {default}"
        in (update["culprit_verdict_reason"])
    )
    assert resolution["culprit_pr"] == "171004"
    # Each job's own two reruns, no more: the sibling's evidence costs none.
    assert Counter(job_key(rerun.job) for rerun in session.github.accepted) == {default: 2, crossref: 2}
