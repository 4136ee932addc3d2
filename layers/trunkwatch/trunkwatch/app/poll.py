"""One trunk's poll, and which trunks are due at a schedule tick.

The schedule starts the dispatcher (`app/dispatch.py`), which sends one message per due
trunk (`due_trunks`); ingest polls each message's trunk in an invocation of its own
(`poll_one`), so trunks poll in parallel and one trunk's failure or slowness touches no
other. Whatever a poll raises (a SourceError, a ConfigError, or any other exception)
becomes a classified failure of that trunk (a `poll failed` log line and the `PollErrors`
metric), and its HTTP client enforces the invocation's deadline, so a slow or hostile
source cannot outlive it.
"""

from __future__ import annotations

import functools
import json
import time
import traceback
from dataclasses import asdict
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from trunkwatch.app.confirm import RequestRerun
from trunkwatch.app.ingest import poll_trunk
from trunkwatch.app.trunk_metrics import SECONDS_SINCE_GOOD_POLL, trunk_gauge
from trunkwatch.domain.cells import JobRun
from trunkwatch.domain.config import BUILDKITE_SOURCE, ConfigError, Deployment, RuleConfig, TrunkConfig
from trunkwatch.domain.rule import webhooks_down
from trunkwatch.net.http import HttpClient, HttpError
from trunkwatch.sources import make_source
from trunkwatch.sources.base import SourceError, base_url
from trunkwatch.storage.port import Storage, Trunks

# Without a deadline from the caller (the Lambda's remaining time), each trunk gets this long.
TRUNK_BUDGET_S = 45.0

logger = Logger(child=True)
metrics = Metrics()


def due_trunks(trunks: Trunks, deployment: Deployment, now: datetime) -> list[TrunkConfig]:
    """The trunks to poll at `now`, in configuration order: every poll-fed trunk, and each
    webhook-fed one whose backstop poll is due. A trunk whose state cannot be read is due
    (its poll records what is wrong), so one trunk's error never holds back the others."""
    due = []
    for trunk in deployment.trunks:
        try:
            if not _due(trunks, trunk, now):
                continue
        except Exception as err:  # one trunk's failure must not stop the others
            kind, message = classify(err)
            logger.error(
                "cannot tell whether the poll is due; polling it",
                extra={"trunk": trunk.trunk_id, "cause": kind, "error": message},
            )
        due.append(trunk)
    return due


def poll_one(
    storage: Storage,
    deployment: Deployment,
    trunk: TrunkConfig,
    now: datetime,
    deadline: float | None = None,
    gauges: bool = False,
) -> dict[str, Any]:
    """Poll one trunk; whatever it raises is logged, counted and recorded as its failure.

    `deadline` (a `time.monotonic()` value) is when the poll must be over (its HTTP client
    enforces it); without one it gets TRUNK_BUDGET_S. `gauges`: publish the trunk's seconds
    since its last good poll (for the stack's dashboard, `Settings.dashboard_metrics`). The
    result has the shape of a batch of polls: `polled` (the poll's result) or `errors` (its
    failure), one of them non-empty.
    """
    trunks = storage.trunks
    deadline = time.monotonic() + TRUNK_BUDGET_S if deadline is None else deadline
    http = HttpClient(deadline=deadline)
    result = None
    try:
        rule = deployment.rule_for(trunk)
        reruns = _rerun_requests(trunk, http) if rule.confirms else None
        result = poll_trunk(storage, trunk, rule, make_source(trunk, http), now, reruns)
    except Exception as err:  # the failure is the trunk's; the invocation reports it
        kind, message = classify(err)
        logger.error(
            "poll failed; nothing written, the next poll catches up",
            extra={"trunk": trunk.trunk_id, "cause": kind, "error": message},
        )
        metrics.add_metric(name="PollErrors", unit=MetricUnit.Count, value=1)
        trunks.record_poll_failure(trunk.trunk_id, now, kind, message)
        if gauges:
            _seconds_since_good_poll(trunks, trunk.trunk_id, now)
        return {"polled": [], "errors": [{"trunk": trunk.trunk_id, "cause": kind, "error": message}]}
    finally:
        http.close()
        if trunk.webhook and result is None:
            trunks.record_polled(trunk.trunk_id, now)
    if result.rate_limited:
        cause = {"trunk": trunk.trunk_id, "cause": "rate_limited", "error": result.rate_limited}
        logger.warning("poll stopped at a rate limit; it resumes when the limit allows", extra=cause)
        metrics.add_metric(name="PollErrors", unit=MetricUnit.Count, value=1)
    if gauges:
        trunk_gauge(SECONDS_SINCE_GOOD_POLL, trunk.trunk_id, 0, MetricUnit.Seconds)
    logger.info("polled", extra=asdict(result))
    metrics.add_metric(name="CellsIngested", unit=MetricUnit.Count, value=result.cells_written)
    if result.reruns_requested:
        metrics.add_metric(name="RerunsRequested", unit=MetricUnit.Count, value=result.reruns_requested)
    if trunk.webhook:
        # Results no delivery brought: deliveries GitHub failed to make (or made too late).
        missed = result.cells_written
        metrics.add_metric(name="CellsMissedByWebhooks", unit=MetricUnit.Count, value=missed)
        since = _deliveries_missing_since(trunks, trunk.trunk_id, deployment.rule_for(trunk), missed, now)
        trunks.record_polled(trunk.trunk_id, now, since)
    return {"polled": [asdict(result)], "errors": []}


