"""llm-d / GIE request headers from the decisions: objective bands, fairness id, the TTFT SLO formula."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jevserve.gateway.inference_headers import InferenceHeadersConfig, inference_headers, objective_for

BANDS = {
    "objectives": [
        {"name": "interactive", "max_tokens": 100},
        {"name": "standard", "max_tokens": 600},
        {"name": "batch-sheddable"},
    ],
    "default_objective": "standard",
}


def test_objective_is_the_first_band_covering_the_predicted_length() -> None:
    config = InferenceHeadersConfig.model_validate(BANDS)
    assert [objective_for(config, t) for t in (15, 100, 100.5, 599, 1200)] == [
        "interactive",
        "interactive",
        "standard",
        "standard",
        "batch-sheddable",
    ]
    assert objective_for(config, None) == "standard"  # no prediction: the default


def test_length_beyond_every_bounded_band_takes_the_default() -> None:
    config = InferenceHeadersConfig.model_validate(
        {"objectives": [{"name": "short", "max_tokens": 50}], "default_objective": "rest"}
    )
    assert objective_for(config, 51) == "rest"


def test_headers_carry_objective_tenant_and_ttft_by_the_formula() -> None:
    config = InferenceHeadersConfig.model_validate({**BANDS, "slo_ttft_ms": 1500, "slo_ms_per_token": 2})
    headers = inference_headers(config, predicted_tokens=235.0, tenant="a1b2c3")
    assert headers == {
        "x-gateway-inference-objective": "standard",
        "x-gateway-inference-fairness-id": "a1b2c3",
        "x-llm-d-slo-ttft-ms": str(1500 + 2 * 235),
    }


def test_a_short_request_gets_an_earlier_deadline_and_waiting_overtakes_it() -> None:
    """Under deadline = arrival + value: short first at equal arrival; a long one waiting long enough goes first."""
    config = InferenceHeadersConfig.model_validate({"slo_ttft_ms": 1000, "slo_ms_per_token": 2})
    short = int(inference_headers(config, predicted_tokens=15, tenant="t")["x-llm-d-slo-ttft-ms"])
    long = int(inference_headers(config, predicted_tokens=1200, tenant="t")["x-llm-d-slo-ttft-ms"])
    assert short < long
    waited_ms = long - short + 1  # the long request arrived this much earlier
    assert 0 + long < waited_ms + short  # its deadline (arrival 0) is now before the short one's


def test_llm_d_names_and_no_fairness_on_request() -> None:
    config = InferenceHeadersConfig.model_validate({**BANDS, "header_names": "llm-d", "fairness_id": "none"})
    assert inference_headers(config, predicted_tokens=10, tenant="t") == {"x-llm-d-inference-objective": "interactive"}


def test_no_block_no_headers() -> None:
    assert inference_headers(None, predicted_tokens=10, tenant="t") == {}


@pytest.mark.parametrize(
    ("objectives", "message"),
    [
        ([{"name": "a"}, {"name": "b", "max_tokens": 10}], "only the last band"),
        ([{"name": "a", "max_tokens": 600}, {"name": "b", "max_tokens": 100}], "must increase"),
        ([{"name": "", "max_tokens": 10}], "at least 1 character"),
    ],
)
def test_bad_bands_are_refused_with_the_reason(objectives: list, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        InferenceHeadersConfig.model_validate({"objectives": objectives})
