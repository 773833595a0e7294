"""`jevserve extproc --metrics-port`: the gateway's Prometheus metrics and a health line over plain HTTP.

The ext_proc server speaks only gRPC; Prometheus scrapes HTTP. This side server answers `GET /metrics` (the same
metrics `jevserve gateway` serves: requests by status, verdicts, decision time) and `GET /healthz`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from jevserve.gateway.metrics import GatewayMetrics

CONTENT_TYPE = "text/plain; version=0.0.4"


def metrics_app(
    metrics: GatewayMetrics, ready: Callable[[], bool], problem: Callable[[], str | None] = lambda: None,
    details: Callable[[], dict[str, Any]] = dict,
) -> web.Application:
    """`/metrics` and `/healthz` (200 while the ext_proc server is ready, "degraded" with `decider_problem` while
    its decider fails, as the HTTP gateway's; 503 while it drains); `details` adds what the HTTP gateway's names
    beside it (the decider, the store's state)."""

    async def scrape(request: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def health(request: web.Request) -> web.Response:
        if not ready():
            return web.json_response({"status": "draining"}, status=503)
        failing = problem()
        state = {"status": "degraded", "decider_problem": failing} if failing else {"status": "ok"}
        return web.json_response({**state, **details()})

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/healthz", health)
    return app


async def start_metrics(
    metrics: GatewayMetrics, ready: Callable[[], bool], host: str, port: int,
    problem: Callable[[], str | None] = lambda: None, details: Callable[[], dict[str, Any]] = dict,
) -> web.AppRunner:
    """Serve `metrics_app` on host:port; the returned runner's `cleanup()` stops it."""
    runner = web.AppRunner(metrics_app(metrics, ready, problem, details), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
