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
    prompt of token ids or a batch of prompts on a route whose decisions read the prompt (they read one text: passed
    on, token ids went undecided and a batch's prompts were judged as one)."""
    ctx.route = resolve_route(gateway.config, ctx.body["model"])
    if ctx.is_chat:
        return
    prompt = ctx.body.get("prompt")
    if token_id_prompt(ctx.body):
        shape, why = "as token ids", "read text, not token ids; send the prompt as text (a string)"
    elif isinstance(prompt, list) and len(prompt) > 1:
        # a model server completes each prompt of a batch alone, while the decisions read the batch as one text, in
        # which a harmless prompt diluted an injection beside it (an outside red-teamer's: it went upstream)
        shape = f"as a batch of {len(prompt)} prompts"
        why = "judge one request at a time; send each prompt as its own request"
    else:
        return
    reading = sorted({p.name for p in policies_for(ctx.route) if p.phase is Phase.REQUEST})
    if reading:
        raise BadRequestError(f"'prompt' {shape} is refused on {ctx.route.model}: its decisions "
                              f"({', '.join(reading)}) {why}, or use a route with no decisions", param="prompt")
