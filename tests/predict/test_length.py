"""The reply-length regression follows the estimator convention and recovers a known relation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from jevserve.predict import ReplyLengthRegressor, design


def make_data(n: int = 2000, seed: int = 0):
    """Reply tokens = exp(3 + 2·a − b + 0.5·log(1+prompt)) with small noise: a known log-linear relation."""
    rng = np.random.default_rng(seed)
    columns = rng.uniform(size=(n, 2))
    prompt = rng.integers(5, 500, size=n)
    log_reply = 3 + 2 * columns[:, 0] - columns[:, 1] + 0.5 * np.log1p(prompt) + rng.normal(0, 0.05, n)
    return columns, prompt, np.expm1(log_reply)


def test_fit_returns_self_and_the_regression_recovers_the_relation():
    columns, prompt, reply = make_data()
    regressor = ReplyLengthRegressor(interactions=False)
    assert regressor.fit(columns, prompt, reply) is regressor
    test_columns, test_prompt, test_reply = make_data(seed=1)
    predicted = regressor.predict(test_columns, test_prompt)
    assert np.median(np.abs(np.log(predicted / test_reply))) < 0.06
    assert stats.kendalltau(predicted, test_reply).statistic > 0.9


def test_predict_is_pure():
    columns, prompt, reply = make_data(300)
    regressor = ReplyLengthRegressor().fit(columns, prompt, reply)
    before = regressor.alpha_, regressor.num_features_
    first = regressor.predict(columns, prompt)
    assert np.array_equal(first, regressor.predict(columns, prompt))
    assert (regressor.alpha_, regressor.num_features_) == before


def test_design_adds_log_prompt_and_products():
    x = design(np.array([[1.0, 2.0]]), np.array([np.e - 1]))
    assert x[0].tolist() == pytest.approx([1.0, 2.0, 1.0, 1.0, 2.0])


def test_get_params_reports_the_settings():
    assert ReplyLengthRegressor(interactions=False).get_params()["interactions"] is False


def test_fit_rejects_negative_lengths():
    with pytest.raises(ValueError, match="reply_tokens"):
        ReplyLengthRegressor().fit(np.zeros((2, 1)), np.array([1, 2]), np.array([3.0, -1.0]))
