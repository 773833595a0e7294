import math

import pytest

from jevserve.protocol import InvalidProbabilitiesError, SystemOneRequest, SystemOneResponse, build_answer, normalise
from tests.helpers import ticket_body


def questions():
    return SystemOneRequest.model_validate(ticket_body()).questions


def test_choice_answer_fields_come_from_one_probability_vector():
    ans = build_answer(questions()["team"], [0.2, 0.7, 0.1])
    assert ans["choice"] == "Technical"
    assert list(ans["probabilities"]) == ["Billing", "Technical", "Sales"]
    assert ans["confidence"] == pytest.approx((0.7 - 1 / 3) / (2 / 3))


def test_score_answer_has_legend_expectation_and_zero_based_keys():
    ans = build_answer(questions()["anger"], [0.1, 0.6, 0.3])
    assert ans["legend"] == {"0": "Calm", "1": "Frustrated", "2": "Very angry"}
    assert ans["score"] == pytest.approx(1.2)
    assert ans["confidence"] == pytest.approx(0.4)


def test_noul_answer_has_no_unprefixed_confidence():
    assert build_answer(questions()["refund"], [0.9, 0.1]) == {"type": "noul", "noul": pytest.approx(0.9)}


def test_structured_levels_are_echoed_unchanged_in_the_legend():
    q = SystemOneRequest.model_validate(
        ticket_body(questions={"q": {"type": "score", "criteria": [{"level": "low"}, ["high", "very"]]}})
    ).questions["q"]
    assert build_answer(q, [0.5, 0.5])["legend"] == {"0": {"level": "low"}, "1": ["high", "very"]}


@pytest.mark.parametrize(
    "bad",
    [[float("nan"), 1.0], [-0.5, 1.5], [float("inf"), 0.0], [0.0, 0.0], [3.0, 1.0], []],
    ids=["nan", "negative", "inf", "all-zero", "unnormalised", "empty"],
)
def test_normalise_refuses_a_vector_that_is_not_a_distribution_instead_of_making_it_uniform(bad):
    with pytest.raises(InvalidProbabilitiesError):
        normalise(bad)


def test_normalise_only_rescales_float_noise():
    out = normalise([0.25, 0.75 + 1e-9])
    assert math.fsum(out) == pytest.approx(1.0, abs=1e-15) and out[0] == pytest.approx(0.25)


def test_a_nan_from_a_backend_is_an_error_not_a_noul_of_one_half():
    with pytest.raises(InvalidProbabilitiesError, match="finite"):
        build_answer(questions()["refund"], [float("nan"), float("nan")])


def test_wrong_probability_count_is_an_internal_error_not_a_silent_answer():
    with pytest.raises(ValueError):
        build_answer(questions()["team"], [0.5, 0.5])


def test_response_model_parses_what_build_answer_writes():
    qs = questions()
    body = {
        "model": "m",
        "usage": {"input_tokens": 3, "output_tokens": 0},
        "answers": {k: build_answer(q, [0.5, 0.5] if q.type == "noul" else [0.2, 0.3, 0.5]) for k, q in qs.items()},
    }
    parsed = SystemOneResponse.model_validate(body)
    assert parsed.answers["team"].type == "choice"


def test_float_token_counts_are_rejected_like_the_sdk_does():
    with pytest.raises(ValueError):
        SystemOneResponse.model_validate(
            {"model": "m", "answers": {}, "usage": {"input_tokens": 1.0, "output_tokens": 0}}
        )
