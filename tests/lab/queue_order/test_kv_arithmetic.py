import dataclasses
import math

import pytest

from jevserve.lab.queue_order.kv_arithmetic import steady_state
from jevserve.serving import Request
from jevserve.sim.step_time import StepTimeModel
from tests.sim.builders import make_profile


def test_constant_step_time_gives_littles_law():
    # 2 req/s, 10 ms steps, replies of 100 tokens: each request runs 1 s, so 2 are running on average.
    requests = [Request("a", 0.0, 50, 100)]
    state = steady_state(requests, 2.0, make_profile(constant_us=10_000))
    assert state.step_ms == pytest.approx(10.0)
    assert state.num_running == pytest.approx(2.0)
    assert state.kv_tokens == pytest.approx(2.0 * 0.01 * (50 * 100 + 100 * 101 / 2))


def test_per_token_terms_slow_the_step_by_the_closed_form_factor():
    profile = dataclasses.replace(make_profile(), step_time=StepTimeModel(1000.0, 0.0, 100.0, 0.01))
    requests = [Request("a", 0.0, 10, 20), Request("b", 0.0, 30, 40)]
    mean_reply, mean_kv = 30.0, ((10 * 20 + 20 * 21 / 2) + (30 * 40 + 40 * 41 / 2)) / 2
    load = 5.0 * (100.0 * mean_reply + 0.01 * mean_kv) * 1e-6
    state = steady_state(requests, 5.0, profile)
    assert state.step_ms == pytest.approx(1.0 / (1 - load))
    capacity = profile.num_kv_blocks() * 16
    assert state.kv_fraction == pytest.approx(state.kv_tokens / capacity)


def test_no_steady_state_when_the_engine_cannot_keep_up():
    profile = dataclasses.replace(make_profile(), step_time=StepTimeModel(1000.0, 0.0, 0.0, 1.0))
    state = steady_state([Request("a", 0.0, 1000, 1000)], 1.0, profile)
    assert math.isnan(state.step_ms) and math.isnan(state.kv_fraction)
