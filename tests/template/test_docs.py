"""The docs' lists against what they describe: the template parameters, alarms, table
permissions and reserved concurrency that docs/deploying.md and docs/operations.md list,
against template.yaml; the metrics docs/operations.md lists, and which function publishes
each, against the code; the configuration keys docs/configuration.md lists against the
configuration's own types; the flags docs/local.md shows against the CLI's.

Each list is a `Listed`: what a page documents and what the template or the code has, as
two sets that must be equal. Another list is one `Listed` more in LISTS."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support.iam import TABLE_ARN, actions, resources_of, statements, translated_resources
from tests.support.paths import ROOT
from trunkwatch.app import trunk_metrics
from trunkwatch.domain import config
from trunkwatch_local.template import load_template

DOCS = ROOT / "docs"
PACKAGE = ROOT / "layers" / "trunkwatch"


# --- reading the docs ----------------------------------------------------------------


def _section(page: Path, heading: str) -> str:
    """The text under `## heading` up to the next heading of the same level."""
    text = page.read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert found, f"{page.name} has no section {heading!r}"
    return found.group(1)


def _tables(text: str) -> Iterator[list[list[str]]]:
    """Each Markdown table of `text`: its rows (the header first, no separator), as cells."""
    rows: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):
                rows.append(cells)
        elif rows:
            yield rows
            rows = []


def _table(page: Path, heading: str, first: str) -> list[list[str]]:
    """The rows (without the header) of the table in `heading` whose first column is `first`."""
    (rows,) = [rows for rows in _tables(_section(page, heading)) if rows[0][0] == first]
    return rows[1:]


def _code(cell: str) -> list[str]:
    """The `code` spans of a cell, in order."""
    return re.findall(r"`([^`]+)`", cell)


# --- what template.yaml and the code have --------------------------------------------


@cache
def _source() -> dict[str, Any]:
    return load_template(ROOT / "template.yaml")


@cache
def _resources() -> dict[str, Any]:
    return translated_resources(ROOT / "template.yaml")


def _of_type(kind: str) -> dict[str, Any]:
    return {name: r for name, r in _source()["Resources"].items() if r["Type"] == kind}


def _handler_modules(function: str) -> set[Path]:
    """The trunkwatch modules `functions/<function>/app.py` imports, directly or not."""
    seen: set[Path] = set()
    todo = [ROOT / "functions" / function / "app.py"]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            todo += [module for name in names if (module := _module(name)) is not None]
    return seen


def _module(name: str) -> Path | None:
    if not name.startswith("trunkwatch."):
        return None
    base = PACKAGE / name.replace(".", "/")
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


@cache
def _published() -> dict[str, set[Path]]:
    """Every metric the code publishes, with the modules that publish it (`add_metric`, and
    the per-trunk gauges by their names in trunk_metrics)."""
    found: dict[str, set[Path]] = {}
    for path in (PACKAGE / "trunkwatch").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        names = re.findall(r'add_metric\(name="(\w+)"', text)
        names += [getattr(trunk_metrics, constant) for constant in re.findall(r"trunk_gauge\((\w+),", text)]
        for name in names:
            found.setdefault(name, set()).add(path)
    return found


# --- the lists -----------------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    what: str
    documented: Callable[[], set[str]]
    actual: Callable[[], set[str]]


def _documented_parameters() -> set[str]:
    rows = _table(DOCS / "deploying.md", "Parameters", "parameter")
    return {name for row in rows for name in _code(row[0])}


def _documented_parameter_defaults() -> set[str]:
    """`Name=default` of each documented parameter but the configuration document."""
    pairs = set()
    for name_cell, default_cell, _ in _table(DOCS / "deploying.md", "Parameters", "parameter"):
        # "empty": an empty string (a Markdown code span cannot be empty).
        defaults = ["" if d.strip() == "empty" else d.strip(" `") for d in default_cell.split(", ")]
        names = _code(name_cell)
        if names != ["ConfigDocument"]:
            assert len(names) == len(defaults), name_cell
            pairs |= {f"{name}={default}" for name, default in zip(names, defaults, strict=True)}
    return pairs


def _template_parameter_defaults() -> set[str]:
    parameters = _source()["Parameters"]
    return {f"{name}={p['Default']}" for name, p in parameters.items() if name != "ConfigDocument"}


def _documented_alarms() -> set[str]:
    alarms = set()
    for alarm, fires, *_ in _table(DOCS / "operations.md", "Operational alarms", "alarm"):
        for name in _code(alarm):
            if name != "<Function>ErrorsAlarm":
                alarms.add(name)
                continue
            # "(ingest, evaluator, ...; the dispatcher has none ...)": the functions it covers.
            (functions,) = re.findall(r"^any Lambda error of that function \(([^;)]+)", fires)
            alarms |= {f"{f.strip().capitalize()}FunctionErrorsAlarm" for f in functions.split(",")}
    return alarms


def _documented_metrics(by_function: bool) -> set[str]:
    found = set()
    for metric, functions, _ in _table(DOCS / "operations.md", "Metrics", "metric"):
        (name,) = _code(metric)
        found |= {f"{name} by {f}" for f in functions.split(", ")} if by_function else {name}
    return found


def _metrics_by_function_in_reach() -> set[str]:
    """`metric by function` for each documented pair whose function's handler reaches a
    module that publishes the metric. (Imports reach further than calls, so this holds
    each documented function to the code; it cannot say a function is missing.)"""
    published = _published()
    return {
        pair
        for pair in _documented_metrics(by_function=True)
        if (found := re.fullmatch(r"(\w+) by (\w+)", pair))
        and published.get(found.group(1), set()) & _handler_modules(found.group(2).lower())
    }


_KINDS = {
    "reads": {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"},
    "writes": {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem"},
    "deletes": {"dynamodb:DeleteItem"},
}


def _documented_partitions() -> set[str]:
    """`function kind partition` of the Permissions section's partition table."""
    found = set()
    for function, *cells in _partition_rows():
        for kind, cell in zip(_KINDS, cells, strict=True):
            found |= {f"{function} {kind} {p}" for p in (_code(cell) or [cell])}
    return found


