"""The live decision demo: a typed request goes through the gateway's own decisions, without HTTP.

`LiveDemo.run(text, tenant=...)` calls `jevserve.gateway.decisions.run_decisions` with the gateway's config (its
documented default, or a YAML file) and the decider that config names, so the page shows exactly what `jevserve
gateway` would decide on that request: every verdict with its probability and threshold, the answers with their
options' names, and the decision call's time. The demo keeps a small in-memory semantic cache of the requests its
decisions let through (each stored with a placeholder answer, as the gateway stores an upstream's reply), so a
paraphrase of an earlier request is asked the reuse question, as a gateway with a warm cache would ask it. The cache
is kept per visitor (the tenant is derived from the visitor's session): only one's own earlier requests are ever
found in it, so no visitor can learn what another typed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

DEMO_TENANT = "web-live-demo"  # the tenant of a run not tied to a visitor (scripts, tests)
MAX_CACHED = 20  # one visitor's cache holds this many typed requests at most
MAX_VISITORS = 500  # visitors whose caches are kept; the least recently active one's is dropped beyond it
FINAL_WORDS = {  # the final verdict, worded as the page's other outcome ("pass it on") is
    "block": "block it",
    "clarify": "ask the user to clarify",
    "serve_cached": "serve the cached answer",
}

_ASKED: ContextVar[list | None] = ContextVar("live_asked", default=None)


@dataclass(frozen=True)
class LiveResult:
    """One request's decisions as the page shows them."""

    text: str
    route: str  # the gateway route (virtual model) whose policies ran
    verdicts: tuple[dict[str, Any], ...]  # Verdict.to_dict() of each decision, in the gateway's precedence order
    answers: dict[str, list[float]]  # question id → probabilities in option order
    decision_ms: float  # the one decision call, as the gateway measures it
    total_ms: float  # everything run_decisions did (cache lookup, policies), measured here
    num_questions: int
    header: str  # the x-jevserve-decisions header the gateway would send
    final: str | None  # the verdict that decides the request ("block", "clarify", "serve_cached"), if any
    error: str | None  # why the decider gave no answer (then each policy took its fallback)
    options: dict[str, list[str]] = field(default_factory=dict)  # question id → its options' names, in order

    @property
    def final_words(self) -> str:
        """What the gateway does with the request, in words."""
        return FINAL_WORDS.get(self.final, self.final) if self.final else "pass it on"


class VisitorCaches:
    """A gateway cache store (CacheStore) that keeps one small in-memory store per tenant, at most MAX_VISITORS
    tenants, dropping the least recently used one: each visitor's tenant holds only that visitor's requests, and
    memory stays bounded however many visitors come."""

    def __init__(self, max_tenants: int = MAX_VISITORS) -> None:
        self.max_tenants = max_tenants
        self._stores: OrderedDict[str, Any] = OrderedDict()

    def _store(self, tenant: str) -> Any:
        from jevserve.gateway.cache import MemoryCacheStore

        store = self._stores.pop(tenant, None) or MemoryCacheStore()
        self._stores[tenant] = store
        while len(self._stores) > self.max_tenants:
            self._stores.popitem(last=False)
        return store

    async def add(self, tenant: str, entry: Any, max_entries: int, now: float) -> None:
        """See jevserve.gateway.cache.CacheStore.add."""
        await self._store(tenant).add(tenant, entry, max_entries, now)

    async def index(self, tenant: str) -> Any:
        """See jevserve.gateway.cache.CacheStore.index."""
        return await self._store(tenant).index(tenant)


class _Recording:
    """The decider, noting the questions each run asks (per task, through a context variable), so the page can name
    each answer's options. One per demo: the gateway resolves operating points once per decider object."""

    def __init__(self, decider: Any) -> None:
        self._decider = decider

    async def decide(self, asks: Sequence[Any]) -> Any:
        asked = _ASKED.get()
        if asked is not None:
            asked.extend(asks)
        return await self._decider.decide(asks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._decider, name)


