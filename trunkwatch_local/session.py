"""Running replays and polls on the local runtime, with the API served on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from trunkwatch.app.confirm import OPEN_FOR, waits_for_request
from trunkwatch.domain.config import ConfigError, Deployment
from trunkwatch.domain.reruns import RerunRecord
from trunkwatch.storage.port import Reruns
from trunkwatch_local.apigw import serve_api
from trunkwatch_local.buildkite_server import BuildkiteServer
from trunkwatch_local.chaos import Chaos
from trunkwatch_local.github_server import GitHubServer
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.replay import DELIVERIES, POLLED, Replay, ReplayError, ReplayEvent
from trunkwatch_local.runtime import DIED_ANSWER, LocalRuntime, Published


class Session:
    """A local runtime (`runtime`, a fresh default one unless given) plus the HUD, GitHub and
    Buildkite stand-ins and the API server, started together."""

    def __init__(
        self, runtime: LocalRuntime | None = None, port: int = 0, tokens: dict[str, Any] | None = None
    ) -> None:
        self.runtime = runtime or LocalRuntime()
        self.hud = HudServer(clock=self.runtime.clock.now)
        self.github = GitHubServer(hud=self.hud)
        self.buildkite = BuildkiteServer(clock=self.runtime.clock.now)
        self.port = port
        self.tokens = tokens
        self.api: Any = None
        # The API answers on the real clock, but at the replayed time while a replay runs
        # (its silence events) and on the scenario's clock after it (`keep_clock`).
        self.replaying = False
        self.clock_offset = timedelta(0)
        # What the replay's own API calls present to a tokens document: random, never printed.
        self._internal_token = secrets.token_urlsafe(32)
        # The trunks that confirm culprits by reruns (`confirm: rerun`), once started.
        self.confirming: tuple[str, ...] = ()
        self._reruns: Reruns | None = None

    def start(self, deployment: Deployment) -> Session:
        # The API's port first: the notifier's environment names the API's URL.
        try:
            self.api = serve_api(
                lambda event, context: self._api(event),
                port=self.port,
                tokens=self.tokens,
                internal_token=self._internal_token,
                webhook=self.runtime.receive,
            )
        except OSError as err:
            raise ConfigError(
                f"cannot serve on 127.0.0.1 port {self.port}: {err.strerror or err}"
                " (another server, Alertmanager say, may hold it: choose another with --port, 0 for any)"
            ) from None
        self.runtime.start(deployment, api_url=self.api_url)
        rules = deployment.rules
        self.confirming = tuple(t.trunk_id for t in deployment.trunks if rules[t.trunk_id].confirms)
        if self.confirming:
            self._reruns = self.runtime.stack.storage().reruns
        return self

    def rerun_polls(self, before: datetime | None) -> Iterator[datetime]:
        """The schedule's polls before `before` (None: no end) while reruns are planned or
        running (`next_rerun_poll`), each yielded after it ran."""
        if not self.confirming or self._reruns is None:
            return
        while True:
            now = self.runtime.clock.now()
            records = [
                record
                for trunk_id in self.confirming
                for record in self._reruns.open(trunk_id, now - OPEN_FOR, now + timedelta(seconds=1))
            ]
            due = [rerun.due for rerun in self.hud.reruns.values()] + self.buildkite.retries_due()
            at = next_rerun_poll(now, self.runtime.poll_period, records, due)
            if at is None or (before is not None and at >= before):
                return
            self.runtime.tick(at)
            yield at

    def replaying_from(self, replay: Replay) -> Deployment:
        """The deployment that replays `replay` from this session's stand-ins."""
        self.github.repo = replay.repo
        if replay.pipeline:
            self.buildkite.pipeline = replay.pipeline
        return replay.deployment(self.hud.url, self.github.url, self.buildkite.url)

    def now(self) -> datetime:
        """The time the session serves at when no replay sets it: the real clock, moved by
        `keep_clock`."""
        return datetime.now(UTC) + self.clock_offset

    def keep_clock(self) -> None:
        """Go on from the replayed time: a scenario that ended days ago is served as if it
        had just ended, its clock running on from there (not today's date)."""
        self.clock_offset = self.runtime.clock.now() - datetime.now(UTC)

    def _api(self, event: dict[str, Any]) -> Any:
        with self.runtime.lock:
            if not self.replaying:
                self.runtime.clock.set(self.now())
            return self.runtime.invoke("api", event)

    @property
    def api_url(self) -> str:
        return str(self.api.url)

    def stop(self) -> None:
        for part in (self.api, self.hud, self.github, self.buildkite, self.runtime):
            if part is not None:
                part.stop()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_tick(self, now: datetime) -> list[Published]:
        """One tick of `trunkwatch serve`'s loop: the schedule at `now`, then its messages."""
        self.runtime.tick(now)
        return self.runtime.published(now)

    def call_api(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the local API on 127.0.0.1
            f"{self.api_url}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._internal_token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")
            raise ReplayError(f"API {method} {path} answered {err.code}: {detail}") from None
        return json.loads(raw) if raw else None


