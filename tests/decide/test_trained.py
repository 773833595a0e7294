"""The trained readout's inference: shapes, invariances and weights on disk."""

import numpy as np

from jevserve.decide.trained import NUM_FEATURES, HeadWeights, TrainedReadout, features, question_texts
from jevserve.protocol import SystemOneRequest, to_decision
from tests.helpers import ticket_body


def decision(question: dict):
    return to_decision(SystemOneRequest.model_validate(ticket_body(questions={"q": question})).questions["q"])


def random_weights(seed: int = 0, hidden: int = 16) -> HeadWeights:
    rng = np.random.default_rng(seed)
    return HeadWeights(
        rng.normal(size=(NUM_FEATURES, hidden)).astype(np.float32) * 0.1,
        rng.normal(size=hidden).astype(np.float32),
        rng.normal(size=hidden).astype(np.float32),
        0.3,
        {"noul": 1.0, "choice": 0.5, "score": 2.0},
    )


def unit_rows(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_texts_are_instructions_then_one_per_option():
    q = decision({"type": "choice", "instructions": "Which?", "criteria": {"a": "first", "b": None}})
    assert question_texts(q) == ["Which?", "a: first", "b"]
    noul = decision({"type": "noul", "criteria": {"true": "money back"}})
    assert question_texts(noul) == ["", "yes: money back", "no"]


def test_choice_probabilities_follow_their_options_when_reordered():
    readout = TrainedReadout(random_weights())
    names = {"a": "alpha", "b": "beta", "c": None, "d": "delta"}
    q1 = decision({"type": "choice", "instructions": "Pick", "criteria": names})
    q2 = decision({"type": "choice", "instructions": "Pick", "criteria": dict(reversed(list(names.items())))})
    state, texts = unit_rows(1, 1)[0], unit_rows(5, 2)
    p1 = readout.probabilities(state, texts, q1)
    p2 = readout.probabilities(state, np.concatenate([texts[:1], texts[1:][::-1]]), q2)
    assert np.allclose(p1, p2[::-1], atol=1e-12) and abs(p1.sum() - 1) < 1e-12


def test_missing_instructions_read_as_zeros_and_score_levels_carry_position():
    q = decision({"type": "score", "criteria": ["low", "mid", "high"]})
    f = features(unit_rows(1, 3)[0], unit_rows(4, 4), q)
    assert f.shape == (3, NUM_FEATURES)
    q_block = slice(4 * 384, 5 * 384)
    assert not f[:, q_block].any()
    assert list(f[:, -1]) == [0.0, 0.5, 1.0]


def test_temperature_per_type_scales_logits():
    weights = random_weights()
    readout = TrainedReadout(weights)
    q = decision({"type": "choice", "criteria": {"a": None, "b": None}})
    state, texts = unit_rows(1, 5)[0], unit_rows(3, 6)
    z = readout.logits(state, texts, q)
    expected = np.exp(z / 0.5) / np.exp(z / 0.5).sum()
    assert np.allclose(readout.probabilities(state, texts, q), expected)


def test_weights_round_trip_through_npz(tmp_path):
    weights = random_weights()
    weights.save(tmp_path / "w.npz")
    again = HeadWeights.load(tmp_path / "w.npz")
    assert np.array_equal(again.w1, weights.w1) and again.temperatures == weights.temperatures
    assert again.b2 == np.float32(weights.b2)
