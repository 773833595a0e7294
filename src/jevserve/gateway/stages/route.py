"""Stage 2, route: the request's `model` → the route (virtual model) whose upstreams and policies apply (404)."""

from __future__ import annotations

from jevserve.gateway.context import RequestContext
from jevserve.gateway.decisions import resolve_route
from jevserve.gateway.runtime import Gateway


def select_route(gateway: Gateway, ctx: RequestContext) -> None:
    """Set `ctx.route`; raises UnknownModelError naming the models this gateway serves."""
    ctx.route = resolve_route(gateway.config, ctx.body["model"])
