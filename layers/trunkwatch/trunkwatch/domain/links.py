"""Links into the status page that the backend puts into alert annotations.

`silence_url` opens the page's silence form prefilled with the alert's identifying labels,
in the filter syntax of Alertmanager's own UI (`trunk_url`, a trunk's own view):

    <base>/#/silences/new?filter=%7Balertname%3D%22TrunkJobFailing%22%2Crepo%3D%22...%22%7D

Pure functions: no I/O, no configuration.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

# The labels that identify what to silence: the alert, its trunk and (per-job alerts) its job.
# priority/team/workflow are left out so the silence still holds when those change.
SILENCE_LABELS = ("alertname", "repo", "branch", "job")


def _quote(value: str) -> str:
    """A label value as a double-quoted matcher value (Alertmanager's escaping)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def matcher_filter(labels: Mapping[str, str], names: tuple[str, ...] = SILENCE_LABELS) -> str:
    """`{alertname="X",repo="Y",...}`: equality matchers for the `names` present in labels."""
    return "{" + ",".join(f"{name}={_quote(labels[name])}" for name in names if labels.get(name)) + "}"


def silence_url(base_url: str, labels: Mapping[str, str]) -> str:
    """The status page's prefilled silence form for an alert with these labels.

    `base_url` is the API's base URL (the page is served at its `/`), e.g. the stack output
    `https://<id>.execute-api.<region>.amazonaws.com/v1` or `http://127.0.0.1:9093`.
    """
    query = urllib.parse.quote(matcher_filter(labels), safe="")
    return f"{base_url.rstrip('/')}/#/silences/new?filter={query}"


def trunk_url(base_url: str, trunk_id: str) -> str:
    """The status page's view of one trunk (its grid and 30-day history); none without an
    http(s) base URL."""
    if not base_url.startswith(("http://", "https://")):
        return ""
    return f"{base_url.rstrip('/')}/#/trunk?id={urllib.parse.quote(trunk_id, safe='')}"
