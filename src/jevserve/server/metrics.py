"""Prometheus metrics of the decision server, in a registry of its own (several apps can live in one process)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS_S = (0.002, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class ServerMetrics:
    """Counters and histograms for requests, questions, batches, queue depth and errors."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "jevserve_requests", "HTTP requests by route and status", ["route", "status"], registry=self.registry
        )
        self.questions = Counter("jevserve_questions", "Questions answered, by type", ["type"], registry=self.registry)
        self.latency = Histogram(
            "jevserve_request_latency_seconds",
            "Time from request received to response ready (POST /v1/systemone)",
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "jevserve_batch_size",
            "Questions per backend forward batch",
            ["model"],
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.batch_seconds = Histogram(
            "jevserve_batch_seconds",
            "Backend time per batch",
            ["model"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.errors = Counter(
            "jevserve_errors", "Error responses by error type", ["error_type"], registry=self.registry
        )
        self.queue_depth = Gauge(
            "jevserve_queue_depth", "Questions waiting for a batch", ["model"], registry=self.registry
        )
        self.running = Gauge(
            "jevserve_batch_running", "Questions in the batch being answered", ["model"], registry=self.registry
        )
        self.disconnects = Counter(
            "jevserve_client_disconnects", "Requests whose client left before the answer", registry=self.registry
        )

    def watch_queue(self, model: str, depth: Callable[[], int], running: Callable[[], int] | None = None) -> None:
        """Report a batcher's queue depth (and the questions of its batch under way) at scrape time."""
        self.queue_depth.labels(model=model).set_function(depth)
        if running is not None:
            self.running.labels(model=model).set_function(running)

    def batch_observer(self, model: str) -> Callable[[int, float], None]:
        """A callback for the batcher that records each batch's size and duration."""
        size = self.batch_size.labels(model=model)
        seconds = self.batch_seconds.labels(model=model)

        def observe(num_items: int, elapsed_s: float) -> None:
            size.observe(num_items)
            seconds.observe(elapsed_s)

        return observe

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
