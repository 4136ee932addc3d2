"""Buildkite builds as the REST API's builds listing returns them (tests/fixtures/buildkite/*.json
with the fields a test sets), and a HUD-form replay turned into its Buildkite form."""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.support.paths import TESTS
from trunkwatch.domain.clock import format_time, parse_time

FIXTURES = TESTS / "fixtures" / "buildkite"
PIPELINE = "acme/ci"
WEB = "https://buildkite.com"
API = "https://api.buildkite.com"
_BUILD = json.loads((FIXTURES / "build.json").read_text())
_JOB = json.loads((FIXTURES / "job.json").read_text())


def job_id(*parts: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(str(p) for p in parts)))


def build(
    number: int,
    sha: str,
    created: datetime,
    jobs: Iterable[dict[str, Any]] = (),
    *,
    finished: datetime | None = None,
    state: str | None = None,
    pipeline: str = PIPELINE,
    **changes: Any,
) -> dict[str, Any]:
    """A build of `sha` on main; finished (`passed`/`failed` by its jobs) when `finished`."""
    obj = copy.deepcopy(_BUILD)
    jobs = list(jobs)
    failing = any(
        j["type"] == "script" and not j["retried"] and j["state"] == "failed" and not j["soft_failed"]
        for j in jobs
    )
    obj.update(
        id=job_id(pipeline, "build", number),
        url=f"{API}/v2/organizations/{pipeline.replace('/', '/pipelines/')}/builds/{number}",
        web_url=f"{WEB}/{pipeline}/builds/{number}",
        number=number,
        commit=sha,
        created_at=format_time(created),
        scheduled_at=format_time(created),
        started_at=format_time(created),
        finished_at=format_time(finished) if finished else None,
        state=state or (("failed" if failing else "passed") if finished else "running"),
        jobs=jobs,
    )
    obj.update(changes)
    return obj


def job(
    number: int,
    name: str,
    state: str = "passed",
    *,
    attempt: int = 1,
    pipeline: str = PIPELINE,
    **changes: Any,
) -> dict[str, Any]:
    """A job of build `number`; its id is the same for the same (build, name, attempt)."""
    obj = copy.deepcopy(_JOB)
    identity = job_id(pipeline, number, name, attempt)
    obj.update(
        id=identity,
        name=name,
        state=state,
        web_url=f"{WEB}/{pipeline}/builds/{number}#{identity}",
        exit_status={"passed": 0, "failed": 1}.get(state),
        finished_at=obj["finished_at"] if state in ("passed", "failed", "timed_out", "canceled") else None,
    )
    obj.update(changes)
    return obj


def retried_green(number: int, name: str, **changes: Any) -> list[dict[str, Any]]:
    """A job that failed and passed on its retry: the failed job, `retried` into the pass."""
    return retried(number, name, "passed", **changes)


def retried(number: int, name: str, state: str, **changes: Any) -> list[dict[str, Any]]:
    """A job that failed and ended `state` on its retry: the failed job, `retried` into it."""
    again = job(number, name, state, attempt=2, retries_count=1, **changes)
    failed = job(number, name, "failed", retried=True, retried_in_job_id=again["id"], **changes)
    return [failed, again]


def waiter(number: int) -> dict[str, Any]:
    return {"id": job_id(PIPELINE, number, "wait"), "graphql_id": "", "type": "waiter", "state": "passed"}


# --- HUD form to Buildkite form -------------------------------------------------------------
_HUD_STATES = {
    "success": "passed",
    "failure": "failed",
    "timed_out": "timed_out",
    "cancelled": "canceled",
    "skipped": "skipped",
    "neutral": "not_run",
}


@dataclass
class Converter:
    """Turns one replay's HUD snapshots into builds listings, in order: a commit keeps its
    build number (numbered as they first show, oldest first), and a build keeps the time it
    was first seen finished with the jobs it shows (so `finished_at` moves when they change)."""

    pipeline: str = PIPELINE
    numbers: dict[str, int] = field(default_factory=dict)
    finished: dict[str, datetime] = field(default_factory=dict)

    def builds(self, snapshot: dict[str, Any], at: datetime) -> list[dict[str, Any]]:
        for row in reversed(snapshot["shaGrid"]):
            self.numbers.setdefault(row["sha"], len(self.numbers) + 1)
        return hud_to_builds(snapshot, at, self)


