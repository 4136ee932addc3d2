"""Compare checkov's failed checks (its JSON report) with the accepted findings listed and
explained in docs/deploying.md, section "Accepted checkov findings":

    | check | resources | why |
    |---|---|---|
    | `CKV_AWS_117` | `IngestFunction`, `ApiFunction` | the reason |

Prints one line per finding that is not accepted and per accepted finding that no longer
occurs (so the list never outgrows the template), and exits 1 if there is any. Standard
library only: it runs in checkov's own virtualenv."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SECTION = "Accepted checkov findings"
Finding = tuple[str, str]  # (check id, the resource's logical id)


def accepted(page: str) -> dict[Finding, str]:
    """Each accepted (check, resource) with its reason, from the page's section table."""
    found = re.search(rf"^## {SECTION}\n(.*?)(?=^## |\Z)", page, re.MULTILINE | re.DOTALL)
    if found is None:
        raise ValueError(f"no section '## {SECTION}'")
    rows = [line for line in found.group(1).splitlines() if line.startswith("| `")]
    if not rows:
        raise ValueError(f"section '{SECTION}' has no table rows")
    findings = {}
    for row in rows:
        check, resources, why = (cell.strip() for cell in row.strip().strip("|").split(" | ", 2))
        names = re.findall(r"`([^`]+)`", resources)
        if not why or not names:
            raise ValueError(f"{check}: every accepted finding needs its resources and a reason")
        findings.update({(check.strip("`"), name): why for name in names})
    return findings


def failed(report: str) -> dict[Finding, str]:
    """Each failed (check, resource) of checkov's JSON report, with the check's name."""
    try:
        data = json.loads(report)
        results = data["results"]["failed_checks"]
    except (ValueError, KeyError, TypeError):
        raise ValueError("not a checkov JSON report of one framework (did checkov fail?)") from None
    return {(r["check_id"], r["resource"].rsplit(".", 1)[1]): r["check_name"] for r in results}


def compare(found: dict[Finding, str], listed: dict[Finding, str]) -> list[str]:
    problems = [
        f"checkov: {check} on {resource} ({name}) is not accepted in docs/deploying.md: "
        "fix it or list it with a reason"
        for (check, resource), name in sorted(found.items())
        if (check, resource) not in listed
    ]
    problems += [
        f"checkov: {check} on {resource} is accepted in docs/deploying.md but no longer fails: remove it"
        for check, resource in sorted(listed)
        if (check, resource) not in found
    ]
    return problems


def main(argv: list[str]) -> int:
    report, page = argv
    try:
        problems = compare(failed(Path(report).read_text()), accepted(Path(page).read_text()))
    except ValueError as err:
        print(f"checkov: {err}", file=sys.stderr)
        return 1
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print("checkov: ok: every finding is accepted in docs/deploying.md")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
