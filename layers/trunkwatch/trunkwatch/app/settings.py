"""The function's environment as one settings model, read in one place, and the running
deployment's configuration from where the template puts it.

`CONFIG_PARAMETER` names the SSM parameter holding the configuration document;
`RULE_DEFAULTS` (JSON, from the template's threshold parameters) sits under the document's
own `defaults`. The document is cached for a minute so a warm Lambda does not re-read it
every event. The configuration's model loads with the first read of the deployment (the
API's silence routes and the authorizer read only the environment).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trunkwatch.domain.config import Deployment

CACHE_SECONDS = 60
_VARIABLES = (
    "TABLE_NAME",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "TOPIC_ARN",
    "CONFIG_PARAMETER",
    "RULE_DEFAULTS",
    "DASHBOARD_URL",
    "API_URL",
    "API_TOKENS_PARAMETER",
    "WEBHOOK_SECRET_NAME",
)


@dataclass(frozen=True)
class Settings:
    table_name: str
    region: str
    endpoint_url: str | None  # set only against a local emulation
    topic_arn: str
    config_parameter: str
    rule_defaults: str
    dashboard_url: str
    # Where people reach the API and status page; the API itself answers with the URL of the
    # request it serves instead (its own function cannot reference the API: a cycle).
    api_url: str
    api_tokens_parameter: str
    # The Secrets Manager secret GitHub signs webhook deliveries with.
    webhook_secret_name: str

    @classmethod
    def from_values(cls, values: dict[str, str | None]) -> Settings:
        return cls(
            table_name=values.get("TABLE_NAME") or "trunkwatch",
            region=values.get("AWS_REGION") or values.get("AWS_DEFAULT_REGION") or "us-east-1",
            endpoint_url=values.get("AWS_ENDPOINT_URL") or None,
            topic_arn=values.get("TOPIC_ARN") or "",
            config_parameter=values.get("CONFIG_PARAMETER") or "",
            rule_defaults=values.get("RULE_DEFAULTS") or "{}",
            dashboard_url=values.get("DASHBOARD_URL") or "",
            api_url=(values.get("API_URL") or "").rstrip("/"),
            api_tokens_parameter=values.get("API_TOKENS_PARAMETER") or "",
            webhook_secret_name=values.get("WEBHOOK_SECRET_NAME") or "",
        )


def current() -> Settings:
    """The settings of this environment, with the table bound (once per distinct environment:
    the local runtime changes it between runs in one process)."""
    return _settings(tuple(os.environ.get(name) for name in _VARIABLES))


@functools.lru_cache(maxsize=4)
def _settings(values: tuple[str | None, ...]) -> Settings:
    from trunkwatch import storage  # not on the authorizer's path, which has no table

    settings = Settings.from_values(dict(zip(_VARIABLES, values, strict=True)))
    storage.bind(settings.table_name, settings.region, settings.endpoint_url)
    return settings


def deployment(settings: Settings | None = None) -> Deployment:
    from aws_lambda_powertools.utilities import parameters

    from trunkwatch.domain.config import ConfigError, load_deployment, parse_document

    settings = settings or current()
    name = settings.config_parameter
    if not name:
        raise ConfigError(
            "environment variable CONFIG_PARAMETER (the configuration's SSM parameter) is not set"
        )
    try:
        text = parameters.get_parameter(name, max_age=CACHE_SECONDS)
    except parameters.exceptions.GetParameterError as err:
        raise ConfigError(f"cannot read the configuration parameter {name}: {err}") from None
    data = parse_document(str(text), f"SSM parameter {name}")
    if isinstance(data, dict):
        data = {
            **data,
            "defaults": {**_rule_defaults(settings.rule_defaults), **(data.get("defaults") or {})},
        }
    return load_deployment(data)


def _rule_defaults(raw: str) -> dict[str, Any]:
    from trunkwatch.domain.config import ConfigError

    try:
        values = json.loads(raw)
    except ValueError as err:
        raise ConfigError(f"RULE_DEFAULTS is not valid JSON: {err}") from None
    if not isinstance(values, dict):
        raise ConfigError("RULE_DEFAULTS must be a JSON object of rule keys")
    return values