class LiveDemo:
    """The gateway's decisions for typed requests (see the module doc); one per app."""

    def __init__(self, decider: Any, config: Any = None, cache: Any = None, route: str | None = None) -> None:
        from jevserve.gateway.config import default_config

        self.decider = _Recording(decider)
        self.config = config if config is not None else default_config()
        self.cache = cache  # a gateway SemanticCache, or None (then the cache decision has nothing to compare)
        self.route = route
        self._prepare_lock = threading.Lock()
        self._preparer: threading.Thread | None = None

    def prepare(self) -> Any:
        """The config with its rates turned into thresholds for the decider (blocking). Instant where the scores are
        packaged or cached; a decider none match scores the gateway's calibration requests first, minutes on two
        cores, which the first visitor's request ran on the event loop, holding every page, /healthz included."""
        from jevserve.gateway.decisions import resolved

        with self._prepare_lock:
            return resolved(self.config, self.decider)

    def start_preparing(self) -> None:
        """Run `prepare` in a thread of its own, so the site answers while the thresholds are set (`preparing`)."""
        if self._preparer is None:
            self._preparer = threading.Thread(target=self.prepare, name="live-thresholds", daemon=True)
            self._preparer.start()

    @property
    def preparing(self) -> bool:
        """Whether `start_preparing`'s thread is still setting the thresholds."""
        return self._preparer is not None and self._preparer.is_alive()

    @property
    def routes(self) -> list[str]:
        """The config's route names (virtual models)."""
        return [r.model for r in self.config.routes]

    async def run(self, text: str, route: str | None = None, tenant: str = DEMO_TENANT) -> LiveResult:
        """Run the route's decisions on a one-message chat request, with `tenant`'s cache (one per visitor)."""
        from jevserve.gateway.conversation import cache_key_text
        from jevserve.gateway.decisions import resolve_route, run_decisions

        messages = [{"role": "user", "content": text}]
        model = route or self.route
        # off the event loop, as it may score (see prepare), and before the questions asked are noted
        config = await asyncio.to_thread(self.prepare)
        asked: list[Any] = []
        token = _ASKED.set(asked)
        started = time.perf_counter()
        try:
            report = await run_decisions(messages, config=config, decider=self.decider, model=model,
                                         cache=self.cache, tenant=tenant)
        finally:
            _ASKED.reset(token)
        total_ms = (time.perf_counter() - started) * 1000.0
        resolved = resolve_route(config, model)
        cache_policy = resolved.cache
        # the gateway stores only an upstream's reply: a request blocked, asked to clarify or served from the cache
        # never reaches one, so the demo stores only a request its decisions let through
        forwarded = report.final is None
        if self.cache is not None and cache_policy is not None and cache_policy.enabled and forwarded:
            await self.cache.put(tenant, cache_key_text(messages), {"placeholder": True},
                                 ttl_s=cache_policy.ttl_s, max_entries=MAX_CACHED, vector=report.cache_vector)
        return LiveResult(
            text=text, route=report.route, verdicts=tuple(v.to_dict() for v in report.verdicts),
            answers={k: list(v) for k, v in report.answers.items()}, decision_ms=report.decision_ms,
            total_ms=total_ms, num_questions=report.num_questions,
            header=report.header(resolved.client_details == "scores"),
            final=report.final.action if report.final else None, error=report.error,
            options={a.question_id: [o.label for o in a.question.options] for a in asked},
        )


def live_demo(endpoint: Any, config: Any) -> LiveDemo:
    """The demo `jevserve web` runs: the gateway config's decider in process for `embedded`, else the endpoint."""
    from jevserve.gateway.cache import SemanticCache, embedded_embed
    from jevserve.gateway.decider import RemoteDecider, decider_for

    if endpoint.label == "embedded":
        decider = decider_for(config)  # what `jevserve gateway` with this config would ask
    else:
        decider = RemoteDecider(endpoint.base_url, api_key=endpoint.api_key, model=endpoint.model)
    return LiveDemo(decider, config, SemanticCache(embedded_embed(), VisitorCaches()))
