"""Notification channels: one module per receiver type behind one interface (`base.Channel`).

Adding a receiver type: one module holding its configuration (a `ReceiverConfig` subclass
with its own keys, which builds its channel: see `base.Receiver`) and one line in
`REGISTRY`. A type's module is imported when a document names it, so a deployment pays only
for the receivers it has.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from trunkwatch.domain.config import ReceiverConfig

# receiver type (the `type` key) -> (module, configuration class)
REGISTRY = {
    "github_culprit": ("trunkwatch.channels.github_culprit", "GitHubCulpritReceiver"),
    "github_issues": ("trunkwatch.channels.github_issues", "GitHubIssuesReceiver"),
    "pagerduty": ("trunkwatch.channels.pagerduty", "PagerDutyReceiver"),
    "slack": ("trunkwatch.channels.slack", "SlackReceiver"),
    "sns": ("trunkwatch.channels.sns", "SnsReceiver"),
    "topic": ("trunkwatch.channels.sns", "TopicReceiver"),
    "webhook": ("trunkwatch.channels.webhook", "WebhookReceiver"),
}


class _ReceiverTypes(Mapping[str, type[ReceiverConfig]]):
    """REGISTRY as the configuration loader reads it: a type's class, imported on lookup."""

    def __getitem__(self, name: str) -> type[ReceiverConfig]:
        module, cls = REGISTRY[name]
        found: type[ReceiverConfig] = getattr(importlib.import_module(module), cls)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)


RECEIVER_TYPES: Mapping[str, type[ReceiverConfig]] = _ReceiverTypes()

__all__ = ["RECEIVER_TYPES", "REGISTRY"]