def hud_to_builds(snapshot: dict[str, Any], at: datetime, memory: Converter) -> list[dict[str, Any]]:
    """The builds listing equivalent to a HUD snapshot at `at`: one build per commit, each HUD
    cell a job of the same name, a retried cell (`failedPreviousRun`) a failed job retried into
    its result (a pass: flaky; a failure: a failed retry); a commit with a job still running is
    a running build. A cell's `rerun` (how re-running it would end) is its job's (`{"state",
    "durationS"}`, read by the stand-in's retries)."""
    names, rows = snapshot["jobNames"], snapshot["shaGrid"]
    pipeline, finished = memory.pipeline, memory.finished
    builds = []
    for row in rows:
        sha = row["sha"]
        number = memory.numbers[sha]
        jobs: list[dict[str, Any]] = []
        running = False
        for name, cell in zip(names, row["jobs"], strict=True):
            if not cell:
                continue
            conclusion = cell.get("conclusion")
            fields: dict[str, Any] = {"web_url": cell["htmlUrl"]} if cell.get("htmlUrl") else {}
            if isinstance(cell.get("rerun"), dict):  # how retrying the job would end
                rerun = cell["rerun"]
                state = _HUD_STATES.get(rerun.get("conclusion"), rerun.get("conclusion"))
                took = {"durationS": rerun["durationS"]} if "durationS" in rerun else {}
                fields["rerun"] = {"state": state, **took}
            if cell.get("status") not in (None, "completed") or conclusion in (None, "", "pending"):
                running = True
                jobs.append(job(number, name, "running", pipeline=pipeline, **fields))
            elif cell.get("failedPreviousRun") and conclusion in ("success", "failure", "timed_out"):
                # A retried cell: its failed first attempt, retried into its result.
                jobs += retried(number, name, _HUD_STATES[conclusion], pipeline=pipeline, **fields)
            else:
                jobs.append(
                    job(number, name, _HUD_STATES.get(conclusion, conclusion), pipeline=pipeline, **fields)
                )
        shown = [{k: v for k, v in j.items() if k != "rerun"} for j in jobs]
        # A digest: a red trunk's two weeks of builds, each version kept in full, take gigabytes.
        key = f"{sha}:{hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()}"
        if not running and key not in finished:
            finished[key] = at
        extra: dict[str, Any] = {
            "message": row.get("commitTitle") or "",
            "author": {"username": row.get("author")},
        }
        if isinstance(row.get("prNum"), int):
            extra["pull_request"] = {"id": str(row["prNum"]), "base": "main", "repository": None}
        created = parse_time(row["time"])
        builds.append(
            build(
                number,
                sha,
                created,
                jobs,
                finished=None if running else finished[key],
                pipeline=pipeline,
                **extra,
            )
        )
    return builds


def buildkite_replay(
    lines: Iterable[str], pipeline: str = PIPELINE, numbers: dict[str, int] | None = None
) -> Iterator[str]:
    """A HUD-form replay file's lines in Buildkite form: its header naming the source and
    pipeline, each `hud` event a `buildkite` one (a `hud_status` a `buildkite_status`), every
    other event as it is. `numbers`, when given, gets each commit's build number."""
    converter = Converter(pipeline, {} if numbers is None else numbers)
    numbered = (line for line in lines if line.strip())
    header = json.loads(next(numbered))
    yield json.dumps({**header, "source": "buildkite", "pipeline": pipeline})
    for line in numbered:
        event = json.loads(line)
        if "hud" in event:
            event = {"at": event["at"], "buildkite": converter.builds(event["hud"], parse_time(event["at"]))}
        elif "hud_status" in event:
            event = {"at": event["at"], "buildkite_status": event["hud_status"]}
        yield json.dumps(event)


_FINISHED_JOB = frozenset(
    {"passed", "failed", "timed_out", "canceled", "expired", "broken", "skipped", "not_run"}
)


def buildkite_webhook_replay(lines: Iterable[str], pipeline: str = PIPELINE) -> Iterator[str]:
    """A HUD-form replay file's lines as Buildkite webhook deliveries (no poll): each `hud`
    event's builds (as `buildkite_replay` has them), oldest first, as the `job.finished`
    deliveries of the jobs finished since the last event (each once: a retried job and its
    retry are two jobs) and the `build.finished` of the builds finished since; every other
    event as it is."""
    converter = Converter(pipeline)
    numbered = (line for line in lines if line.strip())
    header = json.loads(next(numbered))
    yield json.dumps({**header, "source": "buildkite", "pipeline": pipeline})
    delivered: set[str] = set()
    org, slug = pipeline.split("/", 1)
    about = {"slug": slug, "url": f"{API}/v2/organizations/{org}/pipelines/{slug}"}
    for line in numbered:
        event = json.loads(line)
        if "hud" not in event:
            yield json.dumps(event)
            continue
        for built in reversed(converter.builds(event["hud"], parse_time(event["at"]))):
            bare = {k: v for k, v in built.items() if k != "jobs"}
            for made in built["jobs"]:
                key = f"{made['id']}:{made['state']}"
                if made["type"] == "script" and made["state"] in _FINISHED_JOB and key not in delivered:
                    delivered.add(key)
                    job_payload = {k: v for k, v in made.items() if k != "rerun"}
                    payload = {"event": "job.finished", "job": job_payload, "build": bare, "pipeline": about}
                    yield json.dumps(
                        {
                            "at": event["at"],
                            "buildkite_webhook": {"event": "job.finished", "payload": payload},
                        }
                    )
            key = f"{built['id']}:{built['finished_at']}"
            if built["finished_at"] and key not in delivered:
                delivered.add(key)
                payload = {"event": "build.finished", "build": bare, "pipeline": about}
                yield json.dumps(
                    {"at": event["at"], "buildkite_webhook": {"event": "build.finished", "payload": payload}}
                )
