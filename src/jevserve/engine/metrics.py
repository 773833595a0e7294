"""The live engine's Prometheus metrics, with vLLM's names and labels, so dashboards and routers that read a vLLM
server's `/metrics` read this engine's too (vLLM's `vllm/v1/metrics/loggers.py`).

Gauges and the generation token counter are read from the engine when scraped (the counter moves as each step
samples tokens, as vLLM's does); the prompt token counter and time to first token are recorded at a request's
first token, so a request whose client leaves later is counted; the other latencies (time per output token after
the first, end to end, time in the queue) and the success counter when a request finishes. Times are engine
seconds.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily

from jevserve.engine.core import LiveEngine
from jevserve.engine.requests import LiveRequest

# vLLM's buckets for these histograms
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0)


class EngineMetrics:
    """The metrics of one live engine, in a registry of their own."""

    def __init__(self, engine: LiveEngine, model_name: str) -> None:
        self.registry = CollectorRegistry()
        labels = {"model_name": model_name, "engine": "0"}
        names = list(labels)

        def gauge(name: str, doc: str, read) -> None:
            Gauge(name, doc, names, registry=self.registry).labels(**labels).set_function(read)

        gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
              lambda: engine.num_running)
        gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
              lambda: engine.num_waiting)
        gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", engine.kv_cache_usage)
        config = engine.config
        info = Gauge("vllm:cache_config_info", "Information of the KV cache configuration.",
                     ["block_size", "num_gpu_blocks", "enable_prefix_caching", "cache_dtype"], registry=self.registry)
        info.labels(block_size=str(config.block_size), num_gpu_blocks=str(engine.num_total_blocks),
                    enable_prefix_caching=str(config.prefix_caching), cache_dtype="auto").set(1)
        gauge("jevserve:engine_lag_seconds", "Engine time the last step started after it was due (host too slow).",
              lambda: engine.lag_s)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              names, buckets=TTFT_BUCKETS, registry=self.registry).labels(**labels)
        self.tpot = Histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                              names, buckets=TPOT_BUCKETS, registry=self.registry).labels(**labels)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                             names, buckets=LATENCY_BUCKETS, registry=self.registry).labels(**labels)
        self.queue = Histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase.",
                               names, buckets=LATENCY_BUCKETS, registry=self.registry).labels(**labels)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", names,
                                     registry=self.registry).labels(**labels)
        # read from the engine when scraped: it counts tokens as each step samples them, as vLLM's counter moves
        self.registry.register(_GenerationTokens(engine, labels))
        self.preemptions = Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", names,
                                   registry=self.registry).labels(**labels)
        self.success = Counter("vllm:request_success", "Count of successfully processed requests.",
                               [*names, "finished_reason"], registry=self.registry)
        self._labels = labels
        engine.observers.append(self.observe)

    def observe(self, event: str, request: LiveRequest) -> None:
        """Record a request's first token (its prompt is processed), its finish, or a preemption."""
        if event == "preempt":
            self.preemptions.inc()
            return
        if event == "first_token":  # counted when it happens, so a request dropped later is counted too
            self.ttft.observe(request.first_token_s - request.arrival_s)
            self.prompt_tokens.inc(request.spec.num_prompt_tokens)
            return
        self.e2e.observe(request.finish_s - request.arrival_s)
        self.queue.observe(request.first_admit_s - request.arrival_s)
        if request.num_generated > 1:
            self.tpot.observe((request.finish_s - request.first_token_s) / (request.num_generated - 1))
        self.success.labels(**self._labels, finished_reason=request.finish_reason).inc()

    def render(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)


class _GenerationTokens:
    """`vllm:generation_tokens_total`, read from the engine's count of sampled tokens when scraped."""

    def __init__(self, engine: LiveEngine, labels: dict[str, str]) -> None:
        self.engine, self.labels = engine, labels

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily("vllm:generation_tokens", "Number of generation tokens processed.",
                                     labels=list(self.labels))
        family.add_metric(list(self.labels.values()), self.engine.num_generation_tokens)
        yield family
