"""The configured receivers (top-level `receivers`) as channels, beside the SNS topic.

Each gets its matchers (parsed by the silences' matcher engine, so a receiver and a silence
read `team=~"infra.*"` the same way) and a name that keys its notification log. The name
comes from what the receiver is, not from its position, so reordering the list or rotating
a secret's value keeps each receiver's log: `slack:<secret ref>` (or a digest of a literal
URL, which is itself the credential), `github_issues:owner/name` (`@host` for Enterprise).
Secrets are resolved only when a message is due, and cached (sources/credentials.py).
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Callable, Sequence

from trunkwatch.channels.base import Channel
from trunkwatch.domain.config import ReceiverConfig, TokenRef
from trunkwatch.silences.matchers import parse_matchers
from trunkwatch.sources.credentials import resolve_token

DEFAULT_GITHUB_API = "https://api.github.com"


def receiver_channels(receivers: Sequence[ReceiverConfig]) -> list[Channel]:
    channels: list[Channel] = []
    seen: dict[str, int] = {}
    for receiver in receivers:
        base = receiver_name(receiver)
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base}-{seen[base]}"
        channels.append(_channel(receiver, name))
    return channels


def receiver_name(receiver: ReceiverConfig) -> str:
    if receiver.type == "slack":
        url = receiver.url
        if isinstance(url, TokenRef):
            where = url.secret or (f"ssm:{url.ssm}" if url.ssm else f"env:{url.env}")
            return _clean(f"slack:{where}")
        return f"slack:{hashlib.sha256(str(url).encode()).hexdigest()[:12]}"
    host = urllib.parse.urlsplit(receiver.api_base_url).netloc
    suffix = "" if receiver.api_base_url == DEFAULT_GITHUB_API else f"@{host}"
    return _clean(f"github_issues:{receiver.repo}{suffix}")


def _clean(name: str) -> str:
    """`#` separates the log key's parts (storage/keys.py)."""
    return name.replace("#", "_")


def _route(receiver: ReceiverConfig) -> Callable[[dict[str, str]], bool]:
    matchers = parse_matchers(list(receiver.matchers))
    return lambda labels: all(m.matches(labels) for m in matchers)


def _channel(receiver: ReceiverConfig, name: str) -> Channel:
    # Imported here: the notifier's cold start does not pay for receivers it does not have.
    if receiver.type == "slack":
        from trunkwatch.channels.slack import SlackChannel

        url = receiver.url
        webhook_url = (lambda: resolve_token(url)) if isinstance(url, TokenRef) else (lambda: str(url))
        return SlackChannel(name=name, webhook_url=webhook_url, route=_route(receiver))
    from trunkwatch.channels.github_issues import GitHubIssuesChannel

    token = receiver.token
    return GitHubIssuesChannel(
        name=name,
        api_url=receiver.api_base_url,
        repo=str(receiver.repo),
        labels=receiver.labels,
        token=lambda: resolve_token(token),
        route=_route(receiver),
    )