def _partition_rows() -> list[list[str]]:
    tables = list(_tables(_section(DOCS / "deploying.md", "Permissions")))
    (rows,) = [rows for rows in tables if rows[0][:2] == ["function", "reads"]]
    return rows[1:]


def _template_partitions() -> set[str]:
    """The same from each documented function's role: the leading keys its conditions allow
    for each kind of access, `the whole table` without a condition, `nothing` without a grant."""
    found = set()
    for function, *_ in _partition_rows():
        role = _resources()[f"{function.capitalize()}FunctionRole"]
        table = [s for s in statements(role) if s["Effect"] == "Allow" and TABLE_ARN in resources_of(s)]
        for kind, granted in _KINDS.items():
            partitions: set[str] = set()
            for statement in table:
                if not granted & set(actions(statement)):
                    continue
                if "Condition" not in statement:
                    partitions.add("the whole table")
                    continue
                ((_, tests),) = statement["Condition"].items()
                partitions |= set(tests["dynamodb:LeadingKeys"])
            found |= {f"{function} {kind} {p}" for p in partitions or {"nothing"}}
    return found


def _documented_config_keys() -> set[str]:
    """`where.key` of the keys the three tables of docs/configuration.md list."""
    page = DOCS / "configuration.md"
    found = {f"rule.{key}" for row in _table(page, "Rule keys", "key") for key in _code(row[0])}
    # The document's keys, then "A trunk:"'s.
    document, trunk, *_ = [rows for rows in _tables(_section(page, "Top-level keys")) if rows[0][0] == "key"]
    for rows, where in ((document, "document"), (trunk, "trunk")):
        found |= {f"{where}.{key}" for row in rows[1:] for key in _code(row[0])}
    return found


def _config_keys() -> set[str]:
    """The keys a document may hold, from the configuration's types (what it refuses as
    unknown is everything else)."""

    def keys(kind: type, where: str) -> set[str]:
        return {f"{where}.{f.name}" for f in dataclasses.fields(kind) if f.init}

    return (
        keys(config.Deployment, "document")
        | keys(config.TrunkConfig, "trunk")
        | keys(config.RuleConfig, "rule")
    )


