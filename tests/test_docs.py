"""The docs: the code's pointers into docs/design.md name sections that exist, design.md's
function table is the template's, and the performance page is the rendering of its data."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POINTER = re.compile(r"design\.md §(\d+(?:\.\d+)?)((?:, §\d+(?:\.\d+)?)*)")
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)?)\.? ", re.MULTILINE)


def test_every_design_pointer_names_a_section() -> None:
    sections = set(HEADING.findall((ROOT / "docs" / "design.md").read_text()))
    cited: dict[str, set[str]] = {}
    elsewhere: list[str] = []  # pointers at a document the repository does not hold
    for folder in ("layers", "functions", "trunkwatch_local", "benchmarks", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            elsewhere += [str(path.relative_to(ROOT)) for _ in re.finditer(r"\bSPEC \d", text)]
            for found in POINTER.finditer(text):
                numbers = [found.group(1), *re.findall(r"§(\d+(?:\.\d+)?)", found.group(2))]
                for number in numbers:
                    cited.setdefault(number, set()).add(str(path.relative_to(ROOT)))
    assert elsewhere == []
    assert cited, "no pointer found: the pattern no longer matches the code's comments"
    assert {number: paths for number, paths in cited.items() if number not in sections} == {}


DOCS = ROOT / "docs"


def _template_functions() -> dict[str, str]:
    """Every AWS::Serverless::Function of template.yaml, with its CodeUri."""
    functions: dict[str, str] = {}
    name = kind = None
    for line in (ROOT / "template.yaml").read_text(encoding="utf-8").splitlines():
        if found := re.match(r"^  ([A-Za-z0-9]+):\s*$", line):
            name, kind = found.group(1), None
        elif found := re.match(r"^    Type: (\S+)", line):
            kind = found.group(1)
            if kind == "AWS::Serverless::Function":
                functions[name or ""] = ""
        elif (found := re.match(r"^      CodeUri: (\S+)", line)) and kind == "AWS::Serverless::Function":
            functions[name or ""] = found.group(1)
    return functions


def _design_functions() -> dict[str, str]:
    """design.md's function table: the name and code columns of its rows."""
    text = (DOCS / "design.md").read_text(encoding="utf-8")
    section = text.split("### Functions", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, re.MULTILINE)
    return dict(rows)


def test_design_function_table_is_the_templates_functions() -> None:
    template = _template_functions()
    assert template, "no function found: the template's layout changed"
    assert _design_functions() == template


def test_performance_page_is_the_rendering_of_its_data() -> None:
    from benchmarks.docs import render

    data = json.loads((DOCS / "performance.json").read_text(encoding="utf-8"))
    assert (DOCS / "performance.md").read_text(encoding="utf-8") == render(data), "run `make docs`"
    for title in ("## Where and when", "## Budgets"):
        assert title in render(data)
    for budget in data["budgets"]:
        assert f"| {budget} |" in render(data)


def test_performance_page_renders_a_summary_with_missing_sections() -> None:
    from benchmarks.docs import render

    data = json.loads((DOCS / "performance.json").read_text(encoding="utf-8"))
    partial = {key: data[key] for key in ("cost", "budgets") if key in data}
    page = render(partial)
    assert "## Cost and storage" in page and "## Ingest" not in page
