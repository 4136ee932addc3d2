"""The edge: a function's environment, resolved once per container and passed down.

Each handler builds one `Edge` when Lambda loads it (`Edge.from_environ(<its variables>)`):
the settings read from the environment the template gives the function, checked there (a
variable the function needs and does not have is an error naming it, never a default
table or region), the storage on the function's table (built once, at the first table
access), the running deployment's configuration, and the clock the function runs on (real
time when deployed; the local runtime gives the handlers it loads its simulated clock).
Nothing below the handlers reads the environment or the time; `app/` and `api/` functions
take what they need as arguments.

The configuration is the file `CONFIG_FILE` names (in AWS the ConfigLayer's copy of
`config/trunkwatch.yaml`), read by `app/configuration.py` `load_configuration`, the one
reader `trunkwatch check-config` uses too. `RULE_DEFAULTS` (JSON, from the template's
threshold parameters) is the base of its rule keys: `domain/config.py` `load_deployment`
says which value of a rule key wins.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trunkwatch.domain.clock import Clock, SystemClock
from trunkwatch.domain.config import ConfigError

if TYPE_CHECKING:
    from trunkwatch.domain.config import Deployment
    from trunkwatch.storage.port import Storage

# The webhook's signing secret: each read decrypts it (a KMS request), so it is kept longer.
WEBHOOK_SECRET_CACHE_SECONDS = 300

# What each kind of function needs from its environment (template.yaml gives it).
PIPELINE = ("TABLE_NAME", "AWS_REGION", "CONFIG_FILE")
NOTIFIER = (*PIPELINE, "TOPIC_ARN")
WEBHOOK = (*PIPELINE, "WEBHOOK_SECRET_PARAMETER", "BUILDKITE_WEBHOOK_TOKEN_PARAMETER")
DISPATCHER = (*PIPELINE, "POLL_QUEUE_URL")
API = PIPELINE
AUTHORIZER = ("AWS_REGION", "API_TOKENS_PARAMETER")


@dataclass(frozen=True)
class Settings:
    table_name: str
    region: str
    endpoint_url: str | None  # set only against a local emulation
    topic_arn: str
    config_file: str  # the configuration file (the ConfigLayer's, under /opt)
    rule_defaults: dict[str, Any]
    dashboard_url: str
    # Where people reach the API and status page; the API itself answers with the URL of the
    # request it serves instead (its own function cannot reference the API: a cycle).
    api_url: str
    api_tokens_parameter: str
    # The SSM SecureString parameter holding the secret GitHub signs webhook deliveries with.
    webhook_secret_parameter: str
    # The SSM SecureString parameter holding the Buildkite webhook's token.
    buildkite_webhook_token_parameter: str = ""
    # The queue the dispatcher sends one message per due trunk to (ingest consumes it).
    poll_queue_url: str = ""

    @classmethod
    def from_environ(cls, required: Iterable[str], environ: Mapping[str, str] | None = None) -> Settings:
        """The settings of `environ` (the process's environment by default); every variable in
        `required` must be set and non-empty."""
        values = os.environ if environ is None else environ
        region = values.get("AWS_REGION") or values.get("AWS_DEFAULT_REGION") or ""
        missing = [name for name in required if not (region if name == "AWS_REGION" else values.get(name))]
        if missing:
            raise ConfigError(
                "environment variable(s) not set: "
                + ", ".join(missing)
                + " (template.yaml gives them to every deployed function)"
            )
        return cls(
            table_name=values.get("TABLE_NAME", ""),
            region=region,
            endpoint_url=values.get("AWS_ENDPOINT_URL") or None,
            topic_arn=values.get("TOPIC_ARN", ""),
            config_file=values.get("CONFIG_FILE", ""),
            rule_defaults=_rule_defaults(values.get("RULE_DEFAULTS") or "{}"),
            dashboard_url=values.get("DASHBOARD_URL", ""),
            api_url=values.get("API_URL", "").rstrip("/"),
            api_tokens_parameter=values.get("API_TOKENS_PARAMETER", ""),
            webhook_secret_parameter=values.get("WEBHOOK_SECRET_PARAMETER", ""),
            buildkite_webhook_token_parameter=values.get("BUILDKITE_WEBHOOK_TOKEN_PARAMETER", ""),
            poll_queue_url=values.get("POLL_QUEUE_URL", ""),
        )

    @property
    def dashboard_metrics(self) -> bool:
        """Whether to publish the metrics only the stack's dashboard shows (CreateDashboard
        sets DASHBOARD_URL): each is a custom metric's monthly fee."""
        return bool(self.dashboard_url)


@dataclass
class Edge:
    """One function's resolved environment: its settings, its storage, its deployment, and
    the clock it runs on."""

    settings: Settings
    _storage: Storage | None = field(default=None, repr=False)
    clock: Clock = field(default_factory=SystemClock)

    @classmethod
    def from_environ(cls, required: Iterable[str], environ: Mapping[str, str] | None = None) -> Edge:
        return cls(Settings.from_environ(required, environ))

    def use(self, *, clock: Clock | None = None, storage: Storage | None = None) -> None:
        """Run this function on `clock` and/or `storage` instead (the local runtime's, given
        to each handler it loads, as Lambda gives a container its environment)."""
        if clock is not None:
            self.clock = clock
        if storage is not None:
            self._storage = storage

    def storage(self) -> Storage:
        """The storage on this function's table (built once per container, at the first table
        access: the API's status page never pays for PynamoDB)."""
        if self._storage is None:
            from trunkwatch.storage.dynamodb import open_table

            if not self.settings.table_name:
                raise ConfigError("environment variable TABLE_NAME is not set: this function has no table")
            self._storage = open_table(
                self.settings.table_name, self.settings.region, self.settings.endpoint_url
            )
        return self._storage

    def deployment(self) -> Deployment:
        """The configuration in force, with every trunk's rule resolved."""
        from trunkwatch.app.configuration import load_configuration

        if not self.settings.config_file:
            raise ConfigError("environment variable CONFIG_FILE (the configuration file) is not set")
        return load_configuration(self.settings.config_file, self.settings.rule_defaults)


def _rule_defaults(raw: str) -> dict[str, Any]:
    try:
        values = json.loads(raw)
    except ValueError as err:
        raise ConfigError(f"environment variable RULE_DEFAULTS is not valid JSON: {err}") from None
    if not isinstance(values, dict):
        raise ConfigError("environment variable RULE_DEFAULTS must be a JSON object of rule keys")
    return values
