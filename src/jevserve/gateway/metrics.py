"""Prometheus metrics of the gateway, in a registry of its own (several apps can live in one process).

Every label takes values from a bounded set: endpoints, the config's routes and upstreams, decisions, actions and
modes, HTTP statuses, and attempt outcomes such as `http_503` or `connect_error`; never a message, a client-chosen
string or a host:port.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

MS_BUCKETS = (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, 120000)


class GatewayMetrics:
    """Requests, verdicts, decision and upstream latency, overhead, upstream attempts, circuits and queues."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "jevserve_gateway_requests",
            "Requests by endpoint, virtual model (route) and status",
            ["endpoint", "model", "status"],
            registry=self.registry,
        )
        self.decisions = Counter(
            "jevserve_gateway_decisions",
            "Verdicts by decision, action and mode (shadow: reported, not acted on); fell_back: no answer came",
            ["decision", "action", "mode", "fell_back"],
            registry=self.registry,
        )
        self.decision_ms = Histogram(
            "jevserve_gateway_decision_ms",
            "Time of the one decision call per request, ms",
            buckets=MS_BUCKETS,
            registry=self.registry,
        )
        self.upstream_ms = Histogram(
            "jevserve_gateway_upstream_ms",
            "Time from sending to the upstream's whole reply (to its first byte for a stream), ms",
            ["upstream"],
            buckets=MS_BUCKETS,
            registry=self.registry,
        )
        self.overhead_ms = Histogram(
            "jevserve_gateway_overhead_ms",
            "Time the gateway added to a request (all but the upstream's), ms",
            buckets=MS_BUCKETS,
            registry=self.registry,
        )
        self.failed_open = Counter(
            "jevserve_gateway_failed_open",
            "Requests forwarded undecided: the ext_proc server's decisions failed or ran past --deadline-ms "
            "(--failure open)",
            registry=self.registry,
        )
        self.upstream_attempts = Counter(
            "jevserve_gateway_upstream_attempts",
            "Upstream tries by upstream and outcome (http_<status>, connect_error, read_timeout, circuit_open, ...)",
            ["upstream", "outcome"],
            registry=self.registry,
        )
        self.circuit_open = Gauge(
            "jevserve_gateway_circuit_open",
            "1 while the upstream's circuit breaker is open, else 0",
            ["upstream"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "jevserve_gateway_queue_depth",
            "Requests waiting in the gateway's queue for an upstream slot",
            ["upstream"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "jevserve_gateway_in_flight",
            "Requests being answered by the upstream (across replicas with a Redis store)",
            ["upstream"],
            registry=self.registry,
        )
        self.log_records_lost = Gauge(
            "jevserve_gateway_log_records_lost",
            "Decision-log records a write failed for (a full disk, a read-only folder); their requests were answered",
            registry=self.registry,
        )

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