def _cli() -> argparse.ArgumentParser:
    from trunkwatch_local.cli import _parser

    return _parser()


def _cli_flags() -> set[str]:
    """`command --flag` of every subcommand's options, and `trunkwatch --flag` of the
    command's own (but --help and --version)."""
    parser = _cli()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = [("trunkwatch", parser), *commands.choices.items()]
    return {
        f"{name} {flag}"
        for name, sub in parsers
        for action in sub._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag not in ("--help", "--version")
    }


def _documented_cli_flags() -> set[str]:
    """`command --flag` of each `trunkwatch <command> ...` docs/local.md shows (in a code span
    or a code block line)."""
    text = (DOCS / "local.md").read_text(encoding="utf-8")
    shown = re.findall(r"`(trunkwatch [^`]+)`", text) + re.findall(r"^\S*trunkwatch .*$", text, re.MULTILINE)
    found = set()
    for usage in shown:
        command = re.match(r"\S*trunkwatch (?:--template \S+ )?([a-z][a-z-]*)", usage)
        name = command.group(1) if command else "trunkwatch"
        found |= {f"{name} {flag}" for flag in re.findall(r"(--[a-z][a-z-]*)", usage)}
    return found


LISTS = [
    Listed(
        "template parameters (deploying.md, Parameters)",
        _documented_parameters,
        lambda: set(_source()["Parameters"]),
    ),
    Listed(
        "parameter defaults (deploying.md, Parameters)",
        _documented_parameter_defaults,
        _template_parameter_defaults,
    ),
    Listed(
        "alarms (operations.md, Operational alarms)",
        _documented_alarms,
        lambda: set(_of_type("AWS::CloudWatch::Alarm")),
    ),
    Listed(
        "metrics (operations.md, Metrics)",
        lambda: _documented_metrics(by_function=False),
        lambda: set(_published()),
    ),
    Listed(
        "which function publishes each metric (operations.md, Metrics)",
        lambda: _documented_metrics(by_function=True),
        _metrics_by_function_in_reach,
    ),
    Listed("configuration keys (configuration.md)", _documented_config_keys, _config_keys),
    Listed("CLI flags of each command (local.md)", _documented_cli_flags, _cli_flags),
    Listed(
        "table partitions per function (deploying.md, Permissions)",
        _documented_partitions,
        _template_partitions,
    ),
]


@pytest.mark.parametrize("listed", LISTS, ids=lambda listed: listed.what)
def test_the_docs_list_what_the_template_and_the_code_have(listed: Listed) -> None:
    documented, actual = listed.documented(), listed.actual()
    assert documented, f"nothing found for {listed.what}: has the page changed shape?"
    assert {"documented only": documented - actual, "not documented": actual - documented} == {
        "documented only": set(),
        "not documented": set(),
    }


def test_the_reserved_concurrency_figures_are_the_templates() -> None:
    section = _section(DOCS / "deploying.md", "Concurrency")
    reserved = {
        name: function["Properties"]["ReservedConcurrentExecutions"]
        for name, function in _of_type("AWS::Serverless::Function").items()
        if "ReservedConcurrentExecutions" in function["Properties"]
    }
    (webhook,) = re.findall(r"The webhook function has a reserved concurrency of (\d+)\.", section)
    (dispatcher,) = re.findall(r"The dispatcher runs one at a time \(reserved concurrency (\d+)\)", section)
    assert {"WebhookFunction": int(webhook), "DispatcherFunction": int(dispatcher)} == reserved
    ((first, second, least),) = re.findall(
        r"\((\d+) \+ (\d+) reserved\) needs an account concurrency limit of at least (\d+)", section
    )
    # Lambda keeps 100 of the account's concurrency unreserved.
    assert (int(first), int(second), int(least)) == (
        reserved["DispatcherFunction"],
        reserved["WebhookFunction"],
        sum(reserved.values()) + 100,
    )
