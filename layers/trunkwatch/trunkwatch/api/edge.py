"""The API function's edge (`app/settings.Edge`), handed to the routes with each request:
the handler puts it in the resolver's context, every route reads it from there."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from trunkwatch.app.settings import Edge

CONTEXT_KEY = "edge"


def edge_of(router: Router) -> Edge:
    edge = router.context.get(CONTEXT_KEY)
    if not isinstance(edge, Edge):
        raise RuntimeError("the API handler did not hand the routes its edge (resolver.append_context)")
    return edge
