"""Replay files (design.md §6): a header line, then HUD snapshots (or Buildkite builds
listings), webhook deliveries, silences, acknowledgements and ticks in time order.

A file may be gzipped (`.jsonl.gz`, weeks of a real trunk). A file's events are checked in
full when it is read, then read again from the file as they are replayed, so a long history
is never all in memory at once."""

from __future__ import annotations

import gzip
import itertools
import json
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from trunkwatch import sources
from trunkwatch.channels import RECEIVER_TYPES
from trunkwatch.domain.clock import parse_time
from trunkwatch.domain.config import ConfigError, Deployment, load_deployment
from trunkwatch.sources.base import SourceError
from trunkwatch.sources.buildkite import parse_builds
from trunkwatch.sources.buildkite_webhook import EVENTS as BUILDKITE_EVENTS
from trunkwatch.sources.hud import parse_grid

EVENT_KINDS = (
    "hud",
    "hud_status",
    "buildkite",
    "buildkite_status",
    "silence",
    "expire",
    "ack",
    "tick",
    "webhook",
    "buildkite_webhook",
)
ACK_KEYS = ("matchers", "createdBy", "comment")
# The events a file's source reads (`source` in its header); the others are every file's.
SOURCE_EVENTS = {
    "hud": ("hud", "hud_status"),
    "buildkite": ("buildkite", "buildkite_status", "buildkite_webhook"),
}
WEBHOOK_EVENTS = ("push", "workflow_run", "workflow_job")
POLLED = frozenset({"hud", "hud_status", "buildkite", "buildkite_status"})  # each is a poll
# The events each kind of webhook delivery may carry.
DELIVERY_EVENTS = {"webhook": WEBHOOK_EVENTS, "buildkite_webhook": tuple(sorted(BUILDKITE_EVENTS))}
DELIVERIES = frozenset(DELIVERY_EVENTS)
# The listings a source reads, checked as it reads them, and what each is.
PARSED: dict[str, tuple[Callable[[Any], object], str]] = {
    "hud": (parse_grid, "HUD API response"),
    "buildkite": (parse_builds, "builds listing"),
}


class ReplayError(ConfigError):
    """A replay file that cannot be run, with the line that is wrong."""


@dataclass(frozen=True)
class ReplayEvent:
    line: int
    at: datetime
    kind: str
    payload: Any
    ref: str | None = None


@dataclass
class Replay:
    repo: str
    branch: str
    config: dict[str, Any]
    # A list, or a file's events read again on each pass (`read_replay`).
    events: Iterable[ReplayEvent] = field(default_factory=list)
    # The configuration's `receivers` (Slack, GitHub issues), e.g. stand-ins on 127.0.0.1.
    receivers: list[Any] = field(default_factory=list)
    # Where the file's snapshots come from: the HUD, or a Buildkite `pipeline`'s builds.
    source: str = "hud"
    pipeline: str | None = None

    def deployment(
        self, hud_url: str, github_url: str | None = None, buildkite_url: str | None = None
    ) -> Deployment:
        """The deployment that replays this file from the HUD stand-in at `hud_url` (or, for a
        Buildkite file, the Buildkite stand-in at `buildkite_url`); with `confirm: rerun` in
        its `config`, reruns are requested from `github_url`'s stand-in."""
        trunk: dict[str, Any] = {
            "repo": self.repo,
            "branch": self.branch,
            "source": self.source,
            "url": hud_url,
            "config": self.config,
        }
        if self.source == "buildkite":
            trunk.update(pipeline=self.pipeline, url=buildkite_url or hud_url)
        if github_url and self.config.get("confirm") == "rerun":
            trunk["github_api_url"] = github_url
        kinds = {event.kind for event in self.events}
        if kinds & DELIVERIES:
            # Fed by the file's deliveries; polled only where the file has HUD snapshots
            # (each is a poll), never otherwise: an idle poll is not a source outage.
            trunk.update(webhook=True, poll_every="1s" if kinds & POLLED else "0")
        return load_deployment(
            {"trunks": [trunk], "receivers": self.receivers}, RECEIVER_TYPES, sources=sources.REGISTRY
        )


GZIP_MAGIC = b"\x1f\x8b"


def read_replay(path: str | Path) -> Replay:
    """The replay in `path` (JSON Lines, gzipped or not), every line checked now."""
    replay = _replay(_FileLines(Path(path)), str(path))
    for _ in replay.events:  # every event checked now, before anything runs
        pass
    return replay


def parse_replay(lines: Iterable[str], name: str = "replay") -> Replay:
    replay = _replay(list(lines), name)
    replay.events = list(replay.events)
    return replay


def _replay(lines: Iterable[str], name: str) -> Replay:
    """The replay of `lines` (read afresh on each pass of its events)."""
    header = next(_numbered(lines), None)
    if header is None:
        raise ReplayError(f"{name}: empty file (expected a header line with repo and branch)")
    replay = _header(header, name)
    replay.events = _Events(lines, name, replay.source)
    return replay


@dataclass(frozen=True)
class _FileLines:
    """The lines of a replay file, read afresh on each pass."""

    path: Path

    def __iter__(self) -> Iterator[str]:
        try:
            with self.path.open("rb") as raw:
                zipped = raw.read(2) == GZIP_MAGIC
            with gzip.open(self.path, "rt") if zipped else self.path.open() as text:
                yield from text
        except OSError as err:
            if isinstance(err, gzip.BadGzipFile) or not err.strerror:
                raise ReplayError(f"cannot read replay file {self.path}: corrupt gzip data ({err})") from None
            raise ReplayError(f"cannot read replay file {self.path}: {err.strerror}") from None
        except (EOFError, zlib.error) as err:
            raise ReplayError(
                f"cannot read replay file {self.path}: corrupt gzip data ({err or 'truncated'})"
            ) from None
        except UnicodeDecodeError as err:
            raise ReplayError(f"cannot read replay file {self.path}: not UTF-8 text ({err})") from None


