"""`trunkwatch replay` on the in-memory store (the default) against `--store dynamodb` (moto's
table, unpatched): the repository's scenarios and its real-history cut, each replayed both
ways in this process, timed, and checked against its expected messages.

The ratio is of wall times (moto replay / memory replay), summed over the files; each file's
own times and message counts are reported too."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FILES = [
    *sorted(p for p in (ROOT / "tests" / "scenarios").glob("*.jsonl") if ".expected." not in p.name),
    *sorted((ROOT / "tests" / "real-history").glob("*.jsonl.gz")),
]
STORES = ("dynamodb", "memory")


def memory_replay(files: list[Path] | None = None) -> dict[str, Any]:
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.runtime import as_expected, expected_rows, summary_row
    from trunkwatch_local.session import run_replay

    runs: dict[str, Any] = {}
    totals = dict.fromkeys(STORES, 0.0)
    for path in files or FILES:
        expected = as_expected(expected_rows(path) or [])
        figures: dict[str, Any] = {"expected": sum(expected.values())}
        for store in STORES:
            started = time.perf_counter()
            published = run_replay(read_replay(path), store=store)
            rows = as_expected(summary_row(p.as_json()) for p in published)
            seconds = time.perf_counter() - started
            totals[store] += seconds
            figures[store] = {
                "wall_s": round(seconds, 2),
                "messages": sum(rows.values()),
                "matches_expected": rows == expected,
            }
        figures["ratio"] = round(figures["dynamodb"]["wall_s"] / max(figures["memory"]["wall_s"], 1e-3), 2)
        runs[path.name] = figures
        print(f"[memory_replay] {path.name}: {figures}", file=sys.stderr, flush=True)
    return {
        "files": runs,
        "moto_wall_s": round(totals["dynamodb"], 2),
        "memory_wall_s": round(totals["memory"], 2),
        "ratio": round(totals["dynamodb"] / max(totals["memory"], 1e-3), 2),
        "all_match": all(r[s]["matches_expected"] for r in runs.values() for s in STORES),
    }
