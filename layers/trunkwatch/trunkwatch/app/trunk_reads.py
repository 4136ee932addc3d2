"""What the evaluator, the sweep and the fixed-breakage finder read once per trunk and
invocation: its state and the job alerts they needed."""

from __future__ import annotations

from dataclasses import dataclass, field

from trunkwatch.domain.job_alerts import JobAlert
from trunkwatch.domain.trunk_state import TrunkState
from trunkwatch.storage.port import Storage


@dataclass
class TrunkReads:
    """What one invocation reads once per trunk instead of once per cell: the trunk's state
    (recent commits, failing jobs) and the alerts it needed."""

    storage: Storage
    trunk: str
    _state: TrunkState | None = None
    _alerts: dict[str, JobAlert | None] = field(default_factory=dict)

    @property
    def state(self) -> TrunkState:
        if self._state is None:
            self._state = self.storage.trunks.state(self.trunk, consistent=True)
        return self._state

    @property
    def recent_seqs(self) -> list[int]:
        return self.state.recent_seqs

    def failing(self, job: str) -> bool:
        return job in self.state.failing

    def alert(self, job: str) -> JobAlert | None:
        if job not in self._alerts:
            self._alerts[job] = self.storage.alerts.job_alert(self.trunk, job)
        return self._alerts[job]

    def remember(self, alert: JobAlert) -> None:
        self._alerts[alert.job] = alert
        (self.state.failing.add if alert.status == "firing" else self.state.failing.discard)(alert.job)

    def forget(self) -> None:
        """After a lost race: read again."""
        self._state = None
        self._alerts.clear()
