"""`python -m benchmarks.docs [--summary PATH] [--check]`: docs/performance.md from a benchmark run.

Copies the summary `make bench` wrote (default benchmarks/out/summary.json) to
docs/performance.json and renders docs/performance.md from it with the page's Jinja template,
docs/performance.md.in (the prose, the figures as placeholders, the tables as loops over the
data). `--check` renders docs/performance.json again and fails when docs/performance.md is not
that rendering.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import jinja2

from benchmarks.cost import trunk_gauges_usd

OUT = Path(__file__).parent / "out"  # where `python -m benchmarks` writes summary.json
DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGE = DOCS / "performance.md"
DATA = DOCS / "performance.json"
TEMPLATE = DOCS / "performance.md.in"


class _Missing(jinja2.ChainableUndefined):
    """A figure the summary lacks (or a section an older run measured without it): n/a, and
    nothing to iterate."""

    def __str__(self) -> str:
        return "n/a"

    def __call__(self, *args: Any, **kwargs: Any) -> _Missing:  # type: ignore[override]
        return self


def figure(value: Any) -> str:
    """A figure as the page shows it: thousands separated, at most 4 significant digits."""
    if value is None or isinstance(value, jinja2.Undefined):
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == int(value) and abs(value) >= 1:
            return f"{int(value):,}"
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return re.sub(r"(?<!\\)\|", r"\\|", str(value))  # a `|` would split its table cell


def _usd(value: Any) -> str:
    return "n/a" if value is None or isinstance(value, jinja2.Undefined) else f"${float(value):,.2f}"


def _share(value: Any) -> str:
    return "n/a" if value is None or isinstance(value, jinja2.Undefined) else f"{float(value):.1%}"


def render(summary: dict[str, Any]) -> str:
    """The page for this summary (a pure function of it and the template)."""
    environment = jinja2.Environment(  # noqa: S701 - Markdown, not HTML: nothing to escape
        undefined=_Missing, finalize=figure, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True
    )
    environment.filters.update(n=figure, usd=_usd, share=_share)
    template = environment.from_string(TEMPLATE.read_text(encoding="utf-8"))
    page = template.render(summary, summary=summary, trunk_gauges_usd=trunk_gauges_usd(True))
    return page.rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.docs", description=__doc__)
    parser.add_argument("--summary", type=Path, default=OUT / "summary.json", help="the run to render")
    parser.add_argument(
        "--check", action="store_true", help="only check performance.md against performance.json"
    )
    args = parser.parse_args(argv)
    if args.check:
        if PAGE.read_text(encoding="utf-8") != render(json.loads(DATA.read_text(encoding="utf-8"))):
            print(f"{PAGE} is not the rendering of {DATA}: run `make docs`", file=sys.stderr)
            return 1
        return 0
    if not args.summary.is_file():
        parser.error(f"no summary at {args.summary}: run `make bench` first")
    summary = json.loads(args.summary.read_text(encoding="utf-8"))
    DATA.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    PAGE.write_text(render(summary), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(DOCS.parent)} and {DATA.relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
