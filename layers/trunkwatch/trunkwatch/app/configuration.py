"""The configuration file, read the one way every reader reads it (design.md §7).

The deployed functions read the file `CONFIG_FILE` names (the ConfigLayer, packaged by
`sam build` from `config/trunkwatch.yaml`); `trunkwatch check-config`, `serve --config` and
`poll --config` read the file they are given, through this same function. A text is parsed
and checked once: the functions read the file at each use (a few kilobytes from the layer)
and a warm container reuses what the same text gave.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trunkwatch.domain.config import ConfigError

if TYPE_CHECKING:
    from trunkwatch.domain.config import Deployment


def load_configuration(path: str | Path, rule_defaults: Mapping[str, Any] | None = None) -> Deployment:
    """The deployment the file at `path` describes, every trunk's rule resolved over
    `rule_defaults` (in AWS the template's RULE_DEFAULTS); a `ConfigError` naming the file
    (and, for a problem of the document, the line and key path) otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read configuration {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"cannot read configuration {path}: not UTF-8 text ({err.reason})") from None
    return _loaded(text, str(path), json.dumps(dict(rule_defaults or {}), sort_keys=True))


@functools.lru_cache(maxsize=4)
def _loaded(text: str, name: str, rule_defaults: str) -> Deployment:
    from trunkwatch import sources
    from trunkwatch.channels import RECEIVER_TYPES
    from trunkwatch.domain.config import load_text

    return load_text(text, name, RECEIVER_TYPES, json.loads(rule_defaults), sources.REGISTRY)
