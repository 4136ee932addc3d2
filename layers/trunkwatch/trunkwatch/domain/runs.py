"""Workflow runs as webhook deliveries tell of them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunRecord:
    """A workflow run a webhook delivery told of: whether it is one of the trunk's (a push
    to its branch in its own repository: `sources.webhook.RunReport.of_trunk`), and its
    commit."""

    run_id: int
    sha: str
    of_trunk: bool