def _rerun_requests(trunk: TrunkConfig, http: HttpClient) -> RequestRerun:
    """The trunk's rerun requests: job retries on a Buildkite trunk, else GitHub reruns."""
    if trunk.source == BUILDKITE_SOURCE:
        return _buildkite_retries(trunk, http)
    return _github_reruns(trunk, http)


def _buildkite_retries(trunk: TrunkConfig, http: HttpClient) -> RequestRerun:
    """Job retries (`PUT /v2/organizations/{org}/pipelines/{slug}/builds/{number}/jobs/{id}
    /retry`; the token needs `write_builds`, or `retry_builds`) through Buildkite's REST API
    at the trunk's `url` with its `token` (the one it polls with), on the poll's own client
    and deadline. Each returns None when Buildkite accepted it, else why not: Buildkite's
    answer (a job retried already, a passed job its step does not permit to retry, a token
    without the scope), a rate limit, or the network's error."""
    from trunkwatch.net.buildkite import DEFAULT_API_URL, Buildkite
    from trunkwatch.net.rest import ApiError
    from trunkwatch.sources.credentials import resolve_token

    what = f"Buildkite retries for {trunk.trunk_id}"

    @functools.cache
    def buildkite() -> Buildkite:
        return Buildkite(http, base_url(trunk, DEFAULT_API_URL), resolve_token(trunk.token))

    def request(run: JobRun) -> str | None:
        if run.build is None or not isinstance(run.job_id, str):
            return f"{what}: the job names no build and job id to retry"
        try:
            api = buildkite()
            path = f"{api.pipeline_path(str(trunk.pipeline))}/builds/{run.build}/jobs/{run.job_id}/retry"
            api.send("PUT", api.url(path))
        except ConfigError as err:
            return f"{what}: {err}"
        except ApiError as err:
            return f"{what}: {err.answered()}"
        except HttpError as err:
            return f"{what}: {err}"
        return None

    return request


def _github_reruns(trunk: TrunkConfig, http: HttpClient) -> RequestRerun:
    """Rerun requests (`POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun`, 201 with no
    body; the token needs `actions: write`) through GitHub's REST API with the trunk's
    `github_token` (never its polling token), on the poll's own client and deadline. Each
    returns None when GitHub accepted it, else why not: GitHub's answer (403 without the
    permission, or for a run too old to re-run; 404 for an unknown job), a rate limit, or the
    network's error. Without a token they go out without one, which GitHub refuses: the
    refusal, kept as the verdict's reason, names the key. The token is read at the first
    request (most polls send none); imported here: a trunk without confirmation never
    loads the REST client."""
    from trunkwatch.net.github import DEFAULT_API_URL, GitHub, GitHubError
    from trunkwatch.sources.credentials import resolve_token

    what = f"GitHub reruns for {trunk.trunk_id}"
    if trunk.github_token is None:
        what += " (no github_token: reruns need a token with actions: write)"

    @functools.cache
    def github() -> GitHub:
        return GitHub(http, trunk.github_api_url or DEFAULT_API_URL, resolve_token(trunk.github_token))

    def request(run: JobRun) -> str | None:
        try:
            api = github()
            api.send("POST", api.url(f"/repos/{trunk.repo}/actions/jobs/{run.job_id}/rerun"))
        except ConfigError as err:
            return f"{what}: {err}"
        except GitHubError as err:
            return f"{what}: {err.answered()}"
        except HttpError as err:
            return f"{what}: {err}"
        return None

    return request


