"""The summary as a readable table."""

from __future__ import annotations

from typing import Any


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def _table(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return (
        [title, _row(header, widths), _row(["-" * w for w in widths], widths)]
        + [_row(r, widths) for r in rows]
        + [""]
    )


def _n(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def render(summary: dict[str, Any]) -> str:
    lines: list[str] = [f"trunkwatch benchmarks ({summary['scale']['description']})", ""]
    keys = [
        "http_requests",
        "http_unconditional_requests",
        "ddb_write_requests",
        "items_written",
        "items_read",
        "write_units",
        "read_units",
        "wall_s",
        "peak_mb",
    ]
    rows = [
        [f"{source} {phase.removesuffix('_poll')}", *(_n(summary[source][phase][k]) for k in keys)]
        for source in ("ingest_hud", "ingest_github")
        for phase in ("first_poll", "steady_poll")
    ]
    lines += _table(f"1. ingest (one poll; {summary['scale']['notes'][0]})", ["poll", *keys], rows)
    evaluator = summary["evaluator"]
    lines += _table(
        f"2. evaluator ({evaluator['changed_cells']} changed cells of one commit)",
        ["figure", "value"],
        [[k, _n(v)] for k, v in evaluator.items() if not isinstance(v, dict)],
    )
    e2e = summary["end_to_end"]
    lines += _table(
        "3. end to end (one simulated day through the local runtime)",
        ["figure", "value"],
        [[k, _n(v)] for k, v in e2e.items() if not isinstance(v, list | dict)]
        + [[f"sent: {k}", _n(v)] for k, v in e2e["messages"].items()],
    )
    cold = summary["cold_start"]
    lines += _table(
        f"4. cold start ({cold['interpreter']}; layer: {cold['layer_source']})",
        ["figure", "value"],
        [
            ["boto3_import_s", _n(cold["boto3_import_s"])],
            ["layer_mb (DomainLayer)", _n(cold["layer_mb"])],
            ["api_layer_mb (ApiLayer)", _n(cold["api_layer_mb"])],
            ["load average (1 min; before, after)", ", ".join(_n(v) for v in cold["load_average"])],
        ]
        + [
            [
                f"{h} import s (ratio; CPU-time ratio)",
                f"{_n(s)} ({_n(cold['handler_import_ratio'][h])}x; "
                f"{_n(cold['handler_import_cpu_ratio'][h])}x)",
            ]
            for h, s in cold["handler_import_s"].items()
        ],
    )
    cost = summary["cost"]
    lines += _table(
        f"5. cost at PyTorch scale ({cost['job_columns']:,} job columns, "
        f"{cost['commits_per_day']} commits/day)",
        ["item", "USD/month"],
        [[k, _n(v)] for k, v in cost["items"].items()]
        + [["usage (usd_per_month)", _n(cost["usd_per_month"])]]
        + [["all in (usd_per_month_all_in)", _n(cost["usd_per_month_all_in"])]],
    )
    storage = cost["storage"]
    lines += _table(
        f"table size in the steady state ({_n(storage['gb'])} GB; cells and commits kept "
        f"{_n(storage['retention_days'])} days)",
        ["items", "count", "GB"],
        [[part, f"{count:,}", _n(storage["gb_by_part"][part])] for part, count in storage["items"].items()],
    )
    lines += _table(
        "budgets",
        ["budget", "limit", "measured", "result"],
        [
            [name, b["budget"], _n(b["measured"]), "pass" if b["pass"] else "FAIL"]
            for name, b in summary["budgets"].items()
        ],
    )
    lines += [f"note: {note}" for note in summary["scale"]["notes"]]
    return "\n".join(lines)
