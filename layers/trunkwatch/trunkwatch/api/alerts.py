"""`GET /api/v2/alerts`: the current alerts with Alertmanager's status and filters."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from trunkwatch.api.edge import edge_of
from trunkwatch.api.models import AlertGroup, GettableAlert, Receiver
from trunkwatch.domain.alerts import RECEIVER, RESOLVED, AlertView, Links
from trunkwatch.domain.clock import format_time
from trunkwatch.silences.matchers import compile_regex, parse_matchers

router = Router()


def external_url() -> str:
    """The API's URL as the caller reached it: its domain, plus the stage when the path
    carries it (execute-api URLs do, a custom domain's base path mapping does not)."""
    event = router.current_event
    context = event.raw_event.get("requestContext") or {}
    domain = context.get("domainName") or ""
    if not domain:
        return edge_of(router).settings.api_url
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
            "updatedAt": format_time(alert.ends_at or alert.starts_at),
            "status": {
                "state": "suppressed" if silenced_by or inhibited_by else "active",
                "silencedBy": silenced_by,
                "inhibitedBy": inhibited_by,
            },
        }
    )


_Active = Annotated[bool, Query(description="Show alerts that are neither silenced nor inhibited")]
_Silenced = Annotated[bool, Query(description="Show silenced alerts")]
_Inhibited = Annotated[bool, Query(description="Show inhibited alerts")]
_Filters = Annotated[list[str] | None, Query(alias="filter", description="Label matchers")]
_Receiver = Annotated[str | None, Query(description="Regex the receiver name must match")]

# The labels the notifier groups by (its messages' groupLabels), so a group here is one
# notification group there.
GROUP_LABELS = ("alertname", "repo")


def _shown(
    active: bool, silenced: bool, inhibited: bool, filters: list[str] | None, receiver: str | None
) -> list[GettableAlert]:
    # Imported here: the alert overview pulls in the evaluation code, which only these routes need.
    from trunkwatch.app.views import current_alerts

    wanted = parse_matchers(filters or [])
    if receiver is not None and not compile_regex(receiver, "receiver").search(RECEIVER):
        return []
    shown = []
    edge = edge_of(router)
    links = Links(external_url(), edge.settings.dashboard_url)
    for view in current_alerts(edge.storage(), edge.deployment(), edge.clock.now(), links):
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


@router.get("/api/v2/alerts", summary="List current alerts")
def get_alerts(
    active: _Active = True,
    silenced: _Silenced = True,
    inhibited: _Inhibited = True,
    unprocessed: Annotated[
        bool, Query(description="Show unprocessed alerts (every alert is processed)")
    ] = True,
    filters: _Filters = None,
    receiver: _Receiver = None,
) -> list[GettableAlert]:
    return _shown(active, silenced, inhibited, filters, receiver)


@router.get("/api/v2/alerts/groups", summary="List current alerts grouped as the notifier groups them")
def get_alert_groups(
    active: _Active = True,
    silenced: _Silenced = True,
    inhibited: _Inhibited = True,
    filters: _Filters = None,
    receiver: _Receiver = None,
) -> list[AlertGroup]:
    groups: dict[tuple[str, ...], list[GettableAlert]] = {}
    for alert in _shown(active, silenced, inhibited, filters, receiver):
        groups.setdefault(tuple(alert.labels.get(name, "") for name in GROUP_LABELS), []).append(alert)
    return [
        AlertGroup(
            labels={name: value for name, value in zip(GROUP_LABELS, key, strict=True) if value},
            receiver=Receiver(name=RECEIVER),
            alerts=members,
        )
        for key, members in sorted(groups.items())
    ]