def _deliveries_missing_since(
    trunks: Trunks, trunk_id: str, rule: RuleConfig, missed: int, now: datetime
) -> datetime | None:
    """When a poll that found `missed` results no delivery brought makes WebhooksDown's
    start: now, or the start of a run of such polls no delivery has ended; None if the
    deliveries are not missing (none found, or a delivery came recently)."""
    state = trunks.state(trunk_id)
    last, since = state.last_delivery_at, state.deliveries_missing_since
    if not missed or not webhooks_down(last, now, rule):
        return None
    return since if since is not None and (last is None or last <= since) else now


def _due(trunks: Trunks, trunk: TrunkConfig, now: datetime) -> bool:
    """A webhook-fed trunk is polled only every `poll_every` (never when 0), as a backstop."""
    period = trunk.poll_period
    if period is None:
        return True
    if not period:
        return False
    last = trunks.state(trunk.trunk_id).last_polled_at
    return last is None or now - last >= period


def _seconds_since_good_poll(trunks: Trunks, trunk_id: str, now: datetime) -> None:
    """After a failed poll: since the last good one, or since failures began if none was."""
    state = trunks.state(trunk_id)
    since = state.last_poll_ok_at or state.polls_failing_since
    if since is not None:
        trunk_gauge(SECONDS_SINCE_GOOD_POLL, trunk_id, (now - since).total_seconds(), MetricUnit.Seconds)


def classify(err: BaseException) -> tuple[str, str]:
    """The cause and a message for the log line. Source and configuration errors carry
    messages written to name no secret; anything else is named by its class and where it
    was raised, never by its message (which could hold a token, a URL or an account id)."""
    if isinstance(err, SourceError):
        return err.kind, str(err)
    if isinstance(err, ConfigError):
        return "config", str(err)
    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    return "internal", f"unexpected {type(err).__name__}{where}"


def poll_records(
    records: list[dict[str, Any]],
    storage: Storage,
    deployment: Deployment,
    now: datetime,
    deadline: float,
    gauges: bool = False,
) -> dict[str, Any]:
    """Poll the trunk of each SQS record the dispatcher sent (`{"trunk": <trunk id>}`); the
    records share the time left. A poll's failure is the trunk's (recorded, not retried: the
    next tick is the retry); a record that names no trunk is reported in
    `batchItemFailures`. A trunk configured no more since the dispatch is skipped."""
    out: dict[str, Any] = {"polled": [], "errors": [], "batchItemFailures": []}
    by_id = {trunk.trunk_id: trunk for trunk in deployment.trunks}
    for position, record in enumerate(records):
        try:
            trunk_id = poll_message_trunk(record["body"])
        except (KeyError, TypeError, ValueError) as err:
            logger.error(
                "poll message refused", extra={"message_id": record.get("messageId"), "error": str(err)}
            )
            out["batchItemFailures"].append({"itemIdentifier": record.get("messageId", "")})
            continue
        trunk = by_id.get(trunk_id)
        if trunk is None:
            logger.warning(
                "poll message for a trunk no longer configured; skipped", extra={"trunk": trunk_id}
            )
            continue
        share = (deadline - time.monotonic()) / (len(records) - position)
        result = poll_one(storage, deployment, trunk, now, time.monotonic() + share, gauges)
        out["polled"] += result["polled"]
        out["errors"] += result["errors"]
    return out


def poll_message(trunk: TrunkConfig) -> str:
    """The body of the message asking ingest to poll `trunk`."""
    return json.dumps({"trunk": trunk.trunk_id})


def poll_message_trunk(body: str) -> str:
    """The trunk id a poll message names; ValueError if it names none."""
    message = json.loads(body)
    trunk_id = message.get("trunk") if isinstance(message, dict) else None
    if not isinstance(trunk_id, str) or not trunk_id:
        raise ValueError('a poll message is {"trunk": "<trunk id>"}')
    return trunk_id
