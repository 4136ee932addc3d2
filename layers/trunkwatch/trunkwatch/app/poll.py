"""One schedule tick of ingest: poll every configured trunk, isolating their failures.

Each trunk's poll is isolated: whatever it raises (a SourceError, a ConfigError, or any other
exception) becomes a classified failure of that trunk (a `poll failed` log line and the
`PollErrors` metric), and the other trunks are still polled. Each trunk also gets its own
share of the time left, which its HTTP client enforces as a hard deadline, so one slow or
hostile source cannot use up the invocation.
"""

from __future__ import annotations

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
from trunkwatch.domain.config import ConfigError, Deployment, RuleConfig, TrunkConfig
from trunkwatch.domain.rule import webhooks_down
from trunkwatch.sources import make_source
from trunkwatch.sources.base import SourceError
from trunkwatch.sources.http import HttpClient
from trunkwatch.storage.port import Storage, Trunks

# Without a deadline from the caller (the Lambda's remaining time), each trunk gets this long.
TRUNK_BUDGET_S = 45.0

logger = Logger(child=True)
metrics = Metrics()


def poll_all(
    storage: Storage, deployment: Deployment, now: datetime, deadline: float | None = None
) -> dict[str, Any]:
    """Poll each trunk; a failing trunk is logged and counted, the others still run.

    `deadline` (a `time.monotonic()` value) is when every poll must be over: the trunks not
    yet polled share the time left equally.
    """
    results: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    trunks = storage.trunks
    configured = [trunk for trunk in deployment.trunks if _due(trunks, trunk, now)]
    for position, trunk in enumerate(configured):
        if deadline is None:
            trunk_deadline = time.monotonic() + TRUNK_BUDGET_S
        else:
            trunk_deadline = time.monotonic() + (deadline - time.monotonic()) / (len(configured) - position)
        http = HttpClient(deadline=trunk_deadline)
        result = None
        try:
            rule = deployment.rule_for(trunk)
            reruns = _rerun_requests(trunk, trunk_deadline) if rule.confirms else None
            result = poll_trunk(storage, trunk, rule, make_source(trunk, http), now, reruns)
        except Exception as err:  # one trunk's failure must not stop the others
            kind, message = classify(err)
            logger.error(
                "poll failed; nothing written, the next poll catches up",
                extra={"trunk": trunk.trunk_id, "cause": kind, "error": message},
            )
            metrics.add_metric(name="PollErrors", unit=MetricUnit.Count, value=1)
            errors.append({"trunk": trunk.trunk_id, "cause": kind, "error": message})
            trunks.record_poll_failure(trunk.trunk_id, now, kind, message)
            _seconds_since_good_poll(trunks, trunk.trunk_id, now)
            continue
        finally:
            http.close()
            if trunk.webhook and result is None:
                trunks.record_polled(trunk.trunk_id, now)
        if result.rate_limited:
            cause = {"trunk": trunk.trunk_id, "cause": "rate_limited", "error": result.rate_limited}
            logger.warning("poll stopped at a rate limit; it resumes when the limit allows", extra=cause)
            metrics.add_metric(name="PollErrors", unit=MetricUnit.Count, value=1)
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
        results.append(asdict(result))
    return {"polled": results, "errors": errors}


def _rerun_requests(trunk: TrunkConfig, deadline: float) -> RequestRerun:
    """Rerun requests through GitHub's REST API with the trunk's rerun token, within the
    trunk's share of the poll's time. Imported here: a trunk without confirmation never
    loads the REST client."""
    from trunkwatch.channels.github_rest import DEFAULT_API_URL, GitHubRest
    from trunkwatch.sources.credentials import resolve_token

    rest = GitHubRest(
        trunk.github_api_url or DEFAULT_API_URL,
        lambda: resolve_token(trunk.rerun_token),
        f"GitHub reruns for {trunk.trunk_id}",
        deadline=deadline,
    )
    return lambda job_id: rest.rerun_job(trunk.repo, job_id)


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
