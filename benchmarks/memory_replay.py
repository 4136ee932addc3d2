"""`trunkwatch replay` on the in-memory store (the default) against `--store dynamodb` (moto's
table, unpatched): the repository's scenarios and its real-history cut, each replayed both
ways in this process, timed, and checked against its expected messages.

The ratio is of wall times (moto replay / memory replay), summed over the files; each file's
own times and message counts are reported too."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FILES = [
    *sorted(p for p in (ROOT / "tests" / "scenarios").glob("*.jsonl") if ".expected." not in p.name),
    *sorted((ROOT / "tests" / "real-history").glob("*.jsonl.gz")),
]
KEY = ("at", "status", "alertname", "job", "priority", "team", "day")


def _expected(path: Path) -> Counter[tuple[Any, ...]]:
    import json

    expected = path.with_name(path.name.split(".jsonl")[0] + ".expected.jsonl")
    rows = [json.loads(line) for line in expected.read_text().splitlines() if line.strip()]
    return Counter(tuple(row.get(key) for key in KEY) for row in rows)


def _row(published: Any) -> tuple[Any, ...]:
    from trunkwatch_local.runtime import summary_row

    row = summary_row(published.as_json())
    return tuple(row.get(key) for key in KEY)


def _replay(path: Path, store: str) -> tuple[float, Counter[tuple[Any, ...]]]:
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.session import run_replay

    started = time.perf_counter()
    rows = Counter(_row(published) for published in run_replay(read_replay(path), store=store))
    return time.perf_counter() - started, rows


def memory_replay(files: list[Path] | None = None) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    totals = {"dynamodb": 0.0, "memory": 0.0}
    for path in files or FILES:
        expected = _expected(path)
        figures: dict[str, Any] = {"expected": sum(expected.values())}
        for store in ("dynamodb", "memory"):
            seconds, rows = _replay(path, store)
            totals[store] += seconds
            figures[store] = {
                "wall_s": round(seconds, 2),
                "messages": sum(rows.values()),
                "matches_expected": rows == expected,
            }
        figures["ratio"] = round(figures["dynamodb"]["wall_s"] / max(figures["memory"]["wall_s"], 1e-3), 2)
        runs[path.name] = figures
        print(
            f"[memory_replay] {path.name}: {figures['expected']} expected; "
            f"moto {figures['dynamodb']['wall_s']}s ({figures['dynamodb']['messages']} messages), "
            f"memory {figures['memory']['wall_s']}s ({figures['memory']['messages']} messages); "
            f"ratio {figures['ratio']}",
            file=sys.stderr,
            flush=True,
        )
    ratio = round(totals["dynamodb"] / max(totals["memory"], 1e-3), 2)
    print(
        f"[memory_replay] {len(runs)} files: moto {totals['dynamodb']:.1f}s, memory "
        f"{totals['memory']:.1f}s; ratio {ratio}; every file as expected both ways: "
        f"{all(r[s]['matches_expected'] for r in runs.values() for s in ('dynamodb', 'memory'))}",
        file=sys.stderr,
        flush=True,
    )
    return {
        "files": runs,
        "moto_wall_s": round(totals["dynamodb"], 2),
        "memory_wall_s": round(totals["memory"], 2),
        "ratio": ratio,
        "all_match": all(r[s]["matches_expected"] for r in runs.values() for s in ("dynamodb", "memory")),
    }
