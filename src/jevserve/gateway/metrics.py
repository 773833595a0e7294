"""Prometheus metrics of the gateway, in a registry of its own (several apps can live in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

MS_BUCKETS = (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000)


class GatewayMetrics:
    """Requests by route and status, decisions by action, decision time, gateway overhead, upstream attempts."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "jevserve_gateway_requests",
            "Requests by endpoint, virtual model and status",
            ["endpoint", "model", "status"],
            registry=self.registry,
        )
        self.decisions = Counter(
            "jevserve_gateway_decisions",
            "Verdicts by decision and action (fell_back: the backend gave no answer)",
            ["decision", "action", "fell_back"],
            registry=self.registry,
        )
        self.decision_ms = Histogram(
            "jevserve_gateway_decision_ms",
            "Time of the one decision call per request, ms",
            buckets=MS_BUCKETS,
            registry=self.registry,
        )
        self.overhead_ms = Histogram(
            "jevserve_gateway_overhead_ms",
            "Time the gateway added to a request (all but the upstream's), ms",
            buckets=MS_BUCKETS,
            registry=self.registry,
        )
        self.upstream_attempts = Counter(
            "jevserve_gateway_upstream_attempts",
            "Upstream tries by upstream and outcome",
            ["upstream", "outcome"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
