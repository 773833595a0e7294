"""The request headers llm-d's endpoint picker and the Gateway API Inference Extension act on, from the decisions.

    x-gateway-inference-objective   names an InferenceObjective; its priority puts the request in a priority band,
                                    and at saturation the lowest (negative) bands are shed first
    x-gateway-inference-fairness-id the flow fair sharing works across: here the tenant (a digest of the API key)
    x-llm-d-slo-ttft-ms             the SLO-deadline ordering policy serves the earliest arrival + value first
    x-gateway-model-name            the model the request goes to (what GIE's body-based routing would set)

The objective comes from the predicted reply length (the priority decision): the first band whose `max_tokens`
covers it. The TTFT value is `slo_ttft_ms + slo_ms_per_token × predicted reply tokens`, so under SLO-deadline
ordering a request predicted short is served before a long one that arrived at the same time, and a long one that
has waited `slo_ms_per_token` ms per token of difference goes first (predicted-length-first with aging).

Header names: llm-d-router reads `x-llm-d-inference-objective` / `x-llm-d-inference-fairness-id` and accepts the
`x-gateway-*` names as deprecated aliases; GIE's own code reads only the `x-gateway-*` names, so they are the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

OBJECTIVE_HEADERS = {"gateway": "x-gateway-inference-objective", "llm-d": "x-llm-d-inference-objective"}
FAIRNESS_HEADERS = {"gateway": "x-gateway-inference-fairness-id", "llm-d": "x-llm-d-inference-fairness-id"}
SLO_TTFT_HEADER = "x-llm-d-slo-ttft-ms"
MODEL_NAME_HEADER = "x-gateway-model-name"  # GIE's body-based routing header: the pool is chosen by the model
# Every header an endpoint picker or jevserve itself acts on, in both name families: a client must not set them (it
# could put itself in the highest priority band, give itself the earliest deadline, or pose as another tenant's flow),
# so behind Envoy the ext_proc server removes those a client sent and only its own reach the model server.
CONTROL_HEADERS = frozenset({*OBJECTIVE_HEADERS.values(), *FAIRNESS_HEADERS.values(), SLO_TTFT_HEADER,
                             MODEL_NAME_HEADER, "x-llm-d-slo-tpot-ms"})  # fmt: skip
CONTROL_PREFIX = "x-jevserve-"


def client_control_headers(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The control headers (CONTROL_HEADERS, and any x-jevserve-*) among a client's request headers."""
    return tuple(sorted(name.lower() for name in headers
                        if name.lower() in CONTROL_HEADERS or name.lower().startswith(CONTROL_PREFIX)))


class ObjectiveBand(BaseModel):
    """One InferenceObjective and the predicted reply lengths it covers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)  # the InferenceObjective's metadata.name
    max_tokens: float | None = Field(None, gt=0)  # predicted reply tokens up to this; None: any (the last band)


class InferenceHeadersConfig(BaseModel):
    """Which llm-d / GIE headers a route's requests carry upstream, and how they are computed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    objectives: list[ObjectiveBand] = Field(default_factory=list)  # shortest band first
    default_objective: str | None = None  # when no reply length was predicted (priority off or undecided)
    fairness_id: Literal["tenant", "none"] = "tenant"
    slo_ttft_ms: float | None = Field(None, gt=0)  # the route's TTFT SLO; None: no x-llm-d-slo-ttft-ms
    slo_ms_per_token: float = Field(0.0, ge=0)  # added per predicted reply token
    header_names: Literal["gateway", "llm-d"] = "gateway"

    @model_validator(mode="after")
    def _bands_in_order(self) -> InferenceHeadersConfig:
        bounds = [b.max_tokens for b in self.objectives]
        if None in bounds[:-1]:
            raise ValueError(f"objectives[{bounds.index(None)}]: only the last band may leave out max_tokens")
        numbers = [b for b in bounds if b is not None]
        if numbers != sorted(numbers) or len(set(numbers)) != len(numbers):
            raise ValueError(f"objectives: max_tokens must increase from band to band, got {numbers}")
        return self


def objective_for(config: InferenceHeadersConfig, predicted_tokens: float | None) -> str | None:
    """The InferenceObjective for a predicted reply length (the default one without a prediction)."""
    if predicted_tokens is None:
        return config.default_objective
    for band in config.objectives:
        if band.max_tokens is None or predicted_tokens <= band.max_tokens:
            return band.name
    return config.default_objective  # longer than every bounded band and no open-ended one


def inference_headers(
    config: InferenceHeadersConfig | None, *, predicted_tokens: float | None, tenant: str, model: str | None = None
) -> dict[str, str]:
    """The headers to stamp on the upstream request (empty when the route has no `inference` block); `model`, the
    model the request goes to, fills GIE's body-based-routing header."""
    if config is None:
        return {}
    headers = {MODEL_NAME_HEADER: model} if model else {}
    objective = objective_for(config, predicted_tokens)
    if objective is not None:
        headers[OBJECTIVE_HEADERS[config.header_names]] = objective
    if config.fairness_id == "tenant":
        headers[FAIRNESS_HEADERS[config.header_names]] = tenant
    if config.slo_ttft_ms is not None:
        ttft_ms = config.slo_ttft_ms + config.slo_ms_per_token * (predicted_tokens or 0.0)
        headers[SLO_TTFT_HEADER] = str(round(ttft_ms))
    return headers
