"""Culprits confirmed by Buildkite job retries (`confirm: rerun` on a `buildkite` trunk): the
Buildkite stand-in answers `PUT .../builds/{number}/jobs/{id}/retry` as Buildkite does and
shows the retry in its builds listing; a refused retry leaves the verdict unconfirmed with
Buildkite's answer and is tried again. (That the verdicts are those GitHub reruns give the
HUD form is tests/component/test_buildkite_replay.py.)"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.buildkite import PIPELINE, build, buildkite_replay, job
from tests.support.scenarios import SCENARIOS
from trunkwatch_local.buildkite_server import REFUSED, BuildkiteServer
from trunkwatch_local.replay import parse_replay
from trunkwatch_local.session import Session, replay_steps

T0 = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
SHA = "3f0c5a1e9b7d2c4e6f8a0b1c3d5e7f9a1b2c3d4e"
MINUTE = timedelta(minutes=1)  # the template's schedule
CODE = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"


def _put(url: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, method="PUT")  # noqa: S310 - the stand-in on 127.0.0.1
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_stand_in_retries_a_job_once_by_its_id_and_shows_the_retry() -> None:
    now = [T0 + timedelta(hours=1)]
    server = BuildkiteServer(PIPELINE, clock=lambda: now[0])
    failed = job(3, "Unit tests", "failed", rerun={"state": "passed", "durationS": 600})
    running = job(3, "Docs", "running")
    server.serve([build(3, SHA, T0, [failed, running], finished=T0 + timedelta(minutes=20))])
    jobs = f"{server.url}{server.prefix}/builds/3/jobs"
    try:
        status, retry = _put(f"{jobs}/{failed['id']}/retry")
        assert status == 200 and retry["state"] == "scheduled" and retry["id"] != failed["id"]
        assert _put(f"{jobs}/{failed['id']}/retry")[0] == 422  # a job id retries once
        assert _put(f"{jobs}/{running['id']}/retry")[0] == 422  # not finished
        assert _put(f"{server.url}{server.prefix}/builds/4/jobs/{failed['id']}/retry")[0] == 404
        shown = server.served()[0]
        assert shown["state"] == "running" and shown["finished_at"] is None
        old, new = shown["jobs"][0], shown["jobs"][-1]
        assert (old["retried"], old["retried_in_job_id"]) == (True, retry["id"])
        assert (new["id"], new["state"]) == (retry["id"], "running") and "rerun" not in old
        now[0] += timedelta(minutes=10)  # the retry's durationS
        shown = server.served()[0]
        assert shown["jobs"][-1]["state"] == "passed" and shown["finished_at"] is not None
        # A further retry goes through the newer job.
        status, again = _put(f"{jobs}/{retry['id']}/retry")
        assert status == 200 and again["id"] not in (failed["id"], retry["id"])
        server.refuse_retries(1)
        assert _put(f"{jobs}/{again['id']}/retry") == (403, {"message": REFUSED})
    finally:
        server.stop()


def test_a_refused_retry_leaves_unconfirmed_with_buildkites_answer_and_is_tried_again() -> None:
    scenario = SCENARIOS / "verdicts-by-reruns.jsonl"
    replay = parse_replay(buildkite_replay(scenario.read_text().splitlines()))
    session = Session()
    session.buildkite.refuse_retries(1)
    session.start(session.replaying_from(replay))
    said: list[tuple[datetime, str, str]] = []
    try:
        for _event, _published in replay_steps(session, replay):
            now = session.runtime.clock.now()
            for alert in session.call_api("GET", "/api/v2/alerts"):
                if alert["labels"].get("job") == CODE:
                    notes = alert["annotations"]
                    said.append((now, notes["culprit_verdict"], notes["culprit_verdict_reason"]))
            if said and said[-1][1] == "confirmed":
                break
        retries = [r.path for r in session.buildkite.requests if r.method == "PUT"]
    finally:
        session.stop()
    paged = said[0][0]
    # The schedule's next poll sends both retries: the last pass's (build 4) is refused.
    last_pass, culprit = (f"/v2/organizations/acme/pipelines/ci/builds/{n}/jobs/" for n in (4, 5))
    refused = next(reason for at, _, reason in said if at == paged + MINUTE)
    assert refused.startswith(
        "the last pass rerun could not be requested: "
        f"Buildkite retries for pytorch/pytorch#main: PUT {last_pass}"
    )
    assert refused.endswith(f"/retry answered 403: {REFUSED}")
    # Tried again at the poll after, accepted; the verdict comes once both retries are over.
    assert [path.rsplit("/jobs/", 1)[0] + "/jobs/" for path in retries] == [last_pass, culprit, last_pass]
    assert retries[0] == retries[2]
    assert said[-1][1:] == (
        "confirmed",
        "the last pass 898396f1fb26 passes on rerun and the culprit cc47a42ec29d fails again on rerun",
    )
