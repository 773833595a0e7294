"""Stage 9, record: metrics and one decision-log line per request, written before the answer is sent."""

from __future__ import annotations

import time

from jevserve.gateway.context import RequestContext
from jevserve.gateway.runtime import Gateway


def record(gateway: Gateway, ctx: RequestContext, status: int) -> None:
    """Count the request's metrics and write its decision-log line."""
    metrics = gateway.metrics
    metrics.requests.labels(ctx.endpoint, ctx.model, str(status)).inc()
    total_ms = ctx.total_ms()
    metrics.overhead_ms.observe(ctx.overhead_ms())
    report = ctx.report
    if report is not None:
        metrics.decision_ms.observe(report.decision_ms)
        for v in (*report.verdicts, *ctx.tool_verdicts):
            metrics.decisions.labels(v.decision, str(v.action), str(v.mode), str(v.fell_back).lower()).inc()
    if gateway.log is None:
        return
    body = ctx.body
    gateway.log.write(
        {
            "request_id": ctx.request_id,
            # the id the upstream was sent, where it differs (a client's id with a suffix): vLLM logs this one
            **({"upstream_request_id": ctx.upstream_id} if ctx.upstream_id not in (None, ctx.request_id) else {}),
            "time": time.time(),
            "endpoint": ctx.endpoint,
            "tenant": ctx.tenant,  # a digest of the key, never the key
            "model": ctx.model,
            "messages": body.get("messages") or [{"role": "user", "content": body.get("prompt")}],
            "tools": body.get("tools"),
            "params": {k: v for k, v in body.items() if k not in ("messages", "prompt", "tools")},
            "decisions": report.to_dict() if report is not None else None,
            "tool_gate": [v.to_dict() for v in ctx.tool_verdicts],
            # the calls the gate judged, as the upstream made them (a log is then a tool-gate calibration file)
            "tool_calls": list(ctx.reply_tool_calls),
            "status": status,
            "stored": ctx.stored,
            "cache_control": sorted(ctx.cache_control),  # the client's no-cache / no-store (replay honours them)
            "upstream": ctx.outcome,
            "upstream_ms": ctx.upstream_ms,
            "total_ms": total_ms,
        }
    )
