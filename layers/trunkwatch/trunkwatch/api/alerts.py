"""`GET /api/v2/alerts`: the current alerts with Alertmanager's status and filters."""

from __future__ import annotations

from typing import Annotated, Protocol

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from trunkwatch.api.models import GettableAlert
from trunkwatch.domain import clock
from trunkwatch.domain.alerts import RECEIVER, RESOLVED, Alert
from trunkwatch.silences.matchers import compile_regex, parse_matchers

router = Router()


class AlertView(Protocol):
    """What `trunkwatch.app.views.current_alerts` returns for each alert."""

    alert: Alert
    silenced_by: list[str]
    inhibited_by: list[str]


def _gettable(view: AlertView) -> GettableAlert:
    alert = view.alert
    silenced_by, inhibited_by = list(view.silenced_by), list(view.inhibited_by)
    return GettableAlert.model_validate(
        {
            **alert.webhook_form(),
            "receivers": [{"name": RECEIVER}],
            # The alert last changed when it started (firing) or ended (resolved).
            "updatedAt": clock.format_time(alert.ends_at or alert.starts_at),
            "status": {
                "state": "suppressed" if silenced_by or inhibited_by else "active",
                "silencedBy": silenced_by,
                "inhibitedBy": inhibited_by,
            },
        }
    )


@router.get("/api/v2/alerts", summary="List current alerts")
def get_alerts(
    active: Annotated[bool, Query(description="Show alerts that are neither silenced nor inhibited")] = True,
    silenced: Annotated[bool, Query(description="Show silenced alerts")] = True,
    inhibited: Annotated[bool, Query(description="Show inhibited alerts")] = True,
    unprocessed: Annotated[
        bool, Query(description="Show unprocessed alerts (every alert is processed)")
    ] = True,
    filters: Annotated[list[str] | None, Query(alias="filter", description="Label matchers")] = None,
    receiver: Annotated[str | None, Query(description="Regex the receiver name must match")] = None,
) -> list[GettableAlert]:
    # Imported here: the alert overview pulls in the evaluation code, which only this route needs.
    from trunkwatch.app.views import current_alerts

    wanted = parse_matchers(filters or [])
    if receiver is not None and not compile_regex(receiver, "receiver").search(RECEIVER):
        return []
    shown = []
    for view in current_alerts(clock.now()):
        if view.alert.status == RESOLVED:
            continue
        if not active and not view.silenced_by and not view.inhibited_by:
            continue
        if not silenced and view.silenced_by:
            continue
        if not inhibited and view.inhibited_by:
            continue
        if all(matcher.matches(view.alert.labels) for matcher in wanted):
            shown.append(_gettable(view))
    return sorted(shown, key=lambda alert: alert.fingerprint)
