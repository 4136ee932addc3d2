"""`python -m benchmarks.docs [--summary PATH] [--check]`: docs/performance.md from a benchmark run.

Copies the summary `make bench` wrote (default benchmarks/out/summary.json) to
docs/performance.json and renders docs/performance.md from it and the page's template,
docs/performance.md.in: the prose, in blocks with the figures as placeholders. A block named
after a section shows its figures (`block_fields`), or is left out when the summary lacks it; a
block's function of its name below adds what the figures alone do not say;
the tables whose rows or columns follow the data are built here whole. `--check` renders
docs/performance.json again and fails when docs/performance.md is not that rendering.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.cost import trunk_gauges_usd

OUT = Path(__file__).parent / "out"  # where `python -m benchmarks` writes summary.json
DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGE = DOCS / "performance.md"
DATA = DOCS / "performance.json"
TEMPLATE = DOCS / "performance.md.in"
BLOCK = re.compile(r"^<!-- block: (\w+) -->\n", re.MULTILINE)

# The sections in the order the page shows them (`runs` says when each was measured).
SECTIONS = [
    "ingest_hud",
    "ingest_github",
    "evaluator",
    "end_to_end",
    "push",
    "cold_start",
    "cost",
    "buildkite_poll",
    "local_scale",
    "github_budget",
    "long_history",
    "serve_week",
    "chaos",
    "memory_replay",
    "org",
    "redtrunk",
]

Fields = dict[str, Any] | None  # a block's placeholders, or None: the block is left out


def _n(value: Any) -> str:
    """A figure as the page shows it: thousands separated, at most 4 significant digits."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == int(value) and abs(value) >= 1:
            return f"{int(value):,}"
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _usd(value: Any) -> str:
    return "n/a" if value is None else f"${float(value):,.2f}"


def _share(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.1%}"


class Figure:
    """A value of the summary in the template: `{x}` as a figure, `{x:usd}` in dollars,
    `{x:%}` as a share; `{x[key]}` the value under `key` (n/a when the summary lacks it)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __getitem__(self, key: str) -> Figure:
        return Figure(self.value.get(key) if isinstance(self.value, dict) else None)

    def __format__(self, spec: str) -> str:
        return {"usd": _usd, "%": _share}.get(spec, _n)(self.value)


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (a `|` in a cell escaped)."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([line(header), line(["---"] * len(header)), *(line(row) for row in rows)])


# --- the blocks, in the template's order --------------------------------------------------

BLOCKS: dict[str, Callable[[dict[str, Any]], Fields]] = {}


def block(fill: Callable[[dict[str, Any]], Fields]) -> Callable[[dict[str, Any]], Fields]:
    """`fill` fills the template's block of its name."""
    BLOCKS[fill.__name__] = fill
    return fill


@block
def page(summary: dict[str, Any]) -> Fields:
    return {}


@block
def provenance(summary: dict[str, Any]) -> Fields:
    runs = summary.get("runs") or {}
    rows = [
        [
            f"`{section}`",
            str(run.get("at", "not recorded")).replace("T", " ").replace("+00:00", " UTC"),
            str(run.get("machine", "not recorded")),
            str(run.get("python", "")),
            _n(run.get("load_average_1m")),
        ]
        for section in SECTIONS
        if section in summary
        for run in [runs.get(section) or {}]
    ]
    return {"table": table(["section", "finished", "machine", "python", "load average"], rows)}


@block
def budgets(summary: dict[str, Any]) -> Fields:
    results = {True: "pass", False: "**fail**"}
    rows = [
        [name, str(b["budget"]), _n(b["measured"]), results.get(b["pass"], "n/a")]
        for name, b in (summary.get("budgets") or {}).items()
    ]
    scale = summary.get("local_scale")
    if scale and "budget" in scale:
        s, limit = Figure(scale), Figure(scale["budget"])
        rows.append(
            [
                f"local runtime, {s['job_columns']} columns, {s['polls']} polls",
                f"<= {limit['wall_s']} s, <= {limit['peak_mb']} MB, doubling <= {limit['doubling_ratio']}x",
                f"{s['wall_s']} s, {s['peak_mb']} MB, {s['doubling_ratio']}x",
                results[not scale.get("over_budget")],
            ]
        )
    return {"table": table(["budget", "limit", "measured", "result"], rows)}


