"""`GET /api/v2/alerts`: the current alerts with Alertmanager's status and filters."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from trunkwatch.api.models import GettableAlert
from trunkwatch.app import settings
from trunkwatch.domain import clock
from trunkwatch.domain.alerts import RECEIVER, RESOLVED, AlertView, Links
from trunkwatch.silences.matchers import compile_regex, parse_matchers

router = Router()


def external_url() -> str:
    """The API's URL as the caller reached it: its domain, plus the stage when the path
    carries it (execute-api URLs do, a custom domain's base path mapping does not)."""
    event = router.current_event
    context = event.raw_event.get("requestContext") or {}
    domain = context.get("domainName") or ""
    if not domain:
        return settings.current().api_url
    full_path = context.get("path") or event.path
    prefix = full_path[: len(full_path) - len(event.path)] if full_path.endswith(event.path) else ""
    scheme = (event.headers.get("x-forwarded-proto") or "https").split(",")[0].strip()
    return f"{scheme}://{domain}{prefix}"


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
    links = Links(external_url(), settings.current().dashboard_url)
    for view in current_alerts(clock.now(), links):
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
