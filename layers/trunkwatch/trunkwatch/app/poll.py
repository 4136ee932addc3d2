"""One schedule tick of ingest: poll every configured trunk, isolating their failures."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from trunkwatch.app import settings
from trunkwatch.app.ingest import poll_trunk
from trunkwatch.domain.config import ConfigError
from trunkwatch.sources import make_source
from trunkwatch.sources.base import SourceError
from trunkwatch.storage import trunks

logger = Logger(child=True)
metrics = Metrics()


def poll_all(now: datetime) -> dict[str, Any]:
    """Poll each trunk; a failing source is logged and counted, the others still run."""
    deployment = settings.deployment()
    results: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    for trunk in deployment.trunks:
        try:
            result = poll_trunk(trunk, deployment.rule_for(trunk), make_source(trunk), now)
        except (SourceError, ConfigError) as err:
            kind = err.kind if isinstance(err, SourceError) else "config"
            logger.error(
                "poll failed; nothing written, the next poll catches up",
                extra={"trunk": trunk.trunk_id, "cause": kind, "error": str(err)},
            )
            metrics.add_metric(name="PollErrors", unit=MetricUnit.Count, value=1)
            errors.append({"trunk": trunk.trunk_id, "cause": kind, "error": str(err)})
            trunks.record_poll_failure(trunk.trunk_id, now, kind, str(err))
            continue
        if trunks.record_poll_success(trunk.trunk_id, now):
            result.items_written += 1
        if result.rate_limited:
            cause = {"trunk": trunk.trunk_id, "cause": "rate_limited", "error": result.rate_limited}
            logger.warning("poll stopped at a rate limit; it resumes when the limit allows", extra=cause)
            metrics.add_metric(name="PollErrors", unit=MetricUnit.Count, value=1)
        logger.info("polled", extra=asdict(result))
        metrics.add_metric(name="CellsIngested", unit=MetricUnit.Count, value=result.cells_written)
        results.append(asdict(result))
    return {"polled": results, "errors": errors}