@block
def ingest(summary: dict[str, Any]) -> Fields:
    rows = [
        [
            f"{name}, {phase.removesuffix('_poll')} poll",
            f"{poll['http_requests']} ({poll['http_unconditional_requests']})",
            *(f"{poll[key]}" for key in ("ddb_write_requests", "items_written", "items_read", "wall_s")),
        ]
        for source, name in (("ingest_hud", "HUD"), ("ingest_github", "GitHub"))
        for phase in ("first_poll", "steady_poll")
        if phase in summary.get(source, {})
        for poll in [Figure(summary[source][phase])]
    ]
    if not rows:
        return None
    notes = summary.get("scale", {}).get("notes", [])
    header = [
        "poll",
        "HTTP requests (unconditional)",
        "DynamoDB write requests",
        "items written",
        "items read",
    ]
    return {"notes": f" ({notes[0]})" if notes else "", "table": table([*header, "s"], rows)}


@block
def end_to_end(summary: dict[str, Any]) -> Fields:
    e = summary["end_to_end"]
    return {
        "sizes": ", ".join(f"{name} {_n(n)}" for name, n in e.get("batch_sizes", {}).items()),
        "windows": ", ".join(f"{name} {_n(s)} s" for name, s in e.get("batching_windows_s", {}).items()),
    }


@block
def push(summary: dict[str, Any]) -> Fields:
    p = summary["push"]
    memory = p.get("lambda_gb_s_per_day_by_memory_mb", {}).items()
    return {
        "kinds": ", ".join(f"{_n(n)} {kind}" for kind, n in p.get("deliveries_by_kind", {}).items()),
        "items": ", ".join(
            f"{k.replace('_', ' ')} {_usd(v)}" for k, v in p.get("usd_per_month_items", {}).items()
        ),
        "memory": ", ".join(
            f"**{mb} MB: {_n(v)}**" if int(mb) == p.get("memory_mb") else f"{mb} MB: {_n(v)}"
            for mb, v in memory
        ),
    }


@block
def push_stores(summary: dict[str, Any]) -> Fields:
    """Which store gave which figures (a summary from before the stores were split has none)."""
    p = summary.get("push") or {}
    return {"p": Figure(p)} if "metered_days" in p else None


@block
def push_basis(summary: dict[str, Any]) -> Fields:
    basis = (summary.get("push") or {}).get("basis")
    return {"basis": basis} if basis else None


@block
def push_buildkite(summary: dict[str, Any]) -> Fields:
    b = (summary.get("push") or {}).get("buildkite")
    if not b:
        return None
    poll = b.get("against_poll") or {}

    def named(found: list[list[str]]) -> str:
        return "; ".join(f"{name} {job}".strip() for name, job in found) or "none"

    if not poll:
        polled = "not compared"
    elif poll["same_pages"]:
        polled = f"the same {_n(poll['pushed_pages'])} pages" + (
            "" if poll["same_order"] else ", in another order"
        )
    else:
        polled = (
            f"{_n(poll['pushed_pages'])} pushed, {_n(poll['polled_pages'])} polled; only pushed: "
            f"{named(poll['only_pushed'])}; only polled: {named(poll['only_polled'])}"
        )
    return {
        "b": Figure(b),
        "kinds": ", ".join(f"{_n(n)} {kind}" for kind, n in b.get("deliveries_by_kind", {}).items()),
        "items": ", ".join(
            f"{k.replace('_', ' ')} {_usd(v)}" for k, v in b.get("usd_per_month_items", {}).items()
        ),
        "github": "the same, in the same order" if b.get("same_pages_as_github") else "not the same",
        "polled": polled,
        "until": poll.get("until", "n/a"),
    }


@block
def cold_start(summary: dict[str, Any]) -> Fields:
    c = summary["cold_start"]
    ratios, seconds, cpu = (
        c.get(key, {}) for key in ("handler_import_ratio", "handler_import_s", "handler_import_cpu_ratio")
    )
    rows = [
        [handler, f"{_n(seconds.get(handler))} s", f"{_n(ratio)}x", f"{_n(cpu.get(handler))}x"]
        for handler, ratio in ratios.items()
    ]
    return {
        "webhook": "" if "webhook" in ratios else " The webhook function's import is not measured.",
        "table": table(["handler", "import", "over boto3", "CPU time over boto3"], rows),
    }


