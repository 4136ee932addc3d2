"""The configuration document (SPEC 7): rule settings and the trunks to watch.

Validated once at load; any unknown key, bad regex, bad duration or missing field is an
error that names the key.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


class ConfigError(ValueError):
    """A configuration problem, worded for the person who wrote the file."""


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


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


def _compile(value: str) -> str:
    try:
        re.compile(value)
    except re.error as err:
        raise ValueError(f"invalid regex {value!r}: {err}") from None
    return value


Regex = Annotated[str, BeforeValidator(_compile)]


class TeamRoute(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    match: Regex
    team: str = Field(min_length=1)


DEFAULT_EXCLUDE = "unstable|rerun_disabled_tests|mem_leak_check"
PYTORCH_INCLUDE = "^(pull|trunk|docs-build|linux-binary-)"


class RuleConfig(BaseModel):
    """Rule keys (SPEC 7); the same names in a replay file's `config` object."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failures_to_open: int = Field(3, ge=1)
    passes_to_close: int = Field(1, ge=1)
    max_failure_age: Duration = timedelta(hours=24)
    stale_after_commits: int = Field(5, ge=1)
    include: Regex = ""
    exclude: Regex = DEFAULT_EXCLUDE
    cancelled: Literal["nodata", "fail"] = "nodata"
    trunk_band_max_jobs: int = Field(5, ge=1)
    repeat_interval: Duration = timedelta(hours=4)
    team: str = Field("ci-oncall", min_length=1)
    teams: tuple[TeamRoute, ...] = ()
    source_down_after: Duration = timedelta(minutes=15)
    runbook_url: str | None = None
    dashboard_url: str | None = None

    def in_scope(self, job: str) -> bool:
        if self.include and not re.search(self.include, job):
            return False
        return not (self.exclude and re.search(self.exclude, job))

    def team_for(self, job: str) -> str:
        return next((route.team for route in self.teams if re.search(route.match, job)), self.team)


class TokenRef(BaseModel):
    """Where a source token lives; exactly one of the three."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    env: str | None = None
    ssm: str | None = None
    secret: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> TokenRef:
        if sum(bool(v) for v in (self.env, self.ssm, self.secret)) != 1:
            raise ValueError("give exactly one of env, ssm, secret")
        return self


class TrunkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    branch: str = Field("main", min_length=1)
    source: Literal["hud", "github"] = "hud"
    url: str | None = None
    token: TokenRef | None = None
    per_page: int = Field(50, ge=1, le=100)
    config: dict[str, Any] = Field(default_factory=dict)

    @property
    def trunk_id(self) -> str:
        return f"{self.repo}#{self.branch}"

    @property
    def base_url(self) -> str:
        default = "https://hud.pytorch.org" if self.source == "hud" else "https://api.github.com"
        return (self.url or default).rstrip("/")


class Deployment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schedule: str = Field("rate(1 minute)", pattern=r"^(rate|cron)\(.+\)$")
    defaults: dict[str, Any] = Field(default_factory=dict)
    trunks: tuple[TrunkConfig, ...] = Field(min_length=1)

    def rule_for(self, trunk: TrunkConfig) -> RuleConfig:
        return rule_config({**self.defaults, **trunk.config})

    def trunk(self, trunk_id: str) -> TrunkConfig:
        for trunk in self.trunks:
            if trunk.trunk_id == trunk_id:
                return trunk
        raise ConfigError(f"no trunk {trunk_id!r} in the configuration")


def _describe(err: ValidationError, where: str) -> str:
    problems = []
    for item in err.errors():
        key = ".".join(str(p) for p in item["loc"]) or "(document)"
        message = "unknown key" if item["type"] == "extra_forbidden" else item["msg"]
        problems.append(f"{where}{key}: {message.removeprefix('Value error, ')}")
    return "; ".join(problems)


def rule_config(values: dict[str, Any], where: str = "config.") -> RuleConfig:
    try:
        return RuleConfig.model_validate(values)
    except ValidationError as err:
        raise ConfigError(_describe(err, where)) from None


def load_deployment(data: Any) -> Deployment:
    if not isinstance(data, dict):
        raise ConfigError("configuration must be a mapping with a 'trunks' list")
    try:
        deployment = Deployment.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_describe(err, "")) from None
    for index, trunk in enumerate(deployment.trunks):
        rule_config({**deployment.defaults, **trunk.config}, where=f"trunks.{index}.config.")
    return deployment


def parse_document(text: str, name: str = "configuration") -> Any:
    """JSON, or YAML where PyYAML is installed (locally; the deployed document is JSON, so
    the Lambda layer does without it)."""
    try:
        return json.loads(text)
    except ValueError as json_error:
        try:
            import yaml
        except ImportError:
            raise ConfigError(f"{name} is not valid JSON: {json_error}") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"{name} is not valid YAML/JSON: {err}") from None


def load_file(path: str | Path) -> Deployment:
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ConfigError(f"cannot read configuration {path}: {err.strerror}") from None
    return load_deployment(parse_document(text, str(path)))


def to_json(deployment: Deployment) -> str:
    return json.dumps(deployment.model_dump(mode="json", exclude_none=True))
