"""Peak memory of a piece of work, from the process's resident-set high-water mark (Linux).

Before the work, memory already freed is handed back to the system (gc, glibc's
malloc_trim) and the high-water mark is reset (`/proc/self/clear_refs`); the figure is how
far the mark rose above the resident set at the start. It costs nothing while the work
runs (tracemalloc would slow it several times), so it is taken in the same run as the wall
time. It counts everything in the process: in the benchmarks that includes moto's copy of
the items written (most of what is still resident afterwards, `retained_mb`) and the
stand-in servers' threads. Memory freed by earlier work in the same process may be reused
without raising the mark, so each workload that reports it runs in a fresh process.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_RESET_PEAK = "5"  # clear_refs: reset the peak resident set size


@dataclass
class Peak:
    mb: float = 0.0  # how far the resident set's high-water mark rose
    retained_mb: float = 0.0  # how much of that was still resident at the end


def status_kb(field: str) -> int:
    """A figure of /proc/self/status, in kB (`VmRSS`, `VmHWM`)."""
    match = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{_STATUS} has no {field} (peak memory needs Linux /proc)")
    return int(match[1])


def _release_freed_memory() -> None:
    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc:
        trim = getattr(ctypes.CDLL(libc), "malloc_trim", None)
        if trim is not None:
            trim(0)


@contextlib.contextmanager
def peak_growth() -> Iterator[Peak]:
    """Yields a Peak whose figures are set when the block ends."""
    _release_freed_memory()
    _CLEAR_REFS.write_text(_RESET_PEAK)
    start = status_kb("VmRSS")
    peak = Peak()
    try:
        yield peak
    finally:
        peak.mb = round(max(0, status_kb("VmHWM") - start) / 1024, 2)
        _release_freed_memory()
        peak.retained_mb = round(max(0, status_kb("VmRSS") - start) / 1024, 2)
