"""The code's pointers into docs/design.md name sections that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.paths import ROOT

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


# The user's guide: a short README that links every page of docs/, links that resolve, a
# design.md whose function table is the template's, a generated performance page.

README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
README_MAX_LINES = 250


RUNBOOK = ROOT / "layers" / "trunkwatch" / "trunkwatch" / "api" / "static" / "runbook.md"


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md")), RUNBOOK]


def _links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return [a or b for a, b in LINK.findall(text)]


def _anchors(path: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / link.split("#")[0]).resolve() for link in _links(README) if not link.startswith("http")}
    assert [page.name for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked] == []


def test_every_relative_link_resolves() -> None:
    broken: list[str] = []
    for page in _pages():
        for link in _links(page):
            if re.match(r"^[a-z]+:", link):
                continue  # http(s), mailto: not checked offline
            target, _, anchor = link.partition("#")
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    assert broken == []


def test_every_make_target_the_docs_name_exists() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w./$()-]+):", makefile, re.MULTILINE))
    targets = {t.replace("$(VENV)", ".venv").replace("$(SAM_VENV)", ".venv-sam") for t in targets}
    named = {
        (page.name, target)
        for page in _pages()
        for target in re.findall(
            r"`make ([\w./-]+)`|^make ([\w./-]+)", page.read_text(encoding="utf-8"), re.M
        )
        for target in target
        if target
    }
    assert sorted((page, target) for page, target in named if target not in targets) == []


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
    # Every red trunk measured has its column.
    trunks = data.get("redtrunk", {}).get("trunks", {})
    header = next((line for line in render(data).splitlines() if line.startswith("| figure | `")), "")
    assert all(f"`{name}`" in header for name in trunks)


def test_performance_page_renders_a_summary_with_missing_sections() -> None:
    from benchmarks.docs import render

    data = json.loads((DOCS / "performance.json").read_text(encoding="utf-8"))
    partial = {key: data[key] for key in ("cost", "budgets") if key in data}
    page = render(partial)
    assert "## Cost and storage" in page and "## Ingest" not in page


def test_a_figure_the_summary_lacks_reads_n_a() -> None:
    from benchmarks.docs import render

    data = json.loads((DOCS / "performance.json").read_text(encoding="utf-8"))
    del data["push"]["usd_per_million_deliveries"], data["evaluator"]["scans"]
    page = render(data)
    assert "| push path's cost per million deliveries, all told | n/a |" in page
    assert " n/a scans, " in page
