"""`GET /api/v2/status` and `GET /api/v2/receivers`, which amtool reads before its commands."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from importlib import metadata

from aws_lambda_powertools.event_handler.api_gateway import Router

from trunkwatch.api.alerts import RECEIVER
from trunkwatch.api.models import AlertmanagerStatus, Receiver
from trunkwatch.domain.clock import format_time

router = Router()

# Wall-clock start of this process (a Lambda execution environment), not the simulated clock.
_STARTED = datetime.now(UTC)
# Alertmanager shows its configuration file; the part that applies here is the one route.
_CONFIG = f"route:\n  receiver: {RECEIVER}\nreceivers:\n  - name: {RECEIVER}\n"


def _version() -> str:
    try:
        return metadata.version("trunkwatch")
    except metadata.PackageNotFoundError:
        return "unknown"


@router.get("/api/v2/status", summary="Status in Alertmanager's shape")
def get_status() -> AlertmanagerStatus:
    return AlertmanagerStatus.model_validate(
        {
            "cluster": {"status": "disabled", "peers": []},
            "versionInfo": {
                "version": _version(),
                "revision": "",
                "branch": "",
                "buildUser": "",
                "buildDate": "",
                "goVersion": f"python{platform.python_version()}",
            },
            "config": {"original": _CONFIG},
            "uptime": format_time(_STARTED),
        }
    )


@router.get("/api/v2/receivers", summary="Notification receivers")
def get_receivers() -> list[Receiver]:
    return [Receiver(name=RECEIVER)]
