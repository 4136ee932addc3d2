"""The configuration document (design.md §7): rule settings, the trunks to watch, receivers.

Validated once at load; any unknown key, bad regex, bad duration or missing field is an
error that names the key. Plain frozen dataclasses with explicit checks: this module is on
every function's import path, so it costs no validation library at cold start.
Constructing a class directly (`RuleConfig(failures_to_open=2)`) validates the same way.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_REPO = re.compile(r"^[\w.-]+/[\w.-]+$")
_PIPELINE = re.compile(r"^[\w-]+/[\w-]+$")  # a Buildkite pipeline: <organization slug>/<pipeline slug>
_SCHEDULE = re.compile(r"^(rate|cron)\(.+\)$")


class ConfigError(ValueError):
    """A configuration problem, worded for the person who wrote the file."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a document: its dotted key path ("" for the document itself), what
    is wrong, and the line it is on when the document came from a file."""

    key: str
    message: str
    line: int | None = None

    def describe(self, name: str | None = None) -> str:
        where = f"{name}:{self.line}: " if name and self.line else f"{name}: " if name else ""
        return f"{where}{self.key + ': ' if self.key else ''}{self.message}"


class DocumentError(ConfigError):
    """Every problem of one document, each on a line of its own (`lines`); `name` is the file."""

    def __init__(self, problems: list[Problem], name: str | None = None) -> None:
        self.problems = problems
        self.name = name
        super().__init__("; ".join(self.lines()))

    def lines(self) -> list[str]:
        return [problem.describe(self.name) for problem in self.problems]


class _Invalid(ConfigError):
    """Problems as (dotted key, message) pairs; the caller prefixes where they are."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{key or '(document)'}: {message}" for key, message in problems))


