"""Run a route's decisions on one request, without HTTP: the gateway's core, and the entry point for demos.

    report = await run_decisions(messages, config=config, decider=make_decider("embedded"))
    report.verdict("guard").action        # Action.BLOCK / Action.ALLOW / ...
    report.answers["guard"]               # (P(yes), P(no))
    report.decision_ms                    # time spent in the one decision call

`run_decisions` (and its blocking twin `run_decisions_sync`) take the chat messages (OpenAI shape), the gateway
config (or one route of it), a decider and optionally the request's tools, and return a frozen `DecisionReport`.
Their signatures are stable: the web demo calls them.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from jevserve.gateway.cache import SemanticCache
from jevserve.gateway.cache_keys import CacheKeys, request_keys
from jevserve.gateway.config import GatewayConfig, RouteConfig, default_config
from jevserve.gateway.decider import Decider, timed_decide
from jevserve.gateway.errors import ConfigError, UnknownModelError
from jevserve.gateway.operating_points import resolve_operating_points
from jevserve.gateway.policies.base import Policy, RequestView
from jevserve.gateway.policies.build import POLICIES, build_policies
from jevserve.gateway.types import FINAL_ACTIONS, Action, Phase, Verdict
from jevserve.serving.decision_inputs import TEMPLATE_FIELDS, DecisionInputs, decision_inputs

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
    timed_out: bool = False  # the backend gave no answer within the deadline (an overloaded decider)
    turned_away: bool = False  # of those: the decider refused the work at once, as more than it could answer in time
    too_large: bool = False  # the decider refused the call's input as too large (then every verdict fell back)
    retry_after_s: float | None = None  # when a decider that turned the call away said to come back
    state: str = ""  # the request text the request-level questions read (DecisionInputs.request_text)
    cache_vector: Any = field(default=None, repr=False, compare=False)  # the request's embedding, for storing
    cached_response: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)  # served on a hit
    inputs: DecisionInputs | None = field(default=None, repr=False, compare=False)  # the texts the decisions read
    cache_keys: CacheKeys | None = field(default=None, repr=False, compare=False)  # None: the cache is off

    def verdict(self, decision: str) -> Verdict | None:
        """The verdict of `decision` (guard, harm, clarify, cache, route, priority), or None when it did not run."""
        return next((v for v in self.verdicts if v.decision == decision), None)

    @property
    def final(self) -> Verdict | None:
        """The verdict that answers the request without the upstream (block, clarify or a cached reply), if any;
        verdicts in shadow mode never do."""
        return final_verdict(self.verdicts)

    def header(self, scores: bool = True) -> str:
        """The `x-jevserve-decisions` header: `decision=action[:probability]` joined by commas (`~shadow` marks a
        verdict in shadow mode, `!fallback` one the fallback decided); without `scores`, no probabilities."""
        return ",".join(header_part(v, scores) for v in self.verdicts) or "none"

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


def header_part(verdict: Verdict, scores: bool = True) -> str:
    """One verdict in the `x-jevserve-decisions` header: `decision=action[:probability][~shadow][!fallback]` (the
    probability only with `scores`)."""
    p = "" if verdict.probability is None or not scores else f":{verdict.probability:.3f}"
    shadow = "~shadow" if verdict.mode == "shadow" else ""
    return f"{verdict.decision}={verdict.action}{p}{shadow}{'!fallback' if verdict.fell_back else ''}"


_POLICY_CACHE: dict[int, tuple[RouteConfig, tuple[Policy, ...]]] = {}


def policies_for(route: RouteConfig) -> tuple[Policy, ...]:
    """The route's policies of both phases, built once per route object."""
    hit = _POLICY_CACHE.get(id(route))
    if hit is None or hit[0] is not route:
        hit = (route, build_policies(route))
        _POLICY_CACHE[id(route)] = hit
    return hit[1]


def final_verdict(verdicts: Sequence[Verdict]) -> Verdict | None:
    """The acting verdict that answers the request itself, by FINAL_ACTIONS' precedence (block, clarify, cache)."""
    for action in FINAL_ACTIONS:
        for v in verdicts:
            if v.action is action and v.acts:
                return v
    return None


def superseded(verdicts: tuple[Verdict, ...]) -> tuple[Verdict, ...]:
    """The verdicts with every answer-the-request action but the one that wins (block over clarify over a cached
    reply) made a skip that says what it lost to, so the header and the log never show a cached reply served to a
    request that was blocked. Blocks stand beside the winning block: each decision did refuse the request, and a
    harmful request the guard blocked first was reported to the client and the log as a prompt injection alone."""
    final = final_verdict(verdicts)
    if final is None:
        return verdicts
    return tuple(
        v if v is final or not (v.acts and v.action in FINAL_ACTIONS) or v.action is final.action is Action.BLOCK
        else replace(v, action=Action.SKIP, reason=f"superseded by {final.decision}={final.action} ({v.reason})")
        for v in verdicts
    )


