"""A GitHub REST API stand-in on 127.0.0.1 for rerun requests (`confirm: rerun`):
`POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun` answers as GitHub does (201 with an
empty body; 404 `Not Found` for a job the HUD stand-in does not show, or one not finished
yet; 403 when scripted to refuse) and hands the rerun to the HUD stand-in, which shows it
as the job's newest attempt once it is over."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime

from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.stand_in import Answer, StandInServer

JSON = {"Content-Type": "application/json; charset=utf-8"}
DOCS = "https://docs.github.com/rest/actions/workflow-jobs#re-run-a-job-from-a-workflow-run"
_RERUN = re.compile(r"^/repos/([^/]+)/([^/]+)/actions/jobs/(\d+)/rerun$")


@dataclass(frozen=True)
class AcceptedRerun:
    at: datetime  # on the HUD stand-in's clock
    job_id: int
    sha: str
    job: str  # the HUD's job name (column)


class GitHubServer(StandInServer):
    def __init__(self, hud: HudServer, repo: str = "") -> None:
        self.hud = hud
        self.repo = repo  # the replay's repository: another one's jobs are not found
        self.accepted: list[AcceptedRerun] = []  # in order
        self.refusals = 0  # the next requests answered 403, as without `actions: write`
        super().__init__()

    def answer(self, path: str, if_none_match: str | None) -> Answer:
        return _error(404, "Not Found")

    def receive(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        found = _RERUN.match(path.split("?", 1)[0])
        if method != "POST" or found is None:
            return _error(404, "Not Found")
        if self.repo and f"{found.group(1)}/{found.group(2)}" != self.repo:
            return _error(404, "Not Found")
        if self.refusals:
            self.refusals -= 1
            return _error(403, "Resource not accessible by integration")
        job_id = int(found.group(3))
        rerun = self.hud.rerun(job_id)
        if rerun is None:
            return _error(404, "Not Found")
        assert self.hud.clock is not None
        self.accepted.append(AcceptedRerun(self.hud.clock(), job_id, *rerun))
        return 201, {}, b""

    def refuse(self, count: int) -> None:
        """Answer the next `count` rerun requests 403 (a token without `actions: write`)."""
        self.refusals = count


def _error(status: int, message: str) -> Answer:
    body = {"message": message, "documentation_url": DOCS, "status": str(status)}
    return status, JSON, json.dumps(body).encode()