@block
def cost(summary: dict[str, Any]) -> Fields:
    c = summary["cost"]
    detail = c.get("items_detail", {})
    rows = [
        [
            name,
            _usd(value),
            ", ".join(f"{part.replace('_', ' ')} {_usd(v)}" for part, v in detail.get(name, {}).items()),
        ]
        for name, value in sorted(c["items"].items(), key=lambda item: -item[1])
    ]
    d = Figure(deployed := c.get("deployed", {}))
    return {
        "prices": c.get("prices_source", "benchmarks/prices.py"),
        "deployed": f" (dashboard: {d['dashboard']}, tracing: {d['tracing']}, {d['alarms']} alarms, "
        f"{_n(len(deployed.get('custom_metrics', [])))} custom metrics, {d['api_requests_per_day']} API "
        "requests a day)"
        if deployed
        else "",
        "table": table(["item", "USD/month", "of which"], rows),
    }


@block
def cost_basis(summary: dict[str, Any]) -> Fields:
    basis = (summary.get("cost") or {}).get("basis")
    return {"basis": basis} if basis else None


@block
def cost_per_trunk(summary: dict[str, Any]) -> Fields:
    per_trunk = (summary.get("cost") or {}).get("per_trunk_usd_per_month")
    if not per_trunk:
        return None
    parts = ", ".join(f"{name} {_usd(v)}" for name, v in per_trunk.items() if name != "total")
    return {"total": Figure(per_trunk["total"]), "parts": parts}


@block
def cost_ticks(summary: dict[str, Any]) -> Fields:
    c = summary.get("cost")
    if not c:
        return None
    prices = c.get("prices", {})
    if "cloudwatch_custom_metric_month" not in prices:
        return {"dashboard": ""}
    dashboard = (
        f" `CreateDashboard: true` adds {_usd(prices['cloudwatch_dashboard_month'])} a month, with "
        f"{_usd(prices['cloudwatch_custom_metric_month'])} for the `AlertsFiring` metric and "
        f"{_usd(trunk_gauges_usd(True))} a trunk for its gauges."
    )
    return {"dashboard": dashboard}


@block
def cost_storage(summary: dict[str, Any]) -> Fields:
    storage = (summary.get("cost") or {}).get("storage")
    if not storage:
        return None
    rows = [
        [part.replace("_", " "), _n(count), _n(storage["gb_by_part"].get(part))]
        for part, count in storage["items"].items()
    ]
    return {"s": Figure(storage), "table": table(["items", "count", "GB"], rows)}


@block
def cost_buildkite(summary: dict[str, Any]) -> Fields:
    polled = summary.get("buildkite_poll")
    if not polled:
        return None
    parts = ", ".join(f"{name} {_usd(v)}" for name, v in polled["usd_per_month_by_item"].items())
    rows = [
        [
            phase.replace("_", " "),
            f"{_n(poll['http_requests'])} ({_n(poll['http_unconditional_requests'])})",
            _n(poll["cells_written"]),
            _n(poll["write_units"]),
            _n(poll["read_units"]),
            _n(poll["code_s"]),
        ]
        for phase, poll in polled["polls"].items()
    ]
    header = ["poll", "requests (unconditional)", "cells written", "write units", "read units", "code s"]
    return {
        "b": Figure(polled),
        "q": Figure(polled["polls"]["quiet_poll"]),
        "parts": parts,
        "table": table(header, rows),
    }


@block
def local_scale(summary: dict[str, Any]) -> Fields:
    s = summary["local_scale"]
    full = s.get("runs", {}).get(str(s["job_columns"]), {})
    return {"full": Figure(full), "capped": ", capped" if s.get("capped") else ""}


@block
def github_budget(summary: dict[str, Any]) -> Fields:
    g = summary["github_budget"]
    walls, requests = g.get("poll_wall_s", []), g.get("poll_requests", [])
    return {
        "longest": Figure(max(walls, default=None)),
        "fewest": Figure(min(requests, default=None)),
        "most": Figure(max(requests, default=None)),
    }


@block
def serve_week(summary: dict[str, Any]) -> Fields:
    w = summary["serve_week"]
    return {
        "minutes": Figure(w["period_s"] / 60),
        "days": ", ".join(_n(mb) for mb in w["rss_mb_by_day"]),
    }


@block
def chaos(summary: dict[str, Any]) -> Fields:
    c = summary["chaos"]
    return {
        "scenarios": len(c["scenarios"]),
        "seeds": ", ".join(map(str, c["seeds"])),
        "columns": {rate: {"r": Figure(figures)} for rate, figures in c["by_rate"].items()},
    }


