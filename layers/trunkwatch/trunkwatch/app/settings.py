"""The running deployment's configuration, from where the template puts it.

`CONFIG_PARAMETER` names the SSM parameter holding the configuration document;
`RULE_DEFAULTS` (JSON, from the template's threshold parameters) sits under the document's
own `defaults`. Cached for a minute so a warm Lambda does not re-read it every event.
"""

from __future__ import annotations

import json
import os

from trunkwatch.domain.config import ConfigError, Deployment, load_deployment, parse_document

CACHE_SECONDS = 60


def deployment() -> Deployment:
    name = os.environ.get("CONFIG_PARAMETER")
    if not name:
        raise ConfigError(
            "environment variable CONFIG_PARAMETER (the configuration's SSM parameter) is not set"
        )
    from aws_lambda_powertools.utilities import parameters  # boto3: loaded by the first call

    try:
        text = parameters.get_parameter(name, max_age=CACHE_SECONDS)
    except parameters.exceptions.GetParameterError as err:
        raise ConfigError(f"cannot read the configuration parameter {name}: {err}") from None
    data = parse_document(str(text), f"SSM parameter {name}")
    if isinstance(data, dict):
        data = {**data, "defaults": {**_rule_defaults(), **(data.get("defaults") or {})}}
    return load_deployment(data)


def _rule_defaults() -> dict[str, object]:
    raw = os.environ.get("RULE_DEFAULTS") or "{}"
    try:
        values = json.loads(raw)
    except ValueError as err:
        raise ConfigError(f"RULE_DEFAULTS is not valid JSON: {err}") from None
    if not isinstance(values, dict):
        raise ConfigError("RULE_DEFAULTS must be a JSON object of rule keys")
    return values
