"""Run a route's decisions on one request, without HTTP: the gateway's core, and the entry point for demos.

    report = await run_decisions(messages, config=config, decider=make_decider("embedded"))
    report.verdict("guard").action        # "block" / "allow" / ...
    report.answers["guard"]               # (P(yes), P(no))
    report.decision_ms                    # time spent in the one decision call

`run_decisions` (and its blocking twin `run_decisions_sync`) take the chat messages (OpenAI shape), the gateway
config (or one route of it), a decider and optionally the request's tools, and return a frozen `DecisionReport`.
Their signatures are stable: the web demo calls them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from jevserve.gateway.cache import SemanticCache
from jevserve.gateway.config import GatewayConfig, RouteConfig, default_config
from jevserve.gateway.decider import Decider, timed_decide
from jevserve.gateway.errors import UnknownModelError
from jevserve.gateway.policies.base import Policy, RequestView, Verdict
from jevserve.gateway.policies.build import build_policies
from jevserve.serving.decision_inputs import DEFAULT_LIMITS, DecisionInputs, InputLimits, decision_inputs

DEFAULT_TENANT = "default"


@dataclass(frozen=True)
class DecisionReport:
    """Every decision of one request: answers, verdicts and the time the decision call took."""

    route: str  # the virtual model whose policies ran
    verdicts: tuple[Verdict, ...]  # in order of precedence (guard, harm, clarify, cache, route, priority)
    answers: Mapping[str, tuple[float, ...]]  # question id → probabilities in option order (empty on fallback)
    decision_ms: float  # wall time of the decision call (0 when no question was asked)
    num_questions: int  # questions in the decision call
    error: str | None = None  # why the decision backend gave no answer (then every verdict fell back)
    state: str = ""  # the request text the request-level questions read (DecisionInputs.request_text)
    cache_vector: Any = field(default=None, repr=False, compare=False)  # the request's embedding, for storing
    cached_response: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)  # served on a hit
    inputs: DecisionInputs | None = field(default=None, repr=False, compare=False)  # the texts the decisions read

    def verdict(self, decision: str) -> Verdict | None:
        """The verdict of `decision` (guard, harm, clarify, cache, route, priority), or None when it did not run."""
        return next((v for v in self.verdicts if v.decision == decision), None)

    @property
    def final(self) -> Verdict | None:
        """The verdict that decides what happens to the request (a block, a clarification or a cache hit)."""
        for v in self.verdicts:
            if v.action in ("block", "clarify", "serve_cached"):
                return v
        return None

    def header(self) -> str:
        """The `x-jevserve-decisions` header: `decision=action[:probability]` joined by commas."""
        parts = []
        for v in self.verdicts:
            if v.action == "skip" and v.decision == "tool_gate":
                continue
            p = "" if v.probability is None else f":{v.probability:.3f}"
            parts.append(f"{v.decision}={v.action}{p}{'!fallback' if v.fell_back else ''}")
        return ",".join(parts) or "none"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, for logs and demo pages."""
        return {
            "route": self.route,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "answers": {k: list(v) for k, v in self.answers.items()},
            "decision_ms": self.decision_ms,
            "num_questions": self.num_questions,
            "error": self.error,
        }


_POLICY_CACHE: dict[int, tuple[RouteConfig, tuple[Policy, ...]]] = {}


def policies_for(route: RouteConfig) -> tuple[Policy, ...]:
    """The route's policies, built once per route object."""
    hit = _POLICY_CACHE.get(id(route))
    if hit is None or hit[0] is not route:
        hit = (route, build_policies(route))
        _POLICY_CACHE[id(route)] = hit
    return hit[1]


def input_limits(route: RouteConfig) -> InputLimits:
    """The decision-input bounds of `route`: its guard's scan settings, the defaults for everything else."""
    guard = route.guard
    if guard is None:
        return DEFAULT_LIMITS
    return InputLimits(
        min_window_chars=guard.min_window_chars,
        window_chars=guard.window_chars,
        max_windows=guard.max_windows,
        judge_system=guard.judge_system_prompt,
    )


def resolve_route(config: GatewayConfig | RouteConfig, model: str | None) -> RouteConfig:
    """The route for `model` (None: the first route); raises UnknownModelError naming the declared models."""
    if isinstance(config, RouteConfig):
        return config
    if model is None:
        if not config.routes:
            return RouteConfig(model="default")
        return config.routes[0]
    route = config.find_route(model)
    if route is None:
        known = ", ".join(r.model for r in config.routes) or "(none)"
        raise UnknownModelError(f"unknown model {model!r}; this gateway serves: {known}", param="model")
    return route


async def run_decisions(
    messages: Sequence[Mapping[str, Any]],
    *,
    config: GatewayConfig | RouteConfig | None = None,
    decider: Decider,
    tools: Sequence[Mapping[str, Any]] | None = None,
    model: str | None = None,
    cache: SemanticCache | None = None,
    tenant: str = DEFAULT_TENANT,
    timeout_ms: float | None = None,
) -> DecisionReport:
    """Run the decisions of `model`'s route (default: the config's first route) on one chat request.

    Builds one decision call with every question the route's policies need (the conversation as the state), waits
    at most `timeout_ms` (default: the config's `decision_timeout_ms`), and turns the answers into verdicts; a
    failed or slow backend gives every policy its configured fallback instead of an error. `cache` (optional) is
    searched for the nearest cached conversation first, so the reuse question joins the same call. Raises
    UnknownModelError for a model the config does not declare.
    """
    config = config if config is not None else default_config()
    route = resolve_route(config, model)
    if timeout_ms is None:
        timeout_ms = config.decision_timeout_ms if isinstance(config, GatewayConfig) else 1000.0
    policies = policies_for(route)
    inputs = decision_inputs({"messages": list(messages), "tools": list(tools or ())}, limits=input_limits(route))
    view = RequestView(inputs)
    vector = None
    if cache is not None and route.cache is not None and route.cache.enabled and inputs.cache_complete:
        candidate, vector = await cache.nearest(tenant, inputs.cache_text, route.cache.min_similarity)
        view = RequestView(inputs, candidate)
    asks = [a for p in policies for a in p.asks(view)]
    answers, decision_ms, error = await timed_decide(decider, asks, timeout_ms / 1000.0)
    verdicts = tuple(p.act(view, answers) for p in policies)
    cache_verdict = next((v for v in verdicts if v.decision == "cache"), None)
    cached_response = None
    if cache_verdict is not None and cache_verdict.action == "serve_cached" and view.cache_candidate is not None:
        cached_response = view.cache_candidate.response
    frozen_answers = MappingProxyType({k: tuple(float(x) for x in v) for k, v in (answers or {}).items()})
    return DecisionReport(
        route=route.model,
        verdicts=verdicts,
        answers=frozen_answers,
        decision_ms=decision_ms,
        num_questions=len(asks),
        error=error,
        state=inputs.request_text,
        cache_vector=vector,
        cached_response=cached_response,
        inputs=inputs,
    )


def run_decisions_sync(
    messages: Sequence[Mapping[str, Any]],
    *,
    config: GatewayConfig | RouteConfig | None = None,
    decider: Decider,
    tools: Sequence[Mapping[str, Any]] | None = None,
    model: str | None = None,
    timeout_ms: float | None = None,
) -> DecisionReport:
    """`run_decisions` for callers without an event loop (scripts); do not call it from inside one."""
    return asyncio.run(
        run_decisions(messages, config=config, decider=decider, tools=tools, model=model, timeout_ms=timeout_ms)
    )