def next_rerun_poll(
    now: datetime, period: timedelta, records: Iterable[RerunRecord], due: Iterable[datetime]
) -> datetime | None:
    """When the schedule, ticking every `period` from `now`, next polls for a rerun (`confirm:
    rerun`): one period on while one of `records` waits to be requested, else the first tick
    at or after the earliest of `due` (reruns running) later than `now`; None for neither.

    A replay polls only at its snapshots (every 30 minutes, say), which would delay a planned
    rerun and its result by up to a snapshot interval each; deployed, the schedule polls every
    minute. With no rerun planned or running, a replay runs exactly at its events."""
    if any(waits_for_request(record, now) for record in records):
        return now + period
    later = [at for at in due if at > now]
    if not later:
        return None
    ticks = -(-(min(later) - now) // period)  # whole periods, rounded up
    return now + ticks * period


def run_replay(
    replay: Replay,
    template: Path | None = None,
    chaos: Chaos | None = None,
    store: str = "memory",
    extra_ticks: Iterable[datetime] = (),
) -> Iterator[Published]:
    """Run every event of `replay` on a fresh local pipeline (its items in the in-memory
    store, or with `store="dynamodb"` in moto's table; with schedule ticks at `extra_ticks`
    too); yield each SNS message."""
    session = Session(LocalRuntime(template, chaos=chaos, store=store, extra_ticks=extra_ticks))
    try:
        session.start(session.replaying_from(replay))
        yield from replay_into(session, replay)
    finally:
        session.stop()


def replay_into(session: Session, replay: Replay) -> Iterator[Published]:
    """Run every event of `replay` on a started session, each at its own time."""
    for _, published in replay_steps(session, replay):
        yield from published


def replay_steps(session: Session, replay: Replay) -> Iterator[tuple[ReplayEvent, list[Published]]]:
    """Run `replay`'s events one at a time: each with the messages it published. The
    deliveries of one instant arrive together, then their group settles."""
    refs: dict[str, str] = {}
    runtime = session.runtime
    events = iter(replay.events)
    event = next(events, None)
    session.replaying = True
    try:
        while event is not None:
            following = next(events, None)
            until = following.at if following else None
            runtime.clock.set(event.at)
            try:
                _apply(session, event.kind, event.payload, event.ref, refs, event.at)
            except ReplayError as err:
                raise ReplayError(f"line {event.line}: {err}") from None
            if event.kind in DELIVERIES and (
                following is None or following.kind not in DELIVERIES or following.at != event.at
            ):
                runtime.settle_deliveries(event.at)
            yield event, runtime.published(event.at)
            ticks = itertools.chain(runtime.ticks_between(event.at, until), session.rerun_polls(until))
            if following is None:
                ticks = itertools.chain(ticks, runtime.delivery_ticks())
            for at in ticks:
                yield event, runtime.published(at)
            event = following
    finally:
        session.replaying = False


def _apply(
    session: Session, kind: str, payload: Any, ref: str | None, refs: dict[str, str], at: datetime
) -> None:
    if kind in POLLED:  # a snapshot or a status for the source's stand-in, then a poll
        source = session.hud if kind.startswith("hud") else session.buildkite
        (source.fail_with if kind.endswith("_status") else source.serve)(payload)
        session.runtime.tick(at)
        if kind.endswith("_status"):
            source.fail_with(200)  # only this poll: later ticks get the last snapshot again
    elif kind == "tick":
        session.runtime.tick(at)
    elif kind in DELIVERIES:
        body = json.dumps(payload["payload"]).encode()
        deliver = session.runtime.deliver if kind == "webhook" else session.runtime.deliver_buildkite
        answer = deliver(payload["event"], body, at)
        if session.runtime.chaos is not None and answer == DIED_ANSWER:
            return  # GitHub does not redeliver: the trunk's backstop poll finds what it brought
        if int(answer["statusCode"]) >= 300:
            raise ReplayError(f"the webhook endpoint answered {answer['statusCode']}: {answer.get('body')}")
    elif kind == "silence":
        created = session.call_api("POST", "/api/v2/silences", payload)
        if ref:
            refs[ref] = created["silenceID"]
    elif kind == "ack":
        session.call_api("POST", "/api/v2/acks", payload)
    elif kind == "expire":
        if payload not in refs:
            raise ReplayError(
                f"'expire' names silence ref {payload!r}, which no earlier silence event defined"
            )
        session.call_api("DELETE", f"/api/v2/silence/{refs[payload]}")
    else:
        raise ConfigError(f"unknown event kind {kind!r}")
