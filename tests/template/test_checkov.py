"""The accepted checkov findings (docs/deploying.md) and the comparison `make checkov` makes
with checkov's report (scripts/checkov_accepted.py)."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType

import pytest

from tests.support.paths import ROOT
from trunkwatch_local.template import load_template

PAGE = ROOT / "docs" / "deploying.md"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "checkov_accepted", ROOT / "scripts" / "checkov_accepted.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checkov_accepted = _script()


def _report(*findings: tuple[str, str]) -> str:
    failed = [
        {"check_id": check, "check_name": f"name of {check}", "resource": f"AWS::Some::Type.{resource}"}
        for check, resource in findings
    ]
    return json.dumps({"check_type": "cloudformation", "results": {"failed_checks": failed}})


def test_every_accepted_finding_names_a_resource_of_the_template_and_a_reason() -> None:
    listed = checkov_accepted.accepted(PAGE.read_text(encoding="utf-8"))
    resources = set(load_template(ROOT / "template.yaml")["Resources"])
    assert {resource for _, resource in listed} <= resources
    assert all(len(reason) > 40 for reason in listed.values())
    # The public webhook function's reserved concurrency is not among them: it has one.
    assert ("CKV_AWS_115", "WebhookFunction") not in listed


def test_a_finding_not_accepted_and_an_accepted_one_that_no_longer_occurs_both_fail() -> None:
    listed = {("CKV_AWS_117", "IngestFunction"): "why", ("CKV_AWS_27", "PollQueue"): "why"}
    found = checkov_accepted.failed(
        _report(("CKV_AWS_117", "IngestFunction"), ("CKV_AWS_115", "WebhookFunction"))
    )
    assert checkov_accepted.compare(found, listed) == [
        "checkov: CKV_AWS_115 on WebhookFunction (name of CKV_AWS_115) is not accepted in docs/deploying.md: "
        "fix it or list it with a reason",
        "checkov: CKV_AWS_27 on PollQueue is accepted in docs/deploying.md but no longer fails: remove it",
    ]
    found = checkov_accepted.failed(_report(*listed))
    assert checkov_accepted.compare(found, listed) == []


@pytest.mark.parametrize("report", ["", "[]", '{"results": {}}', "checkov crashed"])
def test_anything_but_a_checkov_report_fails(report: str) -> None:
    with pytest.raises(ValueError, match="not a checkov JSON report"):
        checkov_accepted.failed(report)


def test_an_accepted_row_without_a_reason_is_refused() -> None:
    table = "| check | resources | why |\n|---|---|---|\n| `CKV_AWS_27` | `PollQueue` |  |\n"
    page = f"## Accepted checkov findings\n\n{table}"
    with pytest.raises(ValueError, match="needs its resources and a reason"):
        checkov_accepted.accepted(page)
