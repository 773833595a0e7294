import numpy as np
import pytest

from jevserve.sim.step_time import StepTimeModel


def test_step_time_is_the_linear_token_batch_model_in_seconds():
    model = StepTimeModel(1000.0, 10.0, 5.0, 0.5, 0.001)
    assert model.step_s(100, 4, 400, 10_000) == pytest.approx((1000 + 1000 + 20 + 200 + 10) * 1e-6)


def test_decode_run_equals_its_single_steps():
    model = StepTimeModel(4000.0, 17.0, 4.2, 0.03)
    run = model.decode_run_s(50, 8, 3000)
    singles = [model.step_s(0, 8, 3000 + 8 * i) for i in range(50)]
    np.testing.assert_allclose(run, singles, rtol=1e-12)


def test_scaled_multiplies_every_coefficient():
    model = StepTimeModel(100.0, 2.0, 1.0, 0.5, 0.25).scaled(2.0)
    assert model.as_dict() == {"constant": 200.0, "per_prefill_token": 4.0, "per_decode_token": 2.0,
                               "per_decode_context_token": 1.0, "per_prefill_attention_pair": 0.5}
