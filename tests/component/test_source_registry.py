"""A source is one module and one line in `sources.REGISTRY`: the configuration loader
accepts its name, the poll reads through it, and links point at it. This module is such a
source: `StaticSource`, `trunk_link` and `job_link`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.aws import table_items
from tests.support.polls import poll_each
from trunkwatch import sources
from trunkwatch.domain.cells import Commit, JobRun
from trunkwatch.domain.config import ConfigError, TrunkConfig, load_deployment
from trunkwatch.net.http import HttpClient
from trunkwatch.sources.base import CommitRuns, Snapshot, base_url

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)
DEFAULT_URL = "https://static.invalid"


class StaticSource:
    """Three commits on which `build` failed."""

    def __init__(self, trunk: TrunkConfig, token: str | None, http: HttpClient | None) -> None:
        self.trunk = trunk

    def poll(self, state: dict[str, Any], now: datetime) -> Snapshot:
        return Snapshot(
            [
                CommitRuns(
                    Commit(f"{n:040x}", now - timedelta(minutes=10 * n), f"change {n}", "dev", 100 + n),
                    (JobRun("build", "failure", url=f"{trunk_link(self.trunk)}/runs/{n}"),),
                )
                for n in range(1, 4)
            ]
        )


def trunk_link(trunk: TrunkConfig) -> str:
    return f"{base_url(trunk, DEFAULT_URL)}/{trunk.repo}"


def job_link(trunk: TrunkConfig, job: str, run_url: str) -> str:
    return run_url


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sources.REGISTRY, "static", (__name__, "StaticSource"))  # the one line


def static_trunk(**keys: Any) -> dict[str, Any]:
    return {"repo": "example/app", "source": "static", **keys}


def test_a_registered_source_is_a_trunks_source_with_its_links(registered: None) -> None:
    (trunk,) = load_deployment({"trunks": [static_trunk()]}, sources=sources.REGISTRY).trunks
    assert isinstance(sources.make_source(trunk), StaticSource)
    assert sources.trunk_link(trunk) == "https://static.invalid/example/app"
    (mirror,) = load_deployment(
        {"trunks": [static_trunk(url="http://127.0.0.1:9/")]}, sources=sources.REGISTRY
    ).trunks
    assert sources.job_link(mirror, "build", "run") == "run"
    assert sources.trunk_link(mirror) == "http://127.0.0.1:9/example/app"


def test_the_loader_refuses_a_source_not_in_the_registry_it_is_handed() -> None:
    document = {"trunks": [{"repo": "example/lib"}, static_trunk()]}
    with pytest.raises(
        ConfigError, match=r"^trunks\.1\.source: unknown source 'static' \(known: buildkite, github, hud\)$"
    ):
        load_deployment(document, sources=sources.REGISTRY)


def test_a_registered_source_is_polled(aws: dict[str, Any], registered: None) -> None:
    deployment = load_deployment({"trunks": [static_trunk()]}, sources=sources.REGISTRY)
    result = poll_each(aws["storage"], deployment, NOW)
    assert result["errors"] == [] and result["polled"][0]["cells_written"] == 3
    cells = table_items("cell")
    assert {cell["state"]["S"] for cell in cells} == {"fail"} and len(cells) == 3


def test_a_source_that_is_no_name_is_refused_by_the_trunks_own_check() -> None:
    with pytest.raises(ConfigError, match=r"^trunks\.0\.source: Input should be a valid string$"):
        load_deployment({"trunks": [static_trunk(source=["static"])]}, sources=sources.REGISTRY)
