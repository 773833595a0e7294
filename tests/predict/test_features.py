"""Answer columns follow the question set, whatever order answers arrive in."""

from __future__ import annotations

import pytest

from jevserve.predict import answer_features, feature_names

QUESTIONS = {
    "code": {"type": "noul", "instructions": "Code?"},
    "kind": {"type": "choice", "criteria": {"a": None, "b": None}},
    "length": {"type": "score", "criteria": ["short", "medium", "long"]},
}


def test_columns_follow_the_question_set_in_order():
    assert feature_names(QUESTIONS) == ["code", "kind=a", "kind=b", "length[0]", "length[1]", "length[2]",
                                        "length.expected"]
    answers = {
        "length": {"type": "score", "probabilities": {"2": 0.5, "0": 0.25, "1": 0.25}},
        "kind": {"type": "choice", "probabilities": {"b": 0.9, "a": 0.1}},
        "code": {"type": "noul", "noul": 0.3},
    }
    assert answer_features(QUESTIONS, [answers])[0].tolist() == pytest.approx([0.3, 0.1, 0.9, 0.25, 0.25, 0.5, 1.25])


def test_a_missing_answer_reads_as_the_uniform_answer():
    assert answer_features(QUESTIONS, [None])[0].tolist() == pytest.approx([0.5, 0.5, 0.5, 1 / 3, 1 / 3, 1 / 3, 1.0])


def test_an_unknown_question_type_is_named():
    with pytest.raises(ValueError, match="question 'q' has type 'box'"):
        feature_names({"q": {"type": "box"}})
