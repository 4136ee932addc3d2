"""`/api/v2/silences` and `/api/v2/silence/{id}`: Alertmanager's silence endpoints.

A silence whose comment starts with `ACK!` (karma's convention) acknowledges the firing
alerts it matches, from when it is posted (`app/acks.py`; the notifier goes on while it is
active), and holds nothing back: it is kept and listed like any silence, for amtool and the
audit trail.

The function's storage (PynamoDB, and botocore with it) is built by the first route that
reads or writes the table (`edge_of(router).storage()`): the status page and its files, which
this function serves too, never need it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from trunkwatch.api import caller
from trunkwatch.api.edge import edge_of
from trunkwatch.api.models import ApiError, GettableSilence, SilenceCreated
from trunkwatch.domain.acks import is_ack_comment, note_of
from trunkwatch.domain.alerts import Links
from trunkwatch.silences import store
from trunkwatch.silences.matchers import Matcher, parse_matchers
from trunkwatch.silences.model import sort_for_listing
from trunkwatch.silences.postable import PostableSilence

if TYPE_CHECKING:
    from trunkwatch.storage.port import Silences

router = Router()


def _silences() -> Silences:
    """The silences of the function's storage."""
    return edge_of(router).storage().silences


def _now() -> datetime:
    """The time on the function's clock."""
    return edge_of(router).clock.now()


_FORBIDDEN: dict[int, OpenAPIResponse] = {
    403: {"description": "The token may only read", "content": {"application/json": {"model": ApiError}}}
}
_NOT_FOUND: dict[int, OpenAPIResponse] = {
    404: {"description": "No such silence", "content": {"application/json": {"model": ApiError}}}
}


@router.post(
    "/api/v2/silences",
    summary="Create or update a silence",
    responses={200: {"description": "The id of the silence now in effect"}, **_FORBIDDEN, **_NOT_FOUND},
)
def post_silence(silence: Annotated[PostableSilence, Body()]) -> SilenceCreated:
    principal = caller.principal(router.current_event)
    now = _now()
    silence_id = store.upsert(_silences(), silence, principal, now)
    if is_ack_comment(silence.comment):
        _acknowledge(silence, silence_id, silence.created_by or principal or "", now)
    return SilenceCreated(silenceID=silence_id)


def _acknowledge(silence: PostableSilence, silence_id: str, who: str, now: datetime) -> None:
    from trunkwatch.api.alerts import external_url
    from trunkwatch.app.acks import AckRequest, acknowledge

    edge = edge_of(router)
    matchers = tuple(Matcher(m.name, m.value, m.is_regex, m.is_equal) for m in silence.matchers)
    request = AckRequest(matchers, who, note_of(silence.comment), f"silence {silence_id}")
    acknowledge(
        edge.storage(), edge.deployment(), request, now, Links(external_url(), edge.settings.dashboard_url)
    )


@router.get("/api/v2/silences", summary="List silences")
def get_silences(
    filters: Annotated[
        list[str] | None,
        Query(alias="filter", description='Matchers like job=~"pull / .*"; a silence must have each one'),
    ] = None,
) -> list[GettableSilence]:
    wanted = parse_matchers(filters or [])
    now = _now()
    # Alertmanager's silence filter: each filter is one of the silence's own matchers
    # (same name, operator and value), not a label set the silence would match.
    found = [s for s in store.list_silences(_silences(), now) if all(m in s.matchers for m in wanted)]
    return [GettableSilence.model_validate(s.to_api(now)) for s in sort_for_listing(found, now)]


@router.get(
    "/api/v2/silence/<silence_id>",
    summary="Get one silence",
    responses={200: {"description": "The silence"}, **_NOT_FOUND},
)
def get_silence(silence_id: str) -> GettableSilence:
    now = _now()
    return GettableSilence.model_validate(store.get(_silences(), silence_id, now).to_api(now))


@router.delete(
    "/api/v2/silence/<silence_id>",
    summary="Expire a silence (endsAt = now)",
    responses={200: {"description": "Expired", "content": {}}, **_FORBIDDEN, **_NOT_FOUND},
)
def delete_silence(silence_id: str) -> Response[str]:
    store.expire(_silences(), silence_id, caller.principal(router.current_event), _now())
    # Alertmanager answers an empty 200.
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body="")
