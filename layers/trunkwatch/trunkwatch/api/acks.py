"""`POST /api/v2/acks` (acknowledge the firing alerts some matchers match; write scope) and
`GET /api/v2/acks` (the acknowledged ones): trunkwatch's own, not Alertmanager's, which has
no acknowledgements. The status page acknowledges through the POST; an amtool user with a
silence whose comment starts with `ACK!` (`api/silences.py`)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel, ConfigDict, Field

from trunkwatch.api import caller
from trunkwatch.api.alerts import external_url
from trunkwatch.api.edge import edge_of
from trunkwatch.api.models import AcknowledgedAlert, ApiError
from trunkwatch.app.acks import Acknowledged, AckRequest, acknowledge, acknowledged
from trunkwatch.domain.acks import VIA_API
from trunkwatch.domain.alerts import Links
from trunkwatch.domain.clock import format_time
from trunkwatch.silences.matchers import Matcher, SilenceError, parse_matchers
from trunkwatch.silences.model import MAX_COMMENT_LENGTH, MAX_CREATED_BY_LENGTH, MAX_MATCHERS
from trunkwatch.silences.postable import MatcherBody, Text

router = Router()


class PostableAck(BaseModel):
    """Who acknowledges the firing alerts that `matchers` (as a silence's) match, and why;
    `createdBy` defaults to the caller."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    matchers: list[MatcherBody] = Field(min_length=1, max_length=MAX_MATCHERS)
    created_by: Text | None = Field(None, alias="createdBy", min_length=1, max_length=MAX_CREATED_BY_LENGTH)
    comment: Text = Field("", max_length=MAX_COMMENT_LENGTH)


def acknowledged_alert(found: Acknowledged) -> AcknowledgedAlert:
    alert, ack = found.view.alert, found.ack
    return AcknowledgedAlert.model_validate(
        {
            "fingerprint": alert.fingerprint,
            "labels": dict(alert.labels),
            "startsAt": format_time(alert.starts_at),
            "acknowledgement": {
                "createdBy": ack.by,
                "comment": ack.comment,
                "at": format_time(ack.at),
                "via": ack.via,
            },
        }
    )


def _links() -> Links:
    return Links(external_url(), edge_of(router).settings.dashboard_url)


_FORBIDDEN: dict[int, OpenAPIResponse] = {
    403: {"description": "The token may only read", "content": {"application/json": {"model": ApiError}}}
}


@router.post(
    "/api/v2/acks",
    summary="Acknowledge the firing alerts the matchers match",
    description=(
        "Records who, when and a note for each matched firing alert that has no acknowledgement "
        "yet (the first stands); stops its reminders, never its resolution, and ends with its "
        "episode. Answers every matched alert with the acknowledgement it has now."
    ),
    responses={200: {"description": "The matched alerts, acknowledged"}, **_FORBIDDEN},
)
def post_acks(ack: Annotated[PostableAck, Body()]) -> list[AcknowledgedAlert]:
    who = ack.created_by or caller.principal(router.current_event)
    if not who:
        raise SilenceError("createdBy is required")
    matchers = tuple(Matcher(m.name, m.value, m.is_regex, m.is_equal) for m in ack.matchers)
    edge = edge_of(router)
    request = AckRequest(matchers, who, ack.comment, VIA_API)
    done = acknowledge(edge.storage(), edge.deployment(), request, edge.clock.now(), _links())
    return [acknowledged_alert(found) for found in done]


@router.get("/api/v2/acks", summary="The acknowledged firing alerts")
def get_acks(
    filters: Annotated[list[str] | None, Query(alias="filter", description="Label matchers")] = None,
) -> list[AcknowledgedAlert]:
    wanted = parse_matchers(filters or [])
    edge = edge_of(router)
    found = acknowledged(edge.storage(), edge.deployment(), edge.clock.now(), _links(), wanted)
    return [acknowledged_alert(item) for item in found]
