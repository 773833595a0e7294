import dataclasses
import math

import numpy as np
import pytest

from jevserve.serving import EngineConfig, Request, make_queue_policy
from jevserve.sim.profile import load_profile, parse_profile, profile_to_toml, shipped_profile_names
from jevserve.sim.roofline import Roofline, check_fit
from jevserve.sim.run import simulate
from jevserve.sim.step_time import StepTimeModel
from jevserve.sim.steplog import StepLogger

# Round figures: 1e15 FLOP/s, 1e12 B/s, 1 GB of weights, 1e9 FLOP per token, 1e5 B of KV per token, 1e6 FLOP per pair.
ROOF = Roofline(peak_flops=1e15, memory_bandwidth=1e12, weight_bytes=1e9, flops_per_token=1e9,
                kv_bytes_per_token=1e5, attention_flops_per_pair=1e6)


def test_the_floor_is_the_larger_of_compute_and_memory_time():
    # 10 decode tokens over 1,000 context tokens: 1e10 + 1e9 FLOP = 11 us; 1e9 + 1e5 x 1,010 B = 1,101 us
    assert ROOF.floor_s(0, 10, 1000) == pytest.approx(1.101e-3)
    # a 100,000-token prefill: 1e14 FLOP (+ half of 1e6 pairs' attention) = 100.5 ms; 1e9 + 1e10 B = 11 ms
    assert ROOF.floor_s(100_000, 0, 0, 1_000_000) == pytest.approx(0.1005)


def test_a_decode_run_floor_is_the_floor_of_each_of_its_steps():
    run = ROOF.decode_run_floor_s(5, 8, 4000)
    assert run.tolist() == pytest.approx([ROOF.floor_s(0, 8, 4000 + 8 * k) for k in range(5)])


def test_a_step_model_with_a_roofline_never_goes_below_the_floor():
    model = StepTimeModel(500.0, 1.0, 0.5, roofline=ROOF)  # the fit alone would say 505 us for 10 decode tokens
    assert model.fitted_step_s(0, 10, 1000) == pytest.approx(505e-6)
    assert model.step_s(0, 10, 1000) == pytest.approx(1.101e-3)
    assert model.step_s(0, 1, 0) == pytest.approx(max(500.5e-6, ROOF.floor_s(0, 1, 0)))
    durations = model.decode_run_s(40, 10, 1000)
    assert durations.tolist() == pytest.approx([model.step_s(0, 10, 1000 + 10 * k) for k in range(40)])
    assert model.decode_run_total_s(40, 10, 1000) == pytest.approx(float(durations.sum()))
    slower = model.scaled(2.0)
    assert slower.constant == 1000.0 and slower.step_s(0, 10, 1000) == pytest.approx(2 * model.step_s(0, 10, 1000))


def test_a_linear_model_sums_a_decode_run_in_closed_form():
    model = StepTimeModel(500.0, 1.0, 0.5, 0.01)
    assert model.decode_run_total_s(7, 3, 300) == pytest.approx(float(model.decode_run_s(7, 3, 300).sum()))


@pytest.mark.parametrize("name", shipped_profile_names())
def test_no_shipped_profile_undercuts_the_roofline(name):
    profile = load_profile(name)
    assert profile.roofline is not None
    assert check_fit(profile.step_time.fitted_step_s, profile.roofline).ok
    st = profile.step_time
    for batch in (1, 64, 1024):
        for prefill in (0, 2048):
            step = (prefill, batch, 700 * batch, prefill * prefill)
            assert st.step_s(*step) >= profile.roofline.floor_s(*step)


def test_the_check_refuses_a_profile_without_peaks_and_a_fit_faster_than_the_hardware():
    assert not check_fit(StepTimeModel(4000.0, 17.0, 4.0).step_s, None).ok
    too_fast = StepTimeModel(200.0, 1.0, 0.1)  # 200 us a step, when reading the 1 GB of weights takes 1,000 us
    result = check_fit(too_fast.step_s, ROOF)
    assert not result.ok and "one decode token" in result.problems[0] and result.crossover_batch == 1


def test_the_roofline_fields_survive_a_round_trip_through_toml():
    import tomllib

    profile = load_profile("qwen3-8b-h200")
    again = parse_profile(tomllib.loads(profile_to_toml(profile)))
    assert again.roofline == profile.roofline and again.step_time.roofline == profile.roofline


def test_a_profile_without_a_gpu_section_has_no_floor():
    import tomllib

    data = tomllib.loads(profile_to_toml(load_profile("qwen3-8b-h200")))
    del data["gpu"]
    assert parse_profile(data).roofline is None and parse_profile(data).step_time.roofline is None


def test_simulated_steps_of_a_large_batch_take_at_least_the_floor():
    profile = load_profile("qwen3-8b-h200")
    logger = StepLogger()
    requests = [Request(f"r{i}", 0.0, 200, 300) for i in range(400)]
    simulate(requests, profile, make_queue_policy("fcfs"), EngineConfig(), observers=(logger,))
    floors = [profile.roofline.floor_s(prefill, decode, context, pairs)
              for prefill, decode, context, pairs, _ in logger.rows]
    times = [row[4] * 1e-6 for row in logger.rows]
    # step times are differences of step ends, so they carry the rounding of the clock's value
    assert all(t >= f * (1 - 1e-6) for t, f in zip(times, floors, strict=True))
    fitted = dataclasses.replace(profile, step_time=StepTimeModel(*profile.step_time.coefficients()))
    assert sum(math.isclose(t, f, rel_tol=1e-6) for t, f in zip(times, floors, strict=True)) > 100  # floor-bound
    faster, _ = simulate(requests, fitted, make_queue_policy("fcfs"), EngineConfig())
    slower, _ = simulate(requests, profile, make_queue_policy("fcfs"), EngineConfig())
    assert max(e.finish_s for e in slower) > 1.1 * max(e.finish_s for e in faster)
    assert np.isfinite([e.finish_s for e in slower]).all()
