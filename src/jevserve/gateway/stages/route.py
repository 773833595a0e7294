"""Stage 2, route: the request's `model` → the route (virtual model) whose upstreams and policies apply (404)."""

from __future__ import annotations

from jevserve.gateway.context import RequestContext
from jevserve.gateway.decisions import policies_for, resolve_route
from jevserve.gateway.errors import BadRequestError
from jevserve.gateway.runtime import Gateway
from jevserve.gateway.stages.read import token_id_prompt
from jevserve.gateway.types import Phase


def select_route(gateway: Gateway, ctx: RequestContext) -> None:
    """Set `ctx.route`; raises UnknownModelError naming the models this gateway serves, and BadRequestError for a
    prompt of token ids on a route whose decisions read the prompt (they read text: passed on, it went undecided)."""
    ctx.route = resolve_route(gateway.config, ctx.body["model"])
    if not ctx.is_chat and token_id_prompt(ctx.body):
        reading = sorted({p.name for p in policies_for(ctx.route) if p.phase is Phase.REQUEST})
        if reading:
            raise BadRequestError(
                f"'prompt' as token ids is refused on {ctx.route.model}: its decisions ({', '.join(reading)}) read "
                "text, not token ids; send the prompt as text (a string or an array of strings), or use a route "
                "with no decisions", param="prompt")
