"""Sources of trunk job results. Each turns a remote API into a `Snapshot`, maps its own
statuses, and builds its own links (`trunk_link`, `job_link`).

Adding a source: one module (or package) with a class built as `cls(trunk, token, http)`
whose `poll(state, now)` returns a Snapshot (`base.Source`, `base.SourceClass`), plus the
functions `trunk_link(trunk)` and `job_link(trunk, job, run_url)` (the trunk's `url`, or the
module's own default, is `base.base_url`), and one line in `REGISTRY`: the configuration
loader is handed REGISTRY (`load_deployment(..., sources=REGISTRY)`), so the name is then a
valid `source` of a trunk. Modules are imported on first use, so a deployment pays only for
its sources.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the notifier and the API build links here, and never poll
    from trunkwatch.domain.config import TrunkConfig
    from trunkwatch.net.http import HttpClient
    from trunkwatch.sources.base import Source, SourceClass

# source name -> (module, class)
REGISTRY = {
    "hud": ("trunkwatch.sources.hud", "HudSource"),
    "github": ("trunkwatch.sources.github", "GitHubSource"),
    "buildkite": ("trunkwatch.sources.buildkite", "BuildkiteSource"),
}
# The sources whose failed jobs carry failure lines (the HUD's `failureLines`).
FAILURE_LINES = frozenset({"hud"})


def reports_failure_lines(trunk: TrunkConfig) -> bool:
    """Whether the trunk's failing cells carry failure lines: its source reports them, and no
    webhook deliveries (which carry none) feed it."""
    return trunk.source in FAILURE_LINES and not trunk.webhook


def module_of(trunk: TrunkConfig) -> ModuleType:
    module, _ = REGISTRY[trunk.source]
    return importlib.import_module(module)


def make_source(trunk: TrunkConfig, http: HttpClient | None = None) -> Source:
    """The trunk's source, reading through `http` (the poll's client, with its deadline)."""
    from trunkwatch.sources.credentials import resolve_token

    _, name = REGISTRY[trunk.source]
    source_class: SourceClass = getattr(module_of(trunk), name)
    return source_class(trunk, resolve_token(trunk.token), http)


def trunk_link(trunk: TrunkConfig) -> str:
    return str(module_of(trunk).trunk_link(trunk))


def job_link(trunk: TrunkConfig, job: str, run_url: str) -> str:
    return str(module_of(trunk).job_link(trunk, job, run_url))


__all__ = ["FAILURE_LINES", "REGISTRY", "job_link", "make_source", "reports_failure_lines", "trunk_link"]