def request_policies(route: RouteConfig) -> tuple[Policy, ...]:
    """The route's policies that run on the request, before the upstream is called."""
    return tuple(p for p in policies_for(route) if p.phase is Phase.REQUEST)


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


_RESOLVED: dict[tuple[int, int], tuple[GatewayConfig | RouteConfig, Decider, GatewayConfig | RouteConfig]] = {}


def resolved(config: GatewayConfig | RouteConfig, decider: Decider) -> GatewayConfig | RouteConfig:
    """`config` with its rate-based operating points turned into thresholds for `decider`, computed once per pair.

    A gateway resolves its config at start-up; this serves callers that pass an unresolved config (the web demo,
    scripts). While the decider cannot score the calibration requests, no threshold can be placed: the rates then
    act on nothing (only the fallbacks decide), and the next call tries again.
    """
    routes = config.routes if isinstance(config, GatewayConfig) else [config]
    if not any(getattr(r, k, None) is not None and getattr(r, k).needs_calibration for r in routes for k in POLICIES):
        return config
    hit = _RESOLVED.get((id(config), id(decider)))
    if hit is not None and hit[0] is config and hit[1] is decider:
        return hit[2]
    whole = config if isinstance(config, GatewayConfig) else GatewayConfig(routes=[config])
    try:
        done, _ = resolve_operating_points(whole, decider)
    except ConfigError:
        done = _never_acting(whole)
        return done if isinstance(config, GatewayConfig) else done.routes[0]
    result = done if isinstance(config, GatewayConfig) else done.routes[0]
    _RESOLVED[(id(config), id(decider))] = (config, decider, result)
    return result


def _never_acting(config: GatewayConfig) -> GatewayConfig:
    """`config` with every unresolved rate set to a threshold no probability reaches (NaN: P ≥ NaN is false)."""
    routes = []
    for route in config.routes:
        updates = {}
        for key in POLICIES:
            policy = getattr(route, key, None)
            if policy is not None and policy.needs_calibration:
                updates[key] = policy.model_copy(update={"threshold": math.nan})
        routes.append(route.model_copy(update=updates))
    return config.model_copy(update={"routes": routes})


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
    params: Mapping[str, Any] | None = None,
) -> DecisionReport:
    """Run the decisions of `model`'s route (default: the config's first route) on one chat request.

    Builds one decision call with every question the route's policies need (about the texts `decision_inputs`
    builds), waits at most `timeout_ms` (default: the config's `decision_timeout_ms`), and turns the answers into
    verdicts; a failed or slow backend gives every policy its configured fallback instead of an error. `cache`
    (optional) is searched first, for an exact repeat of the conversation with these `params` (the request's other
    fields, `model` included) or else the nearest cached conversation, so the reuse question joins the same call.
    Raises UnknownModelError for a model the config does not declare.
    """
    config = config if config is not None else default_config()
    route = resolve_route(resolved(config, decider), model)
    if timeout_ms is None:
        timeout_ms = config.decision_timeout_ms if isinstance(config, GatewayConfig) else 1000.0
    policies = request_policies(route)
    # with the request fields a chat template renders for the model (RAG documents, template variables)
    rendered = {k: params[k] for k in TEMPLATE_FIELDS if params and k in params}
    body = {"messages": list(messages), "tools": list(tools or ()), **rendered}
    inputs = decision_inputs(body, limits=route.input_limits())
    view = RequestView(inputs)
    vector = keys = None
    if cache is not None and route.cache is not None and route.cache.enabled:
        keys = request_keys(messages, tools, params)
        text = inputs.cache_text if inputs.cache_complete else None
        candidate, vector = await cache.lookup(tenant, keys, text, route.cache.min_similarity)
        view = RequestView(inputs, candidate)
    asks = [a for p in policies for a in p.asks(view)]
    decided = await timed_decide(decider, asks, timeout_ms / 1000.0)
    answers, decision_ms, error = decided.answers, decided.ms, decided.error
    verdicts = superseded(tuple(p.act(view, answers) for p in policies))
    final = next((v for v in verdicts if v.decision == "cache" and v.acts and v.action == "serve_cached"), None)
    cached_response = view.cache_candidate.response if final is not None and view.cache_candidate else None
    frozen_answers = MappingProxyType({k: tuple(float(x) for x in v) for k, v in (answers or {}).items()})
    return DecisionReport(
        route=route.model,
        verdicts=verdicts,
        answers=frozen_answers,
        decision_ms=decision_ms,
        num_questions=len(asks),
        error=error,
        timed_out=decided.timed_out,
        turned_away=decided.turned_away,
        too_large=decided.too_large,
        retry_after_s=decided.retry_after_s,
        state=inputs.request_text,
        cache_vector=vector,
        cached_response=cached_response,
        inputs=inputs,
        cache_keys=keys,
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
