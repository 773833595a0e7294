"""Everything one gateway process holds: config, decider, store, cache, upstreams, metrics and the log."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from jevserve.gateway.cache import Embed, SemanticCache, embedded_embed
from jevserve.gateway.config import PLACEHOLDER_URL, REDIS_SCHEMES, GatewayConfig, RouteConfig, UpstreamConfig
from jevserve.gateway.decider import Decider
from jevserve.gateway.decisions import request_policies
from jevserve.gateway.log import DecisionLog
from jevserve.gateway.metrics import GatewayMetrics
from jevserve.gateway.operating_points import OperatingPoint, Progress, resolve_operating_points
from jevserve.gateway.policies.base import RequestView
from jevserve.gateway.store import MemoryStore, Store
from jevserve.gateway.upstream import Upstream
from jevserve.serving.decision_inputs import decision_inputs

PLACEHOLDER_NAME = "placeholder"
WARM_UP_REQUEST = {"messages": [{"role": "user", "content": "Can you suggest a name for my cat?"}]}
# The first timed batch (Batcher.warm_up): the same questions about an ordinary message of about 1,000 characters,
# so that the first requests are judged against a batch of the kind they bring, not admitted unestimated
TIMED_WARM_UP_REQUEST = {"messages": [{"role": "user", "content": (
    "I'm planning a small vegetable garden in my back yard this spring and could use some help getting started. "
    "The space is about four metres by three, it gets sun from late morning until evening, and the soil is heavy "
    "clay that stays wet for days after rain. I'd like to grow tomatoes, courgettes, a few kinds of lettuce, some "
    "herbs like basil and parsley, and maybe beans if there is room. My questions: should I build raised beds or "
    "improve the clay where it is, and what would I mix in? How should I lay out the beds so the tall plants do "
    "not shade the short ones? Which of these can go in the ground in April and which should wait until the "
    "nights are warmer? I work during the week, so I can water in the evenings and spend a few hours on weekends; "
    "is that enough, or should I set up drip irrigation from the start? A rough budget for the first year would "
    "help too, and anything beginners usually get wrong that I could avoid."
)}]}


@dataclass
class Gateway:
    """The gateway's parts; built once by `build_gateway`, closed by `aclose`."""

    config: GatewayConfig
    decider: Decider
    store: Store
    upstreams: dict[str, Upstream]
    cache: SemanticCache | None
    metrics: GatewayMetrics = field(default_factory=GatewayMetrics)
    log: DecisionLog | None = None
    operating_points: tuple[OperatingPoint, ...] = ()  # every thresholded decision's threshold and its origin
    started_at: int = field(default_factory=lambda: int(time.time()))  # `created` in the model list

    def upstreams_for(self, route: RouteConfig, names: list[str] | None = None) -> list[Upstream]:
        """The upstreams to try for `route`, in fallback order (`names` overrides the route's list)."""
        chosen = names or route.upstreams or list(self.upstreams)
        return [self.upstreams[n] for n in chosen]

    async def warm_up(self) -> None:
        """Before the first request, ask the decider every question the routes ask of a request, about a short one,
        then time the same questions about an ordinary 1,000-character message (Batcher.warm_up): a local model pays
        its one-off start and each question's first encoding here, not in the first requests' time, and the first
        requests are admitted against a warm, timed estimate."""
        await self.decider.warm_up(self._request_asks(WARM_UP_REQUEST), self._request_asks(TIMED_WARM_UP_REQUEST))

    def _request_asks(self, body: Mapping) -> list:
        """What every route's request policies ask about `body`."""
        asks = []
        for route in self.config.routes:
            view = RequestView(decision_inputs(body, limits=route.input_limits()))
            for policy in request_policies(route):
                asks.extend(policy.asks(view))
        return asks

    async def aclose(self) -> None:
        """Close clients, the store and the log (the log last, after everything was written)."""
        for upstream in self.upstreams.values():
            await upstream.aclose()
        await self.decider.aclose()
        await self.store.aclose()
        if self.cache is not None:
            self.cache.close()
        if self.log is not None:
            self.log.close()


def open_store(spec: str) -> Store:
    """`memory` (default) or `redis://host:port/db`."""
    if spec in ("", "memory"):
        return MemoryStore()
    if spec.startswith(REDIS_SCHEMES):
        from jevserve.gateway.store_redis import RedisStore, check_reachable

        # at start, not on the first request: a store that is down would fail every request's decisions (open)
        check_reachable(spec)
        return RedisStore(spec)
    raise ValueError(f"unknown store {spec!r}; expected 'memory' or a redis://host:port/db URL")


def _queue_settings(config: GatewayConfig, upstream: str) -> tuple[str, float | None]:
    # An upstream's gate orders by the queue policy of the first route using it that sets one.
    for route in config.routes:
        uses = not route.upstreams or upstream in route.upstreams
        if uses and route.priority is not None and route.priority.enabled:
            return route.priority.queue_policy, route.priority.aging_s
    return "fcfs", None


def build_gateway(
    config: GatewayConfig,
    decider: Decider,
    *,
    store: Store | None = None,
    transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
    embed: Embed | None = None,
    progress: Progress | None = None,
) -> Gateway:
    """Wire up a gateway; `transports` replaces upstreams' network by name (tests), `embed` the cache's encoder.
    Rate-based operating points are resolved to thresholds first (scored once per decider, then cached)."""
    # the cache's encoder first: an install that lacks it fails in a second, not after the calibration's minutes
    cache_embed = None
    if any(r.cache is not None and r.cache.enabled for r in config.routes):
        cache_embed = embed or embedded_embed()
    config, points = resolve_operating_points(config, decider, progress=progress)
    store = store or open_store(config.store)
    upstream_configs = list(config.upstreams) or [UpstreamConfig(name=PLACEHOLDER_NAME, url=PLACEHOLDER_URL)]
    transports = transports or {}
    upstreams = {}
    for upstream_config in upstream_configs:
        policy, aging_s = _queue_settings(config, upstream_config.name)
        upstreams[upstream_config.name] = Upstream(
            upstream_config,
            store,
            queue_policy=policy,
            aging_s=aging_s,
            transport=transports.get(upstream_config.name),
        )
    cache = None if cache_embed is None else SemanticCache(cache_embed, store.cache)
    log = None
    if config.log.path:
        log = DecisionLog(config.log.path, max_bytes=config.log.max_bytes, backups=config.log.backups)
    return Gateway(config, decider, store, upstreams, cache, log=log, operating_points=points)
