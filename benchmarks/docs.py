"""`python -m benchmarks.docs [--summary PATH] [--check]`: docs/performance.md from a benchmark run.

Copies the summary `make bench` wrote (default benchmarks/out/summary.json) to
docs/performance.json and renders docs/performance.md from it: the budgets table, every
workload's figures, and when and on what machine each section ran. Every figure on the page
comes from the summary; the prose around them says what was measured. `--check` renders
docs/performance.json again and fails when docs/performance.md is not that rendering.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.cost import trunk_gauges_usd

OUT = Path(__file__).parent / "out"  # where `python -m benchmarks` writes summary.json
DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGE = DOCS / "performance.md"
DATA = DOCS / "performance.json"

# The sections in the order the page shows them, with their titles.
SECTIONS = {
    "ingest_hud": "Ingest",
    "ingest_github": "Ingest",
    "evaluator": "Evaluator",
    "end_to_end": "End to end (polling)",
    "push": "Push (webhooks)",
    "cold_start": "Cold start and layers",
    "cost": "Cost and storage",
    "local_scale": "Local runtime at PyTorch scale",
    "github_budget": "GitHub first poll under its time budget",
    "long_history": "Local runtime on a real trunk's history",
    "serve_week": "`trunkwatch serve` for a simulated week",
    "chaos": "Invocations dying at random AWS calls",
    "memory_replay": "Replays on the in-memory store",
    "org": "An organization on one deployment",
    "redtrunk": "A red trunk's breakages, culprits and verdicts",
}


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
    return f"${float(value):,.2f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return [line(header), line(["---"] * len(header)), *(line(row) for row in rows), ""]


def _provenance(summary: dict[str, Any]) -> list[str]:
    runs = summary.get("runs") or {}
    rows = []
    for section in SECTIONS:
        if section not in summary:
            continue
        run = runs.get(section) or {}
        rows.append(
            [
                f"`{section}`",
                str(run.get("at", "not recorded")).replace("T", " ").replace("+00:00", " UTC"),
                str(run.get("machine", "not recorded")),
                str(run.get("python", "")),
                _n(run.get("load_average_1m")),
            ]
        )
    return [
        "## Where and when",
        "",
        "Each section of the summary as it was last measured: when its run finished, on what, and",
        "the machine's 1-minute load average then. Wall times, import ratios and Lambda compute",
        "(in-process time scaled to the deployed function's CPU share) grow with the load; request",
        "counts, items and their costs do not.",
        "",
        *_table(["section", "finished", "machine", "python", "load average"], rows),
    ]


def _budgets(summary: dict[str, Any]) -> list[str]:
    rows = [
        [name, str(b["budget"]), _n(b["measured"]), {True: "pass", False: "**fail**"}.get(b["pass"], "n/a")]
        for name, b in (summary.get("budgets") or {}).items()
    ]
    scale = summary.get("local_scale")
    if scale and "budget" in scale:
        limit = scale["budget"]
        rows.append(
            [
                f"local runtime, {_n(scale['job_columns'])} columns, {_n(scale['polls'])} polls",
                f"<= {_n(limit['wall_s'])} s, <= {_n(limit['peak_mb'])} MB, "
                f"doubling <= {_n(limit['doubling_ratio'])}x",
                f"{_n(scale['wall_s'])} s, {_n(scale['peak_mb'])} MB, {_n(scale['doubling_ratio'])}x",
                "**fail**" if scale.get("over_budget") else "pass",
            ]
        )
    return [
        "## Budgets",
        "",
        "The limits are `benchmarks/budgets.py`'s (the local runtime's, `benchmarks/local_scale.py`'s).",
        "",
        *_table(["budget", "limit", "measured", "result"], rows),
    ]


def _ingest(summary: dict[str, Any]) -> list[str]:
    rows = []
    for source, name in (("ingest_hud", "HUD"), ("ingest_github", "GitHub")):
        for phase in ("first_poll", "steady_poll"):
            poll = summary.get(source, {}).get(phase)
            if poll is None:
                continue
            rows.append(
                [
                    f"{name}, {phase.removesuffix('_poll')} poll",
                    f"{_n(poll['http_requests'])} ({_n(poll['http_unconditional_requests'])})",
                    _n(poll["ddb_write_requests"]),
                    _n(poll["items_written"]),
                    _n(poll["items_read"]),
                    _n(poll["wall_s"]),
                ]
            )
    if not rows:
        return []
    notes = summary.get("scale", {}).get("notes", [])
    return [
        "## Ingest",
        "",
        "One poll of a synthetic PyTorch-scale trunk"
        + (f" ({notes[0]})" if notes else "")
        + ": a first poll, then a steady one that finds nothing new. A steady HUD poll fetches the",
        "page and, when it is byte for byte the last one stored, neither parses nor compares it; a",
        "steady GitHub poll sends only conditional requests.",
        "",
        *_table(
            [
                "poll",
                "HTTP requests (unconditional)",
                "DynamoDB write requests",
                "items written",
                "items read",
                "s",
            ],
            rows,
        ),
    ]


def _evaluator(summary: dict[str, Any]) -> list[str]:
    e = summary.get("evaluator")
    if not e:
        return []
    return [
        "## Evaluator",
        "",
        f"A commit's {_n(e.get('changed_cells'))} cells finishing: "
        f"{_n(e['queries_per_changed_cell'])} Queries and {_n(e['writes_per_changed_cell'])} writes per "
        f"changed cell, {_n(e['scans'])} scans, {_n(e['cells_per_s'])} cells a second. A pending cell that",
        "finishes as a pass (or flaky) on a job that is not firing cannot change its verdict",
        "(`rule.may_change_verdict`), so it is not read at all; any other change costs at most one",
        "Query for its job per batch.",
        "",
    ]


def _end_to_end(summary: dict[str, Any]) -> list[str]:
    e = summary.get("end_to_end")
    if not e:
        return []
    windows = ", ".join(f"{name} {_n(s)} s" for name, s in e.get("batching_windows_s", {}).items())
    sizes = ", ".join(f"{name} {_n(n)}" for name, n in e.get("batch_sizes", {}).items())
    return [
        "## End to end (polling)",
        "",
        f"A simulated day through the local runtime at reduced scale ({_n(e['job_columns'])} job columns, "
        f"{_n(e['commits'])} commits), ticking every {_n(e['schedule_period_s'])} s around each episode's",
        "deciding job; the publish time adds the deployed path after each tick, with template.yaml's",
        f"stream settings (batch sizes: {sizes}; batching windows: {windows}; a stream hop of "
        f"{_n(e.get('stream_hop_s'))} s per invocation) and each invocation's measured duration.",
        "",
        *_table(
            ["figure", "value"],
            [
                ["notifications", _n(e["notifications"])],
                ["false alarms", _n(e.get("false_alarms"))],
                [
                    "detection delay p50 (deciding job's completion to SNS publish)",
                    f"{_n(e['detection_delay_s_p50'])} s",
                ],
                ["detection delay max", f"{_n(e['detection_delay_s_max'])} s"],
                ["longest tick-to-publish path", f"{_n(e.get('pipeline_s_max'))} s"],
                ["bound: a job finishing just after a poll", f"{_n(e.get('detection_delay_s_bound'))} s"],
            ],
        ),
    ]


def _push(summary: dict[str, Any]) -> list[str]:
    p = summary.get("push")
    if not p:
        return []
    items = ", ".join(
        f"{name.replace('_', ' ')} {_usd(v)}" for name, v in p.get("usd_per_month_items", {}).items()
    )
    per = p.get("per_trunk_job", {})
    paged = p.get("paging", {})
    kinds = ", ".join(f"{_n(n)} {kind}" for kind, n in p.get("deliveries_by_kind", {}).items())
    return [
        "## Push (webhooks)",
        "",
        f"{_n(p.get('days'))} days of a red trunk (benchmarks/redtrunk.py) fed by webhook deliveries",
        "alone through the local runtime, as GitHub sends them: each commit's `push` and runs when",
        "it lands, each job's `queued` and `in_progress` then and its `completed` at its own finish",
        "time, a retried job's failure then its retry; with the deployed timeline after each",
        "instant: the half-second delivery group, the stream hops and batching windows as above.",
        "GitHub does not let a webhook filter by branch, so every job of every pull request is",
        "delivered too. Its pages are scored against the trunk's truth as in the red-trunk section.",
        "",
        *_table(
            ["figure", "value"],
            [
                ["deliveries", f"{_n(p['deliveries'])} ({kinds})"],
                ["notifications", _n(p["notifications"])],
                [
                    "detection delay p50 / p95 / max (deciding job's delivery to SNS publish)",
                    f"{_n(p['detection_delay_s_p50'])} / {_n(p['detection_delay_s_p95'])} / "
                    f"{_n(p['detection_delay_s_max'])} s",
                ],
                [
                    "job pages, precision (broken by anything), pages per breakage",
                    f"{_n(paged.get('job_pages'))}, {_n(paged.get('precision_any_breakage'))}, "
                    f"{_n(paged.get('breakage_pages_per_breakage'))}",
                ],
                ["jobs paged again within 3 h of resolving", _n(paged.get("jobs_paged_again_within_3h"))],
                [
                    "deliveries a day (from the measured volume, see the basis)",
                    _n(p.get("deliveries_per_day_assumed")),
                ],
                [
                    "push path's cost per million deliveries, all told",
                    _usd(p.get("usd_per_million_deliveries", 0.0)),
                ],
                ["trunk jobs a day", _n(p.get("trunk_jobs_per_day"))],
                [
                    "per trunk job (its deliveries: design.md §2, `webhook`)",
                    f"{_n(per.get('deliveries'))} deliveries, "
                    f"{_n(per.get('ddb_write_units'))} write units, "
                    f"{_n(per.get('ddb_read_units'))} read units, "
                    f"{_n(per.get('ddb_requests'))} DynamoDB requests, "
                    f"{_n(per.get('cpu_s'))} s CPU + {_n(per.get('wait_s'))} s waiting",
                ],
                ["per dropped delivery (CPU)", f"{_n(p.get('per_dropped_delivery_s'))} s"],
                [
                    "billed GB-s a day by memory size (the template's in bold)",
                    ", ".join(
                        f"**{mb} MB: {_n(v)}**" if int(mb) == p.get("memory_mb") else f"{mb} MB: {_n(v)}"
                        for mb, v in p.get("lambda_gb_s_per_day_by_memory_mb", {}).items()
                    ),
                ],
                [
                    "push path's cost a month (Lambda function URL, deployed)",
                    f"{_usd(p['usd_per_month'])} ({items})",
                ],
                [
                    "an API Gateway REST route instead would add",
                    _usd(p.get("api_gateway_rest_usd_per_month", 0.0)) + " a month",
                ],
            ],
        ),
        *([f"Basis: {p['basis']}", ""] if p.get("basis") else []),
    ]


def _cold_start(summary: dict[str, Any]) -> list[str]:
    c = summary.get("cold_start")
    if not c:
        return []
    rows = [
        [
            handler,
            f"{_n(c.get('handler_import_s', {}).get(handler))} s",
            f"{_n(ratio)}x",
            f"{_n(c.get('handler_import_cpu_ratio', {}).get(handler))}x",
        ]
        for handler, ratio in c["handler_import_ratio"].items()
    ]
    return [
        "## Cold start and layers",
        "",
        f"Each handler's import against `import boto3` ({_n(c['boto3_import_s'])} s) in the same run "
        f"({c.get('interpreter', '')}; median of {_n(c.get('runs'))} fresh processes each). Layers "
        f"({c.get('layer_source', '')}), unzipped: DomainLayer {_n(c['layer_mb'])} MiB, ApiLayer "
        f"{_n(c['api_layer_mb'])} MiB.",
        "",
        "DomainLayer goes to every function (trunkwatch, Powertools without the API-only and unused",
        "parts, the X-Ray SDK, pynamodb, re2; nothing the runtime ships), ApiLayer to the API only",
        "(pydantic and Powertools' event handler without the Swagger UI assets)."
        + (
            ""
            if "webhook" in c["handler_import_ratio"]
            else " The webhook function's import is not measured."
        ),
        "",
        *_table(["handler", "import", "over boto3", "CPU time over boto3"], rows),
    ]


def _cost(summary: dict[str, Any]) -> list[str]:
    c = summary.get("cost")
    if not c:
        return []
    detail = c.get("items_detail", {})
    rows = [
        [
            name,
            _usd(value),
            ", ".join(f"{part.replace('_', ' ')} {_usd(v)}" for part, v in detail.get(name, {}).items()),
        ]
        for name, value in sorted(c["items"].items(), key=lambda item: -item[1])
    ]
    deployed = c.get("deployed", {})
    lines = [
        "## Cost and storage",
        "",
        f"At PyTorch scale ({_n(c['job_columns'])} job columns, {_n(c['commits_per_day'])} commits a day), "
        f"list prices without free tiers ({c.get('prices_source', 'benchmarks/prices.py')}), every",
        "resource the template deploys at its parameter defaults"
        + (
            f" (dashboard: {_n(deployed.get('dashboard'))}, tracing: {_n(deployed.get('tracing'))}, "
            f"{_n(deployed.get('alarms'))} alarms, {_n(len(deployed.get('custom_metrics', [])))} custom "
            f"metrics, {_n(deployed.get('api_requests_per_day'))} API requests a day)"
            if deployed
            else ""
        )
        + f": usage **{_usd(c['usd_per_month'])}** a month, **{_usd(c['usd_per_month_all_in'])}** all in.",
        "",
        *_table(["item", "USD/month", "of which"], rows),
    ]
    if c.get("basis"):
        lines += [f"Basis: {c['basis']}", ""]
    per_trunk = c.get("per_trunk_usd_per_month")
    if per_trunk:
        parts = ", ".join(f"{name} {_usd(v)}" for name, v in per_trunk.items() if name != "total")
        lines += [
            f"Each further trunk of this size adds **{_usd(per_trunk['total'])}** a month ({parts}): its",
            "own ingest invocation on every tick, its poll queue requests and logs, and with the",
            "dashboard its per-trunk gauges; nothing else grows with the number of trunks.",
            "",
        ]
    lines += [
        "Every tick costs a poll, the evaluator's sweep and the notifier on the tick the sweep",
        "settles; a commit adds its polls' cells through the evaluator and the notifier. Quiet polls",
        "are cheap because an unchanged page is not parsed again; a trunk whose page changes every",
        "minute pays a full parse per poll instead."
        + (
            f" `CreateDashboard: true` adds {_usd(c['prices']['cloudwatch_dashboard_month'])} a month, "
            f"with {_usd(c['prices']['cloudwatch_custom_metric_month'])} for the `AlertsFiring` metric "
            f"and {_usd(trunk_gauges_usd(True))} a trunk for its gauges."
            if "cloudwatch_custom_metric_month" in c.get("prices", {})
            else ""
        ),
        "",
    ]
    storage = c.get("storage")
    if storage:
        lines += [
            f"The table's steady-state size (each kind of item for as long as its TTL keeps it, cells "
            f"and commits {_n(storage['retention_days'])} days): **{_n(storage['gb'])} GB**.",
            "",
            *_table(
                ["items", "count", "GB"],
                [
                    [part.replace("_", " "), _n(count), _n(storage["gb_by_part"].get(part))]
                    for part, count in storage["items"].items()
                ],
            ),
        ]
    return lines


def _local_scale(summary: dict[str, Any]) -> list[str]:
    s = summary.get("local_scale")
    if not s:
        return []
    runs = s.get("runs", {})
    full = runs.get(str(s["job_columns"]), {})
    return [
        "## Local runtime at PyTorch scale",
        "",
        f"`python -m benchmarks local_scale`: a first poll of a {_n(s['commits_per_page'])}-commit, "
        f"{_n(s['job_columns'])}-column HUD page, then incremental polls, each a full schedule tick "
        f"({_n(s['polls'])} polls in all" + (", capped" if s.get("capped") else "") + ").",
        "",
        *_table(
            ["figure", "value"],
            [
                ["wall time", f"{_n(s['wall_s'])} s"],
                [
                    "first poll (of which ingest)",
                    f"{_n(full.get('first_poll_s'))} s ({_n(full.get('first_ingest_s'))} s)",
                ],
                ["slowest incremental poll", f"{_n(full.get('incremental_poll_s_max'))} s"],
                ["peak memory", f"{_n(s['peak_mb'])} MB"],
                ["doubling ratio (against half the columns)", f"{_n(s['doubling_ratio'])}x"],
                ["most items one partition key receives in a poll", _n(s["max_items_per_partition_key"])],
            ],
        ),
    ]


def _github_budget(summary: dict[str, Any]) -> list[str]:
    g = summary.get("github_budget")
    if not g:
        return []
    walls, requests = g.get("poll_wall_s", []), g.get("poll_requests", [])
    return [
        "## GitHub first poll under its time budget",
        "",
        f"`python -m benchmarks github_budget`: {_n(g['job_columns'])} job columns, every request "
        f"answered {_n(g['delay_s'])} s late, a {_n(g['budget_s'])} s budget per poll.",
        "",
        *_table(
            ["figure", "value"],
            [
                ["polls to catch up", f"{_n(g['polls'])} (caught up: {_n(g['caught_up'])})"],
                ["longest poll", f"{_n(max(walls, default=None))} s"],
                [
                    "requests",
                    f"{_n(g['http_requests'])} ({_n(min(requests, default=None))} to "
                    f"{_n(max(requests, default=None))} a poll)",
                ],
                [
                    "runs in the window, delivered",
                    f"{_n(g.get('runs_in_window'))}, {_n(g.get('runs_delivered'))}",
                ],
                ["job runs delivered twice", _n(g.get("duplicated_job_runs"))],
                ["polls over budget", _n(g.get("over_budget_polls"))],
            ],
        ),
    ]


def _long_history(summary: dict[str, Any]) -> list[str]:
    h = summary.get("long_history")
    if not h:
        return []
    return [
        "## Local runtime on a real trunk's history",
        "",
        f"`python -m benchmarks long_history [PATH]` on `{h['history']}`: the replay event by event on",
        "a fresh runtime; per-poll time of the first and the last tenth of the polls (leaving out the",
        "first poll, which pays the imports and the page's backlog), and the cell items the polls'",
        "Queries read, a count the machine's load does not blur.",
        "",
        *_table(
            ["figure", "value"],
            [
                ["polls", _n(h["polls"])],
                ["wall time (first poll)", f"{_n(h['wall_s'])} s ({_n(h['first_poll_s'])} s)"],
                [
                    "per poll, first and last tenth",
                    f"{_n(h['first_tenth_poll_s'])} s, {_n(h['last_tenth_poll_s'])} s: "
                    f"ratio {_n(h['ratio'])}",
                ],
                [
                    "cells read per poll, first and last tenth",
                    f"{_n(h['first_tenth_cells_read'])}, {_n(h['last_tenth_cells_read'])}",
                ],
                ["peak resident memory", f"{_n(h['peak_mb'])} MB"],
                ["messages (as expected)", f"{_n(h['messages'])} ({_n(h.get('matches_expected'))})"],
            ],
        ),
    ]


def _serve_week(summary: dict[str, Any]) -> list[str]:
    w = summary.get("serve_week")
    if not w:
        return []
    return [
        "## `trunkwatch serve` for a simulated week",
        "",
        f"`python -m benchmarks serve_week`: the serve loop every {_n(w['period_s'] / 60)} simulated minutes "
        f"for a week ({_n(w['ticks'])} ticks), a commit landing at every tick on a page with a daily",
        "break and fix.",
        "",
        *_table(
            ["figure", "value"],
            [
                ["wall time", f"{_n(w['wall_s'])} s"],
                [
                    "resident memory at the end of each day",
                    ", ".join(_n(mb) for mb in w["rss_mb_by_day"]) + " MB",
                ],
                ["growth, days 2 to 7", f"{_n(w['growth_mb_day2_to_7'])} MB"],
                ["messages", _n(w["messages"])],
            ],
        ),
    ]


def _chaos(summary: dict[str, Any]) -> list[str]:
    c = summary.get("chaos")
    if not c:
        return []
    rates = list(c["by_rate"])

    def row(label: str, key: str, fmt: Callable[[Any], str] = _n) -> list[str]:
        return [label, *(fmt(c["by_rate"][rate][key]) for rate in rates)]

    return [
        "## Invocations dying at random AWS calls",
        "",
        f"`python -m benchmarks chaos`: each scenario of `tests/scenarios` ({len(c['scenarios'])})",
        f"replayed with seeds {', '.join(map(str, c['seeds']))} while a share of the AWS calls kill",
        "their invocation, before the call or just after it (`trunkwatch replay --chaos`), with",
        "Lambda's stream retries, bisection and dead-letter queue and the schedule's unretried",
        "events. Each run is compared with the same replay without crashes, ticking at the same",
        "times: a message is lost when it never comes, delayed when it comes later, extra when it",
        "comes twice (allowed only after a crash right after its publish).",
        "",
        *_table(
            ["figure", *(f"{rate} of calls dying" for rate in rates)],
            [
                row("runs", "runs"),
                row("runs losing a message", "runs_losing_messages"),
                row("messages expected", "messages_expected"),
                row("messages lost", "messages_lost"),
                row("messages sent twice", "messages_extra"),
                row("runs sending twice beyond a crash right after a publish", "runs_with_unexplained_extra"),
                row("messages delayed", "messages_delayed"),
                row("longest delay", "max_delay_s", lambda v: f"{_n(v)} s"),
                row("crashes", "crashes"),
                row("AWS calls", "aws_calls"),
                row("stream batch retries", "stream_retries"),
                row("records dead-lettered", "records_dead_lettered"),
                row("scheduled invocations lost", "scheduled_invocations_lost"),
            ],
        ),
    ]


def _memory_replay(summary: dict[str, Any]) -> list[str]:
    m = summary.get("memory_replay")
    if not m:
        return []
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
    return [
        "## Replays on the in-memory store",
        "",
        "`python -m benchmarks memory_replay`: each scenario and the real-history cut replayed on",
        "moto's table (the default) and on the in-memory store (`trunkwatch replay --store memory`),",
        "in one process; both must send the expected messages.",
        "",
        *_table(["replay", "messages", "moto", "in memory", "ratio", "expected messages both ways"], rows),
    ]


def _org(summary: dict[str, Any]) -> list[str]:
    o = summary.get("org")
    if not o:
        return []
    timing = o.get("ingest_s", {})
    by_size = o.get("per_trunk_usd_per_month_by_size", {})
    added = ", ".join(f"{n} trunks {_usd(v)}" for n, v in o.get("added_usd_per_month", {}).items())
    return [
        "## An organization on one deployment",
        "",
        "`python -m benchmarks org`: the organization's trunks through the deployed shape on the",
        "in-memory store: each schedule tick the dispatcher sends one poll message per due trunk and",
        "ingest polls each trunk in an invocation of its own (side by side when deployed); every",
        "trunk replays the synthetic trunk and breaks at the same moments (the stream path's worst",
        "case, and every detection shares its tick's delay). Detection through poll runs on the",
        "deployed timeline (dispatcher, one queue hop, the trunk's own ingest invocation, then the",
        "stream); through push, the push workload with the organization's other trunks configured.",
        "",
        *_table(
            ["figure", "value"],
            [
                ["trunks (PyTorch-sized)", f"{_n(o['trunks'])} ({_n(o['pytorch_sized'])})"],
                [
                    "ticks, every trunk polled on each",
                    f"{_n(o['ticks'])}, {_n(o['every_trunk_polled_each_tick'])}",
                ],
                [
                    "detection delay through poll p50 / p95 / max",
                    f"{_n(o.get('poll_detection_delay_s_p50'))} / {_n(o['poll_detection_delay_s_p95'])} / "
                    f"{_n(o.get('poll_detection_delay_s_max'))} s ({_n(o.get('detections'))} detections, "
                    f"{_n(o.get('false_alarms'))} false alarms)",
                ],
                [
                    "detection delay through push p95 / max",
                    f"{_n(o['push_detection_delay_s_p95'])} / {_n(o.get('push_detection_delay_s_max'))} s",
                ],
                ["tick to the last trunk's poll done (slowest)", f"{_n(o.get('tick_to_last_poll_s_max'))} s"],
                [
                    "dispatcher / ingest p50 (PyTorch-sized, small)",
                    f"{_n(timing.get('dispatcher_p50'))} / {_n(timing.get('big_p50'))}, "
                    f"{_n(timing.get('small_p50'))} s",
                ],
                [
                    "cost per further trunk a month (PyTorch-sized, small)",
                    f"{_usd(by_size.get('pytorch_sized', 0.0))}, {_usd(by_size.get('small', 0.0))}",
                ],
                ["added to the one-trunk deployment's cost a month", added],
            ],
        ),
        "A further trunk costs its polls (one ingest invocation and its queue messages a tick); with",
        f"`CreateDashboard: true` also its three per-trunk gauges, {_usd(trunk_gauges_usd(True))} a month.",
        "",
        f"Basis: {o.get('basis', '')}",
        "",
    ]


def _redtrunk(summary: dict[str, Any]) -> list[str]:
    trunks = (summary.get("redtrunk") or {}).get("trunks") or {}
    if not trunks:
        return []
    names = sorted(trunks)

    def paging(label: str, key: str, fmt: Callable[[Any], str] = _n) -> list[str]:
        """Without / with confirmation by reruns."""
        return [
            label,
            *(
                f"{fmt(trunks[n]['without_confirmation'].get(key))} / "
                f"{fmt(trunks[n]['with_confirmation'].get(key))}"
                for n in names
            ),
        ]

    def verdicts(label: str, *keys: str, fmt: Callable[[Any], str] = _n) -> list[str]:
        return [
            label,
            *(
                " / ".join(fmt(trunks[n]["with_confirmation"]["verdicts"].get(k)) for k in keys)
                for n in names
            ),
        ]

    def share(value: Any) -> str:
        return "n/a" if value is None else f"{float(value):.1%}"

    def pushed(label: str, key: str, fmt: Callable[[Any], str] = _n) -> list[str]:
        """Polled (without confirmation) / fed by webhooks at each job's finish time."""
        return [
            label,
            *(
                f"{fmt(trunks[n]['without_confirmation'].get(key))} / "
                f"{fmt((trunks[n].get('pushed') or {}).get(key))}"
                for n in names
            ),
        ]

    return [
        "## A red trunk's breakages, culprits and verdicts",
        "",
        "`python -m benchmarks redtrunk --seed N` (or `--replay PATH.jsonl.gz --truth",
        "PATH.truth.json.gz`): two weeks of a red PyTorch-style trunk (benchmarks/redtrunk.py, or a",
        "trunk in its format generated elsewhere) replayed through the local runtime as it is and",
        'with `"confirm": "rerun"`, scored against its ground truth (benchmarks/redtrunk_score.py',
        "says how). Paging figures read without / with confirmation; a page's precision counts the",
        "job pages whose job was broken at the time, by code or by anything (a dependency, a runner",
        "outage). A breakage whose fix passed before its third failure finished never has 3 failures",
        "at a job's newest end, at any poll cadence, and one that has them only between two snapshots",
        "is not in the replay: the consecutive-failure rule (design.md §3.2) can page neither; the",
        "row under the pages' counts, from the truth's finish times, those that had them ever and at",
        "one of the replay's snapshots. The rows below are the confirmed run's verdicts; those at 3 h",
        "count the episodes still firing 3 hours after their page. While reruns are planned or",
        "running, the replay also polls when the template's schedule would (docs/local.md): a rerun",
        "is sent one schedule period after its plan, and its result seen within one period of its",
        "end. The `polled / pushed` rows compare the run without confirmation with the same trunk",
        "fed by webhooks alone, each job delivered at its own finish time (its delay runs from the",
        "third failure's own finish, so it has no poll interval in it).",
        "",
        *_table(
            ["figure", *(f"`{name}`" for name in names)],
            [
                [
                    "commits, breakages (of 3 or more commits)",
                    *(
                        f"{_n(trunks[n]['without_confirmation']['commits'])}, "
                        f"{_n(trunks[n]['without_confirmation']['breaks'])} "
                        f"({_n(trunks[n]['without_confirmation']['breaks_3plus'])})"
                        for n in names
                    ),
                ],
                paging("job pages a day", "pages_per_day"),
                paging("precision: broken by code", "precision_code", share),
                paging("precision: broken by anything", "precision_any_breakage", share),
                paging("breakages of 3+ commits with a job page", "breaks_3plus_paged"),
                [
                    "... that showed 3 failures in a row at a job's newest end: ever / at a snapshot",
                    *(
                        f"{_n(trunks[n]['without_confirmation'].get('breaks_3plus_ever_at_head'))} / "
                        f"{_n(trunks[n]['without_confirmation'].get('breaks_3plus_at_head_at_a_poll'))}"
                        for n in names
                    ),
                ],
                paging("... with a job or trunk page", "recall_breaks_3plus_with_trunk_pages", share),
                paging(
                    "median delay after the third failure",
                    "delay_after_third_failure_s_p50",
                    lambda v: f"{_n(v)} s",
                ),
                paging("job pages naming the breaking commit", "culprit_right"),
                verdicts(
                    "innocent commits confirmed: episodes / distinct commits",
                    "innocent_prs_confirmed",
                    "innocent_prs_confirmed_distinct",
                ),
                verdicts(
                    "dependency and runner episodes `environmental` at 3 h",
                    "environmental_at_3h_share",
                    fmt=share,
                ),
                verdicts(
                    "code episodes `confirmed` on the breaking commit at 3 h: all / of pages naming it",
                    "confirmed_right_at_3h_share",
                    "confirmed_right_at_3h_share_of_right_pages",
                    fmt=share,
                ),
                verdicts(
                    "reruns per episode: mean / max", "reruns_per_episode_mean", "reruns_per_episode_max"
                ),
                pushed("polled / pushed: job pages", "job_pages"),
                pushed("polled / pushed: precision (broken by anything)", "precision_any_breakage", share),
                pushed("polled / pushed: breakages of 3+ commits with a job page", "breaks_3plus_paged"),
                pushed("polled / pushed: job pages per breakage", "breakage_pages_per_breakage"),
                pushed("polled / pushed: jobs paged again within 3 h", "jobs_paged_again_within_3h"),
                pushed("polled / pushed: trunk-level pages", "trunk_pages"),
                pushed("polled / pushed: innocent pull requests named", "innocent_prs_named"),
                pushed(
                    "polled / pushed: median delay after the third failure",
                    "delay_after_third_failure_s_p50",
                    lambda v: f"{_n(v)} s",
                ),
            ],
        ),
    ]


