"""The code's pointers into docs/design.md name sections that exist."""

from __future__ import annotations

import re

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