@dataclass(frozen=True)
class _Events:
    lines: Iterable[str]
    name: str
    source: str

    def __iter__(self) -> Iterator[ReplayEvent]:
        return _events(itertools.islice(_numbered(self.lines), 1, None), self.name, self.source)


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    return ((n, line) for n, line in enumerate(lines, start=1) if line.strip())


def _header(first: tuple[int, str], name: str) -> Replay:
    header = _object(first, name)
    unknown = set(header) - {"repo", "branch", "config", "receivers", "source", "pipeline"}
    if unknown:
        raise ReplayError(f"{name}:{first[0]}: unknown header key(s) {sorted(unknown)}")
    if not isinstance(header.get("repo"), str) or not isinstance(header.get("branch", "main"), str):
        raise ReplayError(f"{name}:{first[0]}: header needs string 'repo' (and optional 'branch')")
    config = header.get("config") or {}
    if not isinstance(config, dict):
        raise ReplayError(f"{name}:{first[0]}: header 'config' must be an object")
    receivers = header.get("receivers") or []
    if not isinstance(receivers, list):
        raise ReplayError(f"{name}:{first[0]}: header 'receivers' must be a list")
    source = header.get("source", "hud")
    if source not in SOURCE_EVENTS:
        raise ReplayError(f"{name}:{first[0]}: header 'source' must be one of {', '.join(SOURCE_EVENTS)}")
    pipeline = header.get("pipeline")
    if pipeline is not None and not isinstance(pipeline, str):
        raise ReplayError(f"{name}:{first[0]}: header 'pipeline' must be a string (org/slug)")
    replay = Replay(
        header["repo"],
        header.get("branch", "main"),
        config,
        receivers=receivers,
        source=source,
        pipeline=pipeline,
    )
    try:
        replay.deployment("http://127.0.0.1")
    except ConfigError as err:
        raise ReplayError(f"{name}:{first[0]}: {err}") from None
    return replay


def _object(numbered: tuple[int, str], name: str) -> dict[str, Any]:
    number, line = numbered
    try:
        value = json.loads(line)
    except ValueError as err:
        raise ReplayError(f"{name}:{number}: not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise ReplayError(f"{name}:{number}: expected a JSON object")
    return value


def _events(numbered: Iterable[tuple[int, str]], name: str, source: str) -> Iterator[ReplayEvent]:
    previous: datetime | None = None
    for number, line in numbered:
        event = _object((number, line), name)
        kinds = [k for k in EVENT_KINDS if k in event]
        extra = set(event) - {"at", "ref", *EVENT_KINDS}
        if len(kinds) != 1 or extra:
            raise ReplayError(
                f"{name}:{number}: an event needs 'at' and exactly one of {', '.join(EVENT_KINDS)}"
                + (f" (unknown keys {sorted(extra)})" if extra else "")
            )
        try:
            at = parse_time(str(event.get("at")))
        except ValueError:
            raise ReplayError(
                f"{name}:{number}: 'at' must be an RFC 3339 time, got {event.get('at')!r}"
            ) from None
        if previous and at < previous:
            raise ReplayError(
                f"{name}:{number}: events must be in time order ({event['at']} is before the previous event)"
            )
        previous = at
        kind = kinds[0]
        payload = event[kind]
        foreign = [other for other, read in SOURCE_EVENTS.items() if kind in read and other != source]
        if foreign:
            raise ReplayError(
                f'{name}:{number}: a {kind!r} event needs "source": "{foreign[0]}" in the header'
                f" (this file's source is {source!r})"
            )
        if kind in PARSED:
            parse, what = PARSED[kind]
            try:  # as the source reads it: a listing it would refuse is the file's error
                parse(payload)
            except SourceError as err:
                raise ReplayError(f"{name}:{number}: {kind!r} is not a valid {what}: {err}") from None
        if kind == "silence" and not isinstance(payload, dict):
            raise ReplayError(f"{name}:{number}: 'silence' must be a postable silence object")
        if kind == "ack" and (
            not isinstance(payload, dict)
            or not isinstance(payload.get("matchers"), list)
            or not payload["matchers"]
            or set(payload) - set(ACK_KEYS)
        ):
            shape = '{"matchers": [<as in a silence>], "createdBy": "...", "comment": "..."}'
            raise ReplayError(f"{name}:{number}: 'ack' must be {shape}")
        if kind == "expire" and not isinstance(payload, str):
            raise ReplayError(f"{name}:{number}: 'expire' must name a silence 'ref'")
        if kind in ("hud_status", "buildkite_status") and (
            isinstance(payload, bool) or not isinstance(payload, int) or not 100 <= payload <= 599
        ):
            raise ReplayError(f"{name}:{number}: {kind!r} must be an HTTP status code (100-599)")
        if kind in DELIVERIES and (
            not isinstance(payload, dict)
            or payload.get("event") not in DELIVERY_EVENTS[kind]
            or not isinstance(payload.get("payload"), dict)
            or set(payload) - {"event", "payload"}
        ):
            shape = '{"event": ' + " | ".join(DELIVERY_EVENTS[kind]) + ', "payload": {...}}'
            raise ReplayError(f"{name}:{number}: {kind!r} must be {shape}")
        if kind == "tick" and payload is not True:
            raise ReplayError(f"{name}:{number}: 'tick' must be true")
        ref = event.get("ref")
        if ref is not None and (kind != "silence" or not isinstance(ref, str)):
            raise ReplayError(f"{name}:{number}: 'ref' names a silence event and must be a string")
        yield ReplayEvent(number, at, kind, payload, ref)
