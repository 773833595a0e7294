"""Stage 3, limit: the route's token bucket per tenant (429 with Retry-After when it is empty)."""

from __future__ import annotations

from jevserve.gateway.context import RequestContext
from jevserve.gateway.errors import RateLimitedError
from jevserve.gateway.runtime import Gateway


async def limit(gateway: Gateway, ctx: RequestContext) -> None:
    """Take one token for the tenant on this route; raises RateLimitedError when none is left."""
    rate = ctx.route.rate_limit
    if rate is None:
        return
    wait_s = await gateway.store.take_token(f"rate:{ctx.route.model}:{ctx.tenant}", rate.requests_per_s, rate.burst)
    if wait_s > 0:
        raise RateLimitedError(f"rate limit of {rate.requests_per_s}/s for this key", retry_after_s=wait_s)
