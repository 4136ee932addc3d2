"""A HUD API stand-in on 127.0.0.1: the snapshot it was last given, with the reruns the GitHub
stand-in accepted shown as their job's newest attempt once over.

A replay's cell may say how a rerun of it ends (`"rerun": {"conclusion", "durationS"}`, never
served; without it, as the cell ended): requested at t, it shows from t + durationS on."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from trunkwatch_local.stand_in import JSON, Answer, Request, StandInServer, json_answer

DEFAULT_RERUN = timedelta(hours=1)  # a rerun of a cell that says nothing about its duration
ATTEMPT_ID_STEP = 10**13  # a newer attempt's job id: above every id of the replay's cells


@dataclass(frozen=True)
class ScheduledRerun:
    due: datetime
    cell: dict[str, Any]  # the attempt it shows from `due` on, as served


class HudServer(StandInServer):
    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.snapshot: Any = {"jobNames": [], "shaGrid": []}
        self.body = b'{"jobNames": [], "shaGrid": []}'
        self.status = 200  # a scripted outage answers another status with an error body
        self.requests = 0
        self.clock = clock
        self.reruns: dict[tuple[str, str], ScheduledRerun] = {}  # (sha, job name) -> rerun
        super().__init__()

    def handle(self, request: Request) -> Answer:
        self.requests += 1
        if request.method != "GET" or not request.path.startswith("/api/hud/"):
            return json_answer(404, {"error": "not found"})
        if self.status != 200:
            return json_answer(self.status, {"error": f"scripted status {self.status}"})
        if self.reruns:
            return json_answer(200, self.served())
        return 200, JSON, self.body

    def serve(self, snapshot: Any) -> None:
        self.snapshot = snapshot
        self.body = json.dumps(self.served(reruns=False)).encode()
        self.status = 200

    def fail_with(self, status: int) -> None:
        """Answer `status` until the next `serve` (the snapshot is kept for then)."""
        self.status = status

    def served(self, reruns: bool = True) -> Any:
        """The snapshot as the HUD API shows it now: no `rerun` keys; the reruns that are over
        as their job's newest attempt."""
        snapshot = self.snapshot
        if not isinstance(snapshot, dict) or not isinstance(snapshot.get("shaGrid"), list):
            return snapshot
        names = snapshot.get("jobNames") or []
        now = self.clock() if self.clock and reruns else None
        rows = []
        for row in snapshot["shaGrid"]:
            if not isinstance(row, dict) or not isinstance(row.get("jobs"), list):
                rows.append(row)
                continue
            jobs = []
            for name, cell in zip(names, row["jobs"], strict=False):
                rerun = self.reruns.get((str(row.get("sha")), name)) if now else None
                if rerun is not None and now is not None and now >= rerun.due:
                    jobs.append(rerun.cell)
                elif isinstance(cell, dict) and "rerun" in cell:
                    jobs.append({key: value for key, value in cell.items() if key != "rerun"})
                else:
                    jobs.append(cell)
            rows.append({**row, "jobs": jobs})
        return {**snapshot, "shaGrid": rows}

    def rerun(self, job_id: int) -> tuple[str, str] | None:
        """Schedule a rerun of the job attempt `job_id` as the snapshot shows it now; returns
        its commit's sha and job name (None: no such job, or it has not finished)."""
        assert self.clock is not None, "reruns need the runtime's clock"
        found = self._find(job_id)
        if found is None:
            return None
        sha, name, cell = found
        if cell.get("status") not in (None, "completed") or cell.get("conclusion") in (None, "", "pending"):
            return None
        given = cell.get("rerun")
        outcome: dict[str, Any] = given if isinstance(given, dict) else {}
        conclusion = str(outcome.get("conclusion") or cell.get("conclusion"))
        seconds = outcome.get("durationS") or cell.get("durationS")
        took = timedelta(seconds=float(seconds)) if isinstance(seconds, int | float) else DEFAULT_RERUN
        attempt = {key: value for key, value in cell.items() if key not in ("rerun", "failedPreviousRun")}
        attempt.update(id=job_id + ATTEMPT_ID_STEP, conclusion=conclusion, status="completed")
        if conclusion == "success":
            attempt.pop("failureLines", None)
            attempt.pop("failureCaptures", None)
        if cell.get("conclusion") != "success" or cell.get("failedPreviousRun"):
            attempt["failedPreviousRun"] = True  # an earlier attempt failed
        self.reruns[(sha, name)] = ScheduledRerun(self.clock() + took, attempt)
        return sha, name

    def _find(self, job_id: int) -> tuple[str, str, dict[str, Any]] | None:
        """The cell of attempt `job_id` in what is served now, with the original's `rerun`."""
        served = self.served()
        if not isinstance(served, dict):
            return None
        names = served.get("jobNames") or []
        originals = {str(row.get("sha")): row.get("jobs") for row in self.snapshot.get("shaGrid") or []}
        for row in served.get("shaGrid") or []:
            for column, (name, cell) in enumerate(zip(names, row.get("jobs") or [], strict=False)):
                if isinstance(cell, dict) and cell.get("id") == job_id:
                    sha = str(row.get("sha"))
                    original = (originals.get(sha) or [])[column]
                    rerun = original.get("rerun") if isinstance(original, dict) else None
                    return sha, name, {**cell, **({"rerun": rerun} if rerun else {})}
        return None