def unknown_key(key: object, valid: Collection[str]) -> str:
    """What to say of an unknown key: the valid keys, and the nearest one when it looks like a
    typo of it."""
    close = difflib.get_close_matches(str(key), list(valid), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key ({hint}valid keys: {', '.join(valid)})"


def parse_duration(value: Any) -> timedelta:
    """Go-style durations: `90s`, `15m`, `4h`, `1h30m`, `0`."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected a duration like '4h' or '15m', got {value!r}")
    text = str(value).strip()
    if text == "0":
        return timedelta(0)
    parts = _DURATION.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {value!r} (use Go style, e.g. 90s, 15m, 4h, 1h30m)")
    return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in parts))


# Field checks: each takes the raw value and returns the stored one or raises ValueError
# (or _Invalid, for nested objects, whose keys are then prefixed with the field's name).
Check = Callable[[Any], Any]


def _regex(value: Any) -> str:
    value = _string(value)
    try:
        re.compile(value)
    except re.error as err:
        raise ValueError(f"invalid regex {value!r}: {err}") from None
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("Input should be a valid string")
    return value


def _nonempty(value: Any) -> str:
    if not _string(value):
        raise ValueError("String should have at least 1 character")
    return value


def _duration_or_seconds(value: Any) -> timedelta:
    """A Go-style duration, or seconds as a number (how `to_dict` writes durations back)."""
    if isinstance(value, float | int) and not isinstance(value, bool) and value >= 0:
        return timedelta(seconds=value)
    return parse_duration(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("Input should be a valid boolean (true or false)")
    return value


def _optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def _integer(low: int, high: int | None = None) -> Check:
    def check(value: Any) -> int:
        if (isinstance(value, str) and value.strip().lstrip("-").isdigit()) or (
            isinstance(value, float) and value.is_integer()
        ):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("Input should be a valid integer")
        if value < low:
            raise ValueError(f"Input should be greater than or equal to {low}")
        if high is not None and value > high:
            raise ValueError(f"Input should be less than or equal to {high}")
        return value

    return check


def _choice(*choices: str) -> Check:
    def check(value: Any) -> str:
        if value not in choices:
            raise ValueError("Input should be " + " or ".join(repr(c) for c in choices))
        return str(value)

    return check


def _pattern(regex: re.Pattern[str]) -> Check:
    def check(value: Any) -> str:
        if not regex.match(_string(value)):
            raise ValueError(f"String should match pattern '{regex.pattern}'")
        return value

    return check


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError("Input should be a valid dictionary")
    return dict(value)


def _items(check: Check, min_length: int = 0) -> Check:
    def check_all(value: Any) -> tuple[Any, ...]:
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, list | tuple):
            raise ValueError("Input should be a valid list")
        if len(value) < min_length:
            raise ValueError(f"List should have at least {min_length} item, not {len(value)}")
        problems: list[tuple[str, str]] = []
        out = []
        for index, item in enumerate(value):
            try:
                out.append(check(item))
            except _Invalid as err:
                problems += [(_join(str(index), key), message) for key, message in err.problems]
            except ValueError as err:
                problems.append((str(index), str(err)))
        if problems:
            raise _Invalid(problems)
        return tuple(out)

    return check_all


def _nested(cls: type[_Checked]) -> Check:
    return lambda value: value if isinstance(value, cls) else cls.from_dict(value)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if key else prefix


class _Checked:
    """A frozen dataclass whose fields are checked (and normalised) on construction."""

    CHECKS: ClassVar[dict[str, Check]] = {}

    def __post_init__(self) -> None:
        problems: list[tuple[str, str]] = []
        for name, check in self.CHECKS.items():
            try:
                object.__setattr__(self, name, check(getattr(self, name)))
            except _Invalid as err:
                problems += [(_join(name, key), message) for key, message in err.problems]
            except ValueError as err:
                problems.append((name, str(err)))
        if problems:
            raise _Invalid(problems)
        self._check()

    def _check(self) -> None:
        """Checks across fields."""

    @classmethod
    def from_dict(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError("Input should be a valid dictionary or object")
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
        problems = [(str(key), unknown_key(key, fields)) for key in data if key not in fields]
        missing = [
            (name, "Field required")
            for name, f in fields.items()
            if name not in data
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        made = None
        try:  # also with unknown keys, so that one message names every problem
            made = None if missing else cls(**{k: v for k, v in data.items() if k in fields})
        except _Invalid as err:
            problems += err.problems
        problems += missing
        if problems:
            raise _Invalid(problems)
        return made

    @classmethod
    def field_problems(cls, values: Mapping[Any, Any], allowed: Collection[str]) -> list[tuple[str, str]]:
        """Each of `values` checked on its own, as a value of the field it names (one of
        `allowed`): what a block of defaults for these fields can be checked by."""
        problems: list[tuple[str, str]] = []
        for key, value in values.items():
            if key not in allowed:
                problems.append((str(key), unknown_key(key, allowed)))
                continue
            try:
                cls.CHECKS[key](value)
            except _Invalid as err:
                problems += [(_join(str(key), sub), message) for sub, message in err.problems]
            except ValueError as err:
                problems.append((str(key), str(err)))
        return problems

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, without those that are None (the document's own shape)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if not f.init:
                continue  # derived from the others
            value = _plain(getattr(self, f.name))
            if value is not None:
                out[f.name] = value
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, _Checked):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


@dataclass(frozen=True, kw_only=True)
class TeamRoute(_Checked):
    match: str
    team: str

    CHECKS: ClassVar[dict[str, Check]] = {"match": _regex, "team": _nonempty}


def _hours(value: timedelta) -> str:
    return f"{value.total_seconds() / 3600:g}h"


DEFAULT_SOURCE = "hud"
BUILDKITE_SOURCE = "buildkite"  # the one source a trunk names a `pipeline` for
DEFAULT_WEBHOOK_POLL_EVERY = timedelta(minutes=10)
DEFAULT_EXCLUDE = "unstable|rerun_disabled_tests|mem_leak_check"
PYTORCH_INCLUDE = "^(pull|trunk|docs-build|linux-binary-)"


@dataclass(frozen=True, kw_only=True)
class RuleConfig(_Checked):
    """Rule keys (design.md §7); the same names in a replay file's `config` object."""

    failures_to_open: int = 3
    passes_to_close: int = 1
    max_failure_age: timedelta = timedelta(hours=24)
    stale_after_commits: int = 5
    include: str = ""
    exclude: str = DEFAULT_EXCLUDE
    cancelled: str = "nodata"  # "nodata" or "fail"
    trunk_band_max_jobs: int = 5
    repeat_interval: timedelta = timedelta(hours=4)
    # A source that has failed every poll for this long raises TrunkSourceDown.
    source_down_after: timedelta = timedelta(minutes=15)
    # How long cells, commits and resolved alerts' notification logs stay in the table
    # (DynamoDB TTL), counted from the commit's time or the log's last write.
    retention: timedelta = timedelta(hours=720)
    # A webhook-fed trunk whose poll finds results no delivery brought for this long (since
    # the last delivery) raises WebhooksDown.
    webhooks_down_after: timedelta = timedelta(minutes=30)
    team: str = "ci-oncall"
    teams: tuple[TeamRoute, ...] = ()
    runbook_url: str | None = None
    dashboard_url: str | None = None
    # `rerun`: a job alert's culprit is confirmed by re-running the job on the last pass and
    # the culprit (domain/verdict.py); `off`: the alert names its suspect unconfirmed.
    confirm: str = "off"
    # The trunk's cap on reruns planned in any hour: one dependency breakage pages a whole job
    # family (about 10 jobs, 2 reruns each) at once.
    reruns_per_hour: int = 20
    # The UTC hour from which a day's digest (design.md §4.4) is sent, the next day.
    digest_hour: int = 0

    CHECKS: ClassVar[dict[str, Check]] = {
        "failures_to_open": _integer(1),
        "passes_to_close": _integer(1),
        "max_failure_age": parse_duration,
        "stale_after_commits": _integer(1),
        "include": _regex,
        "exclude": _regex,
        "cancelled": _choice("nodata", "fail"),
        "trunk_band_max_jobs": _integer(1),
        "repeat_interval": parse_duration,
        "source_down_after": parse_duration,
        "retention": parse_duration,
        "webhooks_down_after": parse_duration,
        "team": _nonempty,
        "teams": _items(_nested(TeamRoute)),
        "runbook_url": _optional(_string),
        "dashboard_url": _optional(_string),
        "confirm": _choice("off", "rerun"),
        "reruns_per_hour": _integer(1, 1000),
        "digest_hour": _integer(0, 23),
    }

    @property
    def confirms(self) -> bool:
        return self.confirm == "rerun"

    def _check(self) -> None:
        # A firing job's newest failure is younger than max_failure_age, so a longer retention
        # never takes a cell the rule fires on.
        if self.retention <= self.max_failure_age:
            message = f"must be longer than max_failure_age ({_hours(self.max_failure_age)})"
            raise _Invalid([("retention", message)])

    def in_scope(self, job: str) -> bool:
        if self.include and not re.search(self.include, job):
            return False
        return not (self.exclude and re.search(self.exclude, job))

    def team_for(self, job: str) -> str:
        return next((route.team for route in self.teams if re.search(route.match, job)), self.team)


@dataclass(frozen=True, kw_only=True)
class TokenRef(_Checked):
    """Where a token (or another secret value) lives; exactly one of the three."""

    env: str | None = None
    ssm: str | None = None
    secret: str | None = None

    CHECKS: ClassVar[dict[str, Check]] = {
        "env": _optional(_string),
        "ssm": _optional(_string),
        "secret": _optional(_string),
    }

    def _check(self) -> None:
        if sum(bool(v) for v in (self.env, self.ssm, self.secret)) != 1:
            raise _Invalid([("", "give exactly one of env, ssm, secret")])

    @property
    def place(self) -> str:
        """Where the value is, as a receiver's log name says it: the secret's name, `ssm:<path>`
        or `env:<name>` (never the value)."""
        return self.secret or (f"ssm:{self.ssm}" if self.ssm else f"env:{self.env}")


@dataclass(frozen=True, kw_only=True)
class TrunkConfig(_Checked):
    repo: str
    branch: str = "main"
    source: str = DEFAULT_SOURCE  # a name in the sources' registry the loader is handed
    url: str | None = None
    token: TokenRef | None = None
    per_page: int = 50
    config: dict[str, Any] = field(default_factory=dict)
    # Fed by webhook deliveries (GitHub's; Buildkite's for a `buildkite` trunk); the source
    # is then polled only every `poll_every`
    # (0: never), as the backstop for deliveries that never came.
    webhook: bool = False
    poll_every: timedelta | None = None
    # Where reruns are requested (`confirm: rerun`): GitHub's REST API, with a token of its
    # own that may write actions (`actions: write`). Never the polling `token`, which then
    # needs no more than read access.
    github_api_url: str | None = None
    github_token: TokenRef | None = None
    # The Buildkite pipeline (`org/slug`) a `buildkite` trunk reads; its `repo` is the code's
    # GitHub repository (commit and pull request links).
    pipeline: str | None = None

    CHECKS: ClassVar[dict[str, Check]] = {
        "repo": _pattern(_REPO),
        "branch": _nonempty,
        "source": _nonempty,
        "url": _optional(_string),
        "token": _optional(_nested(TokenRef)),
        "per_page": _integer(1, 100),
        "config": _mapping,
        "webhook": _boolean,
        "poll_every": _optional(_duration_or_seconds),
        "github_api_url": _optional(_string),
        "github_token": _optional(_nested(TokenRef)),
        "pipeline": _optional(_pattern(_PIPELINE)),
    }

    def _check(self) -> None:
        problems: list[tuple[str, str]] = []
        if self.poll_every is not None and not self.webhook:
            problems.append(("poll_every", "only for a webhook-fed trunk (webhook: true)"))
        if self.source == BUILDKITE_SOURCE:
            if self.pipeline is None:
                problems.append(
                    ("pipeline", "Field required for source 'buildkite' (the pipeline as org/slug)")
                )
        elif self.pipeline is not None:
            problems.append(("pipeline", "only for source 'buildkite'"))
        if problems:
            raise _Invalid(problems)

    @property
    def poll_period(self) -> timedelta | None:
        """How often the schedule polls this trunk: None for every tick; 0 for never."""
        if not self.webhook:
            return None
        return self.poll_every if self.poll_every is not None else DEFAULT_WEBHOOK_POLL_EVERY

    @property
    def trunk_id(self) -> str:
        return f"{self.repo}#{self.branch}"


_MATCHER = re.compile(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|[^"\s]+)\s*$')


def _matcher(value: Any) -> str:
    """An Alertmanager matcher string (`priority="P1"`, `team=~"infra.*"`); the domain
    checks its form and regex, the channel that uses it matches with the silences' engine."""
    text = _string(value)
    found = _MATCHER.match(text)
    if not found:
        raise ValueError(f'invalid matcher {text!r} (use name="value", !=, =~ or !~)')
    if found.group(1) in ("=~", "!~"):
        pattern = found.group(2)
        pattern = pattern[1:-1] if pattern.startswith('"') else pattern
        try:
            re.compile(pattern)
        except re.error as err:
            raise ValueError(f"invalid regular expression {pattern!r}: {err}") from None
    return text


def _secret_or_string(value: Any) -> str | TokenRef:
    if isinstance(value, str | TokenRef):
        return value
    if isinstance(value, Mapping):
        return TokenRef.from_dict(value)
    raise ValueError("Input should be a string or an object like {secret: name}")


@dataclass(frozen=True, kw_only=True)
class ReceiverConfig(_Checked):
    """Where alerts also go (top-level `receivers`): what every receiver type has, its `type`
    and its `matchers` (Alertmanager matcher strings; an alert goes to the receiver when it
    matches all of them). Each type subclasses this with its own keys, in the module of its
    channel (`channels/`), and is found by its `type` in the registry the loader is handed.
    """

    type: str
    matchers: tuple[str, ...] = ()

    CHECKS: ClassVar[dict[str, Check]] = {"type": _nonempty, "matchers": _items(_matcher)}

    def takes_digest(self) -> bool:
        """Whether the receiver is sent the daily digest (design.md §4.4): a type that can
        carry it has a `digest` key to opt in."""
        return False

    def takes_alerts(self) -> bool:
        """Whether the receiver is sent alerts at all (the stack's topic can be turned off)."""
        return True


# The receiver type of the stack's own SNS topic (channels/sns.py): every alert and daily
# digest go to the topic unless the one entry of this type narrows it or turns it off.
STACK_TOPIC = "topic"


# A receiver type's name -> its configuration class (the registry in channels/).
ReceiverTypes = Mapping[str, type[ReceiverConfig]]
# The sources' names (the registry in sources/, which the domain cannot import either).
SourceNames = Collection[str]


def receiver_config(data: Any, types: ReceiverTypes) -> ReceiverConfig:
    """One entry of `receivers`, validated by its type's class (unknown keys are errors)."""
    if not isinstance(data, Mapping):
        raise ValueError("Input should be a valid dictionary or object")
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in types:
        known = ", ".join(sorted(types)) or "none"
        raise _Invalid([("type", f"unknown receiver type {kind!r} (known: {known})")])
    config: ReceiverConfig = types[kind].from_dict(data)
    return config


def _typed_receiver(value: Any) -> ReceiverConfig:
    """Receivers reach the Deployment already read by their types (load_deployment)."""
    if not isinstance(value, ReceiverConfig) or type(value) is ReceiverConfig:
        raise ValueError("read receivers with load_deployment and the receiver registry")
    return value


# What `trunk_defaults` may hold: a trunk's keys but the repository it names and its rule keys
# (those are `defaults`').
TRUNK_DEFAULT_KEYS = (
    "branch", "source", "url", "token", "per_page", "webhook", "poll_every", "github_api_url", "github_token",
)  # fmt: skip
RULE_KEYS = tuple(f.name for f in dataclasses.fields(RuleConfig))


# The least `heartbeat.every`: the schedule that drives it ticks at most once a minute.
MIN_HEARTBEAT_EVERY = timedelta(minutes=1)


def _heartbeat_period(value: Any) -> timedelta:
    every = _duration_or_seconds(value)
    if every < MIN_HEARTBEAT_EVERY:
        raise ValueError("must be at least 1m (the schedule that sends it ticks at most once a minute)")
    return every


@dataclass(frozen=True, kw_only=True)
class HeartbeatConfig(_Checked):
    """`heartbeat`: the always-firing `Watchdog` alert, sent every `every` to its own
    `receivers` only (a dead man's switch, which alerts when it stops coming), never to the
    stack's topic or the top-level receivers."""

    every: timedelta = timedelta(minutes=5)
    receivers: tuple[ReceiverConfig, ...]

    CHECKS: ClassVar[dict[str, Check]] = {
        "every": _heartbeat_period,
        "receivers": _items(_typed_receiver, min_length=1),
    }


@dataclass(frozen=True, kw_only=True)
class Deployment(_Checked):
    """The whole document: `trunks` with `trunk_defaults` applied, `rules` holding every
    trunk's resolved rule (see `load_deployment`)."""

    schedule: str = "rate(1 minute)"
    defaults: dict[str, Any] = field(default_factory=dict)
    # Trunk keys for every trunk that does not set them itself (`from_dict` applies them).
    trunk_defaults: dict[str, Any] = field(default_factory=dict)
    trunks: tuple[TrunkConfig, ...]
    receivers: tuple[ReceiverConfig, ...] = ()  # each an instance of its type's class
    heartbeat: HeartbeatConfig | None = None
    rules: dict[str, RuleConfig] = field(init=False, repr=False, compare=False)

    CHECKS: ClassVar[dict[str, Check]] = {
        "schedule": _pattern(_SCHEDULE),
        "defaults": _mapping,
        "trunk_defaults": _mapping,
        "trunks": _items(_nested(TrunkConfig), min_length=1),
        "receivers": _items(_typed_receiver),
        "heartbeat": _optional(_nested(HeartbeatConfig)),
    }

    @classmethod
    def from_dict(cls, data: Any) -> Any:
        """The document with `trunk_defaults` applied to its trunks. Every problem is found in
        one pass: those of a `trunk_defaults` or `defaults` key once, under that key, and a
        trunk's rule keys beside the trunk's own problems."""
        if not isinstance(data, Mapping):
            raise ValueError("Input should be a valid dictionary or object")
        problems: list[tuple[str, str]] = []
        trunk_defaults = data.get("trunk_defaults")
        if isinstance(trunk_defaults, Mapping) and isinstance(data.get("trunks"), list):
            found = TrunkConfig.field_problems(trunk_defaults, TRUNK_DEFAULT_KEYS)
            problems += [(_join("trunk_defaults", key), message) for key, message in found]
            bad = {key.split(".")[0] for key, _ in found}
            usable = {key: value for key, value in trunk_defaults.items() if key not in bad}
            data = {**data, "trunks": [_with_trunk_defaults(trunk, usable) for trunk in data["trunks"]]}
        try:
            made = super().from_dict(data)
        except _Invalid as err:
            problems += err.problems
            trunks = data.get("trunks")
            if isinstance(trunks, list):  # the trunks' rule keys, which `_check` did not reach
                configs = [
                    (i, str(i), t.get("config", {})) for i, t in enumerate(trunks) if isinstance(t, Mapping)
                ]
                _, found = _resolve_rules(data.get("defaults"), configs)
                problems += [problem for problem in found if problem not in problems]
            raise _Invalid(problems) from None
        if problems:
            raise _Invalid(problems)
        return made

    def _check(self) -> None:
        configs = [(index, trunk.trunk_id, trunk.config) for index, trunk in enumerate(self.trunks)]
        rules, problems = _resolve_rules(self.defaults, configs)
        seen: set[str] = set()
        for index, trunk in enumerate(self.trunks):
            if trunk.trunk_id in seen:
                problems.append((f"trunks.{index}", f"{trunk.repo} {trunk.branch} is configured twice"))
            seen.add(trunk.trunk_id)
        if problems:
            raise _Invalid(problems)
        object.__setattr__(self, "rules", rules)

    def rule_for(self, trunk: TrunkConfig) -> RuleConfig:
        return self.rules[trunk.trunk_id]

    def trunk(self, trunk_id: str) -> TrunkConfig | None:
        """The configured trunk with this id, if it is still configured."""
        return next((trunk for trunk in self.trunks if trunk.trunk_id == trunk_id), None)


def _with_trunk_defaults(trunk: Any, defaults: Mapping[str, Any]) -> Any:
    """A trunk's own keys over `trunk_defaults`; a default `poll_every` only for a webhook-fed
    trunk (the others are polled at every tick)."""
    if not isinstance(trunk, Mapping) or not defaults:
        return trunk
    merged = {**defaults, **trunk}
    if "poll_every" not in trunk and merged.get("webhook") is not True:
        merged.pop("poll_every", None)
    return merged


def _resolve_rules(
    defaults: Any, configs: list[tuple[int, str, Any]]
) -> tuple[dict[str, RuleConfig], list[tuple[str, str]]]:
    """Each trunk's rule (`configs`: index, trunk id, its `config`): its `config` over the
    document's `defaults`. A problem of a `defaults` key is reported once, under `defaults`;
    one a trunk without a `config` of its own has comes from `defaults` too."""
    defaults = defaults if isinstance(defaults, Mapping) else {}
    found = RuleConfig.field_problems(defaults, RULE_KEYS)
    problems = [(_join("defaults", key), message) for key, message in found]
    bad = {key.split(".")[0] for key, _ in found}
    usable = {key: value for key, value in defaults.items() if key not in bad}
    rules: dict[str, RuleConfig] = {}
    for index, trunk_id, config in configs:
        if not isinstance(config, Mapping):
            continue  # the trunk's own check says so
        try:
            rules[trunk_id] = RuleConfig.from_dict({**usable, **config})
        except _Invalid as err:
            where = f"trunks.{index}.config" if config else "defaults"
            for key, message in err.problems:
                problem = (_join(where, key), message)
                if problem not in problems:
                    problems.append(problem)
    return rules, problems


def _describe(err: _Invalid, where: str) -> str:
    return "; ".join(f"{where}{key or '(document)'}: {message}" for key, message in err.problems)


def rule_config(values: dict[str, Any], where: str = "config.") -> RuleConfig:
    try:
        return RuleConfig.from_dict(values)
    except _Invalid as err:
        raise ConfigError(_describe(err, where)) from None
    except ValueError as err:
        raise ConfigError(f"{where.rstrip('.')}: {err}") from None


def load_deployment(
    data: Any,
    receiver_types: ReceiverTypes | None = None,
    base_defaults: Mapping[str, Any] | None = None,
    sources: SourceNames | None = None,
) -> Deployment:
    """The document, validated, with every trunk's rule resolved; its `receivers` by their
    types in `receiver_types` (the registry in channels/, which the domain cannot import;
    without it a document may name no receivers), and each trunk's `source` among `sources`
    (the registry in sources/; without it the names are not checked: documents made by hand
    in tests). Raises `DocumentError` naming every problem's key path.

    A trunk key's value is the trunk's own, else the document's `trunk_defaults`, else its
    default. A rule key's value is, in order of precedence: the trunk's `config`, the
    document's `defaults`, `base_defaults` (in AWS the template's RULE_DEFAULTS),
    `RuleConfig`'s own default. This is the one place that decides it."""
    if not isinstance(data, dict):
        raise DocumentError([Problem("", "a configuration is a mapping with a 'trunks' list")])
    defaults = data.get("defaults") or {}
    if base_defaults and isinstance(defaults, Mapping):
        data = {**data, "defaults": {**base_defaults, **defaults}}
    data, problems = _read_receivers(data, receiver_types or {})
    heartbeat = data.get("heartbeat")
    unread: list[tuple[str, str]] = []
    if isinstance(heartbeat, Mapping):
        heartbeat, unread = _read_receivers(dict(heartbeat), receiver_types or {})
        problems += [(_join("heartbeat", key), message) for key, message in unread]
        data = {**data, "heartbeat": heartbeat}
    problems += _stack_topic_problems(data.get("receivers"), heartbeat)
    if sources is not None:
        problems += _unknown_sources(data, sources)
    try:
        deployment: Deployment = Deployment.from_dict(data)
    except _Invalid as err:
        # Unread heartbeat receivers were left out: the list's own emptiness is not news.
        problems += [
            p for p in err.problems if p not in problems and not (unread and p[0] == "heartbeat.receivers")
        ]
    if problems:
        raise DocumentError([Problem(key, message) for key, message in problems])
    return deployment


def _read_receivers(
    data: dict[str, Any], types: ReceiverTypes
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """`data` with its `receivers` list read by their types, and the problems found (the
    list is then left empty, so the rest of `data` is still checked)."""
    if not isinstance(data.get("receivers"), list):
        return data, []
    try:
        read = _items(lambda item: receiver_config(item, types))
        return {**data, "receivers": read(data["receivers"])}, []
    except _Invalid as err:
        return {**data, "receivers": []}, [(_join("receivers", key), m) for key, m in err.problems]


def _stack_topic_problems(receivers: Any, heartbeat: Any) -> list[tuple[str, str]]:
    """The stack's topic (`STACK_TOPIC`) listed twice, turned off with nothing else to reach,
    or named as a heartbeat receiver (read receivers only: others have their own problems)."""
    listed = [r for r in receivers if isinstance(r, ReceiverConfig)] if isinstance(receivers, tuple) else []
    topics = [index for index, r in enumerate(listed) if r.type == STACK_TOPIC]
    problems = [
        (f"receivers.{index}", "the stack's topic is listed twice: list it once, with all its matchers")
        for index in topics[1:]
    ]
    if topics and not listed[topics[0]].takes_alerts() and len(listed) == 1:
        problems.append(
            (
                f"receivers.{topics[0]}.enabled",
                "the stack's topic is turned off and no other receiver is listed: alerts would reach nobody",
            )
        )
    beats = heartbeat.get("receivers") if isinstance(heartbeat, Mapping) else None
    for index, receiver in enumerate(beats if isinstance(beats, tuple) else ()):
        if isinstance(receiver, ReceiverConfig) and receiver.type == STACK_TOPIC:
            problems.append(
                (
                    f"heartbeat.receivers.{index}",
                    "the heartbeat goes to a dead man's switch, never to the stack's topic: "
                    "name the switch's own receiver",
                )
            )
    return problems


def _unknown_sources(data: Mapping[str, Any], sources: SourceNames) -> list[tuple[str, str]]:
    """A `source` (a trunk's own, or `trunk_defaults`') that is a name but not one of `sources`
    (other values are the trunk's own check's to refuse)."""
    known = ", ".join(sorted(sources)) or "none"
    problems = []
    trunk_defaults = data.get("trunk_defaults")
    default = trunk_defaults.get("source") if isinstance(trunk_defaults, Mapping) else None
    if isinstance(default, str) and default not in sources:
        problems.append(("trunk_defaults.source", f"unknown source {default!r} (known: {known})"))
    trunks = data.get("trunks")
    for index, trunk in enumerate(trunks) if isinstance(trunks, list) else ():
        if not isinstance(trunk, Mapping):
            continue
        source = trunk.get("source", DEFAULT_SOURCE if default is None else None)
        if isinstance(source, str) and source not in sources:
            problems.append((f"trunks.{index}.source", f"unknown source {source!r} (known: {known})"))
    return problems


def load_text(
    text: str,
    name: str,
    receiver_types: ReceiverTypes | None = None,
    base_defaults: Mapping[str, Any] | None = None,
    sources: SourceNames | None = None,
) -> Deployment:
    """A configuration file's text (YAML, JSON being YAML too), loaded by `load_deployment`;
    each problem names `name` and the line its key is on."""
    data = parse_document(text, name)
    try:
        return load_deployment(data, receiver_types, base_defaults, sources)
    except DocumentError as err:
        lines = _key_lines(text)
        located = [dataclasses.replace(p, line=_line_of(p.key, lines)) for p in err.problems]
        located.sort(key=lambda problem: problem.line or 0)  # in the order of the file
        raise DocumentError(located, name) from None


def parse_document(text: str, name: str = "configuration") -> Any:
    """YAML (and so JSON) with booleans only `true` and `false` (`confirm: off` is the string
    'off', as written) and a key given twice refused; a syntax error names its line."""
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        what = str(err.problem or err.context)
        if err.context and err.context_mark and err.problem:
            what += f" ({err.context} on line {err.context_mark.line + 1})"
        line = mark.line + 1 if mark else None
        raise DocumentError([Problem("", f"not valid YAML: {what}", line)], name) from None
    except yaml.YAMLError as err:
        raise DocumentError([Problem("", f"not valid YAML: {err}")], name) from None


@functools.cache
def _yaml_loader() -> Any:
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when there
    bool_tag = "tag:yaml.org,2002:bool"

    class Loader(base):
        yaml_implicit_resolvers = {
            first: [(tag, regex) for tag, regex in resolvers if tag != bool_tag]
            for first, resolvers in base.yaml_implicit_resolvers.items()
        }

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor`: its keys are the mapping's defaults
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    Loader.add_implicit_resolver(
        bool_tag, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
    )
    return Loader


def _key_lines(text: str) -> dict[str, int]:
    """The line of each key path in a YAML text (`trunks.3.repo`: the line of that key)."""
    import yaml

    try:
        root = yaml.compose(text, Loader=_yaml_loader())
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}

    def walk(node: Any, path: str) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key_node, value in node.value:
                key = _join(path, str(key_node.value)) if path else str(key_node.value)
                lines.setdefault(key, key_node.start_mark.line + 1)
                walk(value, key)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, _join(path, str(index)) if path else str(index))

    if root is not None:
        walk(root, "")
    lines.pop("", None)  # a problem of the whole document is on no one line
    return lines


def _line_of(key: str, lines: Mapping[str, int]) -> int | None:
    """The line of `key`, else of the nearest key above it that is in the text (a missing
    field's object)."""
    while key:
        if key in lines:
            return lines[key]
        key = key.rpartition(".")[0]
    return None


def to_json(deployment: Deployment) -> str:
    return json.dumps(deployment.to_dict())