@block
def memory_replay(summary: dict[str, Any]) -> Fields:
    m = summary["memory_replay"]
    rows = [
        [
            f"`{name}`",
            _n(f["expected"]),
            f"{_n(f['dynamodb']['wall_s'])} s",
            f"{_n(f['memory']['wall_s'])} s",
            f"{_n(f['ratio'])}x",
            "yes" if f["dynamodb"]["matches_expected"] and f["memory"]["matches_expected"] else "**no**",
        ]
        for name, f in m["files"].items()
    ]
    rows.append(
        ["all", "", f"{_n(m['moto_wall_s'])} s", f"{_n(m['memory_wall_s'])} s", f"{_n(m['ratio'])}x", ""]
    )
    header = ["replay", "messages", "moto", "in memory", "ratio", "expected messages both ways"]
    return {"table": table(header, rows)}


@block
def org(summary: dict[str, Any]) -> Fields:
    o = summary["org"]
    return {
        "added": ", ".join(f"{n} trunks {_usd(v)}" for n, v in o.get("added_usd_per_month", {}).items()),
        "gauges": Figure(trunk_gauges_usd(True)),
        "basis": o.get("basis", ""),
    }


@block
def redtrunk(summary: dict[str, Any]) -> Fields:
    trunks = summary["redtrunk"].get("trunks") or {}
    if not trunks:
        return None
    # Without (w) / with (c) confirmation by reruns, the confirmed run's verdicts (v), pushed (p);
    # in Buildkite form, confirmed by job retries (b), its verdicts (bv).
    return {
        "columns": {
            name: {
                "w": Figure(trunks[name]["without_confirmation"]),
                "c": Figure(trunks[name]["with_confirmation"]),
                "v": Figure(trunks[name]["with_confirmation"]["verdicts"]),
                "p": Figure(trunks[name].get("pushed")),
                "b": Figure(trunks[name].get("buildkite")),
                "bv": Figure((trunks[name].get("buildkite") or {}).get("verdicts")),
            }
            for name in sorted(trunks)
        }
    }


@block
def notes(summary: dict[str, Any]) -> Fields:
    found = summary.get("scale", {}).get("notes", [])
    return {"notes": "\n".join(f"- {note}" for note in found)} if found else None


def template() -> list[tuple[str, str]]:
    """The template's blocks, in order: (name, text). What precedes the first is its preamble."""
    _, *parts = BLOCK.split(TEMPLATE.read_text(encoding="utf-8"))
    blocks = list(zip(parts[::2], parts[1::2], strict=True))
    names = [name for name, _ in blocks]
    if [n for n in names if n in BLOCKS] != list(BLOCKS) or not set(names) <= {*BLOCKS, *SECTIONS}:
        raise ValueError(f"{TEMPLATE.name}'s blocks are not benchmarks/docs.py's: {names}")
    return blocks


def block_fields(name: str, summary: dict[str, Any]) -> Fields:
    """A block's placeholders. A block named after a section is left out when the summary
    lacks it, and has its figures as `{section[key]}`; then what the block's function adds
    (its None: left out)."""
    if name in SECTIONS and not summary.get(name):
        return None
    found = BLOCKS[name](summary) if name in BLOCKS else {}
    return None if found is None else {name: Figure(summary.get(name)), **found}


def fill(text: str, fields: dict[str, Any]) -> str:
    """`text` with `fields`. With `fields["columns"]` ({column's name: its fields}), a table
    line `| label | cell |` is the label, then the cell filled for each column in turn
    (`{name}` is the column's name)."""
    spread = fields.get("columns")
    if spread is None:
        return text.format_map(fields)
    lines = []
    for line in text.split("\n"):
        if line.startswith("| "):
            label, cell = line.removeprefix("| ").removesuffix(" |").split(" | ")
            cells = [cell.format_map({"name": name, **figures}) for name, figures in spread.items()]
            line = "| " + " | ".join([label, *cells]) + " |"
        else:
            line = line.format_map(fields)
        lines.append(line)
    return "\n".join(lines)


def render(summary: dict[str, Any]) -> str:
    """The page for this summary (a pure function of it and the template)."""
    filled = [(text, block_fields(name, summary)) for name, text in template()]
    return "".join(fill(text, fields) for text, fields in filled if fields is not None).rstrip("\n") + "\n"


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
