"""`GET /api/v2/trunks` (every trunk with its health, broken first) and a trunk's grid and
30-day history (`/api/v2/trunks/grid`, `/api/v2/trunks/history`, `?trunk=<repo>#<branch>`):
what the status page draws, as JSON (`app/health.py` builds it)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from trunkwatch.api.edge import edge_of
from trunkwatch.app import health

router = Router()

_Trunk = Annotated[
    str, Query(description="The trunk's id, `<owner>/<repo>#<branch>`, as GET /api/v2/trunks lists it")
]


@router.get("/api/v2/trunks", summary="Every configured trunk with its health, broken ones first")
def get_trunks() -> list[dict[str, Any]]:
    edge = edge_of(router)
    return health.trunks(edge.storage(), edge.deployment(), edge.clock.now())


@router.get("/api/v2/trunks/grid", summary="A trunk's recent commits by its failing and recently failed jobs")
def get_grid(trunk: _Trunk) -> dict[str, Any]:
    edge = edge_of(router)
    return health.grid(edge.storage(), edge.deployment(), trunk)


@router.get("/api/v2/trunks/history", summary="A trunk's last 30 days: hours broken, episodes, pages")
def get_history(trunk: _Trunk) -> dict[str, Any]:
    edge = edge_of(router)
    return health.trunk_history(edge.storage(), edge.deployment(), trunk, edge.clock.now())
