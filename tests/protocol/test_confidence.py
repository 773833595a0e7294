import pytest

from jevserve.protocol import choice_confidence, expected_level, score_confidence, uniform_spread


@pytest.mark.parametrize(
    ("probs", "expected"),
    [
        ([0.7, 0.2, 0.1], 0.55),
        ([0.88, 0.12], 0.76),
        ([0.0182, 0.0449, 0.9369], 0.9054),
        ([1 / 3] * 3, 0.0),
        ([1.0], 1.0),
    ],
)
def test_choice_confidence_matches_reference_examples(probs, expected):
    assert choice_confidence(probs) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(("n", "d"), [(2, 0.5), (3, 2 / 3), (4, 1.0), (5, 1.2), (7, 1.7143), (9, 2.2222), (10, 2.5)])
def test_uniform_spread_closed_form(n, d):
    assert uniform_spread(n) == pytest.approx(d, abs=1e-4)
    centre = (n - 1) / 2
    assert uniform_spread(n) == pytest.approx(sum(abs(i - centre) for i in range(n)) / n)


@pytest.mark.parametrize(
    ("probs", "confidence", "score"),
    [
        ([0.1, 0.6, 0.3], 0.40, 1.2),
        ([0.0, 0.95, 0.05], 0.925, 1.05),
        ([0.05, 0.10, 0.20, 0.40, 0.25], 1 / 3, 2.7),
        ([0.5, 0, 0, 0, 0.5], 0.0, 2.0),
    ],
)
def test_score_confidence_and_expectation_match_reference_examples(probs, confidence, score):
    assert score_confidence(probs) == pytest.approx(confidence, abs=1e-4)
    assert expected_level(probs) == pytest.approx(score)


def test_two_level_score_confidence_equals_choice_formula():
    for p in (0.5, 0.6, 0.93, 1.0):
        assert score_confidence([1 - p, p]) == pytest.approx(choice_confidence([1 - p, p]))
