"""Stage 8, store: a complete, successful reply goes into the cache under the request's conversation.

The one condition for both streamed and whole replies: a 2xx whose every choice finished with `stop` and carries no
tool call, from a real upstream (placeholder replies are no answers), to a request not sent with
`Cache-Control: no-store`. A reply the upstream made with tool calls is never stored, also when the tool gate took
them all out: the gated reply (its "blocked tool call" note) was served to every repeat for the entry's lifetime,
so a false block stuck, without the upstream being asked again. A conversation too long to compare whole is stored
for exact repeats only.
"""

from __future__ import annotations

from typing import Any

from jevserve.gateway.context import RequestContext
from jevserve.gateway.runtime import Gateway


async def store_reply(
    gateway: Gateway, ctx: RequestContext, status: int, completion: dict[str, Any], *, placeholder: bool
) -> bool:
    """Store `completion` when it may be served again (see the module docstring); True when stored."""
    route = ctx.route
    report = ctx.report
    if gateway.cache is None or route.cache is None or not route.cache.enabled or not ctx.is_chat or placeholder:
        return False
    if "no-store" in ctx.cache_control:
        return False
    if report is None or report.cache_keys is None or not cacheable(status, completion) or ctx.reply_tool_calls:
        return False
    if report.final is not None and report.final.decision == "cache":
        return False  # a reply served from the cache is there already
    inputs = report.inputs
    await gateway.cache.put(
        ctx.tenant,
        inputs.cache_text if inputs is not None and inputs.cache_complete else None,
        completion,
        ttl_s=route.cache.ttl_s,
        max_entries=route.cache.max_entries,
        vector=report.cache_vector,
        keys=report.cache_keys,
    )
    ctx.stored = True
    return True


def cacheable(status: int, completion: dict[str, Any]) -> bool:
    """Only complete, successful, tool-free answers are stored: 2xx, every choice finished with `stop`."""
    choices = completion.get("choices") or []
    if not 200 <= status < 300 or not choices:
        return False
    return all(
        isinstance(c, dict) and c.get("finish_reason") == "stop" and not (c.get("message") or {}).get("tool_calls")
        for c in choices
    )
