"""The README's install line, run as a new user runs it, and the locks it relies on.

The slow test copies the checkout's files into an empty folder, runs the README's line there
(a new virtualenv, pip from the package index, whatever the day's releases are) and replays the
repository's scenarios with that install's `trunkwatch` on moto's table (`--store dynamodb`):
it is the suite's replay of every scenario on the DynamoDB store, as a user runs it, with
those of a `shared/scenarios` folder beside the checkout the project does not have, when
present (test_scenarios replays the project's and the real history on the in-memory store,
the default; the real history on both stores is `python -m benchmarks memory_replay`'s).
The fast ones hold the locks to each other, to the running environment and to the local
extra's ranges."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

from tests.support.paths import ROOT
from tests.support.scenarios import SCENARIOS, assert_publishes_expected, scenario_files

BESIDE = ROOT.parent / "shared" / "scenarios"
REPLAYS = scenario_files(SCENARIOS) + [
    p for p in scenario_files(BESIDE) if p.name not in {f.name for f in scenario_files(SCENARIOS)}
]


def pins(path: Path) -> dict[str, str]:
    """name -> version of every `name==version` line of a lock that applies to this Python."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^ ;]+)(?: ; (.*))?$", line)
        if match and (match[3] is None or Marker(match[3]).evaluate()):
            found[canonical(match[1])] = match[2]
    return found


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def readme_install_line() -> str:
    lines = [
        line.strip()
        for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
        if re.match(r"^python3 -m venv \S+ && ", line.strip())
    ]
    assert len(lines) == 1, f"the README should have one `python3 -m venv ... && ...` install line: {lines}"
    return lines[0]


def project_files() -> list[str]:
    """The checkout's files as a clone has them: git's, or, outside a git checkout, all but
    virtualenvs, build output and caches."""
    if (ROOT / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        return [os.fsdecode(name) for name in listed if name and (ROOT / os.fsdecode(name)).is_file()]
    skipped = re.compile(r"(^|/)(\.venv[^/]*|\.aws-sam|__pycache__|[^/]*\.egg-info|\.[a-z]+_cache)(/|$)")
    return [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*")
        if path.is_file()
        and not skipped.search(str(path.relative_to(ROOT)))
        and "benchmarks/out" not in str(path)
    ]


# --- the README's line in an empty folder ---------------------------------------------------

# `trunkwatch replay FILE --json --store dynamodb` on each file, through the installed
# command's main in one interpreter of the install (the console script itself runs the
# README's demo): a new interpreter per file would cost as much CPU again as the replays.
REPLAY_EACH = """
import contextlib, io, json, sys
from trunkwatch_local.cli import main
for scenario in sys.argv[1:]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["replay", scenario, "--json", "--store", "dynamodb"])
    print(json.dumps({"scenario": scenario, "status": status, "stdout": printed.getvalue()}))
"""


@pytest.mark.long(minutes=4)
@pytest.mark.slow
def test_the_readme_install_line_replays_every_scenario(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    for name in project_files():
        target = checkout / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name).read_bytes())
    line = readme_install_line()
    environ = {
        key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "PYTHON"))
    }
    installed = subprocess.run(
        ["bash", "-c", line], cwd=checkout, env=environ, capture_output=True, text=True, timeout=900
    )
    assert installed.returncode == 0, f"{line}\n{installed.stdout[-3000:]}\n{installed.stderr[-3000:]}"
    assert "TrunkBroken" in installed.stdout

    venv = checkout / line.split()[3]
    replays = subprocess.run(
        [str(venv / "bin" / "python"), "-c", REPLAY_EACH, *map(str, REPLAYS)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert replays.returncode == 0, replays.stderr[-3000:]
    results = [json.loads(line) for line in replays.stdout.splitlines()]
    assert [result["scenario"] for result in results] == [str(scenario) for scenario in REPLAYS]
    for scenario, result in zip(REPLAYS, results, strict=True):
        assert result["status"] == 0, f"{scenario.name}: {replays.stderr[-3000:]}"
        assert_publishes_expected(scenario, [json.loads(line) for line in result["stdout"].splitlines()])

    # The install took the lock's versions: those this test suite runs on.
    frozen = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = {canonical(row["name"]): row["version"] for row in json.loads(frozen.stdout)}
    locked = pins(ROOT / "constraints.txt")
    differing = {
        name: (version, locked.get(name))
        for name, version in theirs.items()
        if name not in {"pip", "trunkwatch"} and locked.get(name) != version
    }
    assert not differing, f"installed outside the lock (installed, locked): {differing}"


# --- the locks ------------------------------------------------------------------------------


def test_this_environment_runs_on_the_lock() -> None:
    locked = pins(ROOT / "constraints.txt")
    differing = {
        canonical(dist.metadata["Name"]): (dist.version, locked[canonical(dist.metadata["Name"])])
        for dist in metadata.distributions()
        if canonical(dist.metadata["Name"]) in locked
        and locked[canonical(dist.metadata["Name"])] != dist.version
    }
    assert not differing, f"run `make .venv/.installed` again (installed, locked): {differing}"


def test_the_layers_locks_pin_the_versions_the_tests_run_with() -> None:
    locked = pins(ROOT / "constraints.txt")
    for name in ("requirements.txt", "requirements-api.txt"):
        layer = pins(ROOT / "layers" / "trunkwatch" / name)
        assert layer, name
        assert {dist: version for dist, version in layer.items() if locked.get(dist) != version} == {}, name


def test_the_local_extra_admits_the_locked_moto_and_botocore() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    local = {
        canonical(requirement.name): requirement
        for requirement in map(Requirement, project["project"]["optional-dependencies"]["local"])
    }
    locked = pins(ROOT / "constraints.txt")
    for name in ("moto", "boto3", "botocore"):
        assert local[name].specifier.contains(locked[name]), (name, str(local[name].specifier), locked[name])
    build = project["build-system"]["requires"]
    assert build == [f"setuptools=={locked['setuptools']}"], "the build's setuptools is the lock's"
