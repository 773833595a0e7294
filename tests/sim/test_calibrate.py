import numpy as np
import pytest

from jevserve.sim.calibrate import fit_step_time
from jevserve.sim.errors import TraceError
from jevserve.sim.steplog import read_steplog, write_steplog

TRUE = np.array([4000.0, 17.0, 4.2, 0.03, 0.0005])


def make_log(n: int, noise: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    prefill = rng.integers(0, 2048, n) * (rng.random(n) < 0.3)
    decode = rng.integers(1, 256, n)
    context = decode * rng.integers(50, 2000, n)
    pairs = prefill * rng.integers(1, 1024, n)
    x = np.column_stack([np.ones(n), prefill, decode, context, pairs])
    y = x @ TRUE * (1 + noise * rng.standard_normal(n))
    return np.column_stack([prefill, decode, context, pairs, y]).astype(float)


def test_fit_recovers_known_coefficients_from_an_exact_log():
    result = fit_step_time(make_log(500, 0.0))
    np.testing.assert_allclose(result.model.coefficients(), TRUE, rtol=1e-6)
    assert result.test_mape < 1e-9


def test_fit_on_a_noisy_log_reports_held_out_error_near_the_noise():
    result = fit_step_time(make_log(5000, 0.02))
    np.testing.assert_allclose(result.model.coefficients()[:3], TRUE[:3], rtol=0.05)
    assert 0.01 < result.test_mape < 0.025  # mean |N(0, 2%)| is 1.6%
    assert result.num_test_rows == 1000


def test_fit_needs_enough_rows():
    with pytest.raises(TraceError, match="expected at least 15"):
        fit_step_time(make_log(6, 0.0))


def test_steplog_round_trip(tmp_path):
    rows = make_log(20, 0.0)
    write_steplog([tuple(r) for r in rows], tmp_path / "s.csv")
    np.testing.assert_allclose(read_steplog(tmp_path / "s.csv"), rows)


def test_steplog_errors_name_column_and_line(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n1,2\n")
    with pytest.raises(TraceError, match=r"missing column.*decode_context_tokens"):
        read_steplog(path)
    path.write_text("num_prefill_tokens,num_decode_tokens,decode_context_tokens,prefill_attention_pairs,"
                    "step_time_us\n1,2,3,4,fast\n")
    with pytest.raises(TraceError, match=r"s.csv:2: step_time_us = 'fast'; expected a number >= 0"):
        read_steplog(path)
