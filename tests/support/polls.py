"""A schedule tick's polls without the queue between them: the dispatcher's due trunks, each
polled as ingest polls one trunk per invocation."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from trunkwatch.app import poll
from trunkwatch.domain.config import Deployment
from trunkwatch.storage.port import Storage


def poll_each(
    storage: Storage,
    deployment: Deployment,
    now: datetime,
    budget_s: float | None = None,
    gauges: bool = False,
) -> dict[str, Any]:
    """Poll every due trunk in turn, each with `budget_s` of its own (an invocation's);
    `polled` and `errors` of all of them."""
    out: dict[str, Any] = {"polled": [], "errors": []}
    for trunk in poll.due_trunks(storage.trunks, deployment, now):
        deadline = None if budget_s is None else time.monotonic() + budget_s
        result = poll.poll_one(storage, deployment, trunk, now, deadline, gauges)
        out["polled"] += result["polled"]
        out["errors"] += result["errors"]
    return out