def render(summary: dict[str, Any]) -> str:
    """The page for this summary (a pure function of it)."""
    lines = [
        "# Performance",
        "",
        "<!-- Generated by `make docs` (python -m benchmarks.docs) from docs/performance.json;",
        "     edit benchmarks/docs.py, not this file. -->",
        "",
        "What trunkwatch costs and how fast it is, measured by `make bench` against local stand-ins",
        "and in-process moto (no network but 127.0.0.1, and PyPI for building the layers) and",
        "rendered by `make docs` from the summary it writes (kept as `performance.json` beside",
        "this page). The workload is a synthetic PyTorch-scale trunk: sharded job columns in the",
        "PyTorch preset's scope, with flaky and pending jobs, a broken-trunk episode and an infra",
        "outage; its size is in the notes at the end. What the summary holds is",
        "[design.md §8](design.md#8-benchmark-summary).",
        "",
    ]
    lines += _provenance(summary)
    lines += _budgets(summary)
    for part in (
        _ingest,
        _evaluator,
        _end_to_end,
        _push,
        _cold_start,
        _cost,
        _local_scale,
        _github_budget,
        _long_history,
        _serve_week,
        _chaos,
        _memory_replay,
        _org,
        _redtrunk,
    ):
        lines += part(summary)
    notes = summary.get("scale", {}).get("notes", [])
    if notes:
        lines += ["## Notes", "", *(f"- {note}" for note in notes), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


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
