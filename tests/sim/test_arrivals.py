import itertools

import numpy as np
import pytest

from jevserve.sim.arrivals import ArrivalSpec, gamma_arrivals, make_arrivals, mmpp_arrivals, poisson_arrivals
from jevserve.sim.errors import WorkloadError


def test_same_seed_gives_the_same_times_and_another_seed_differs():
    a, b, c = poisson_arrivals(100, 1.3, 0), poisson_arrivals(100, 1.3, 0), poisson_arrivals(100, 1.3, 1)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("process", ["poisson", "gamma", "mmpp"])
def test_first_request_is_sent_at_zero_and_times_increase(process):
    times = make_arrivals(process, 500, 2.0, 4)
    assert times[0] == 0.0 and np.all(np.diff(times) >= 0) and len(times) == 500


@pytest.mark.parametrize("process", ["poisson", "gamma"])
def test_long_run_rate_matches_the_requested_rate(process):
    times = make_arrivals(process, 40_000, 1.5, 11)
    assert (len(times) - 1) / times[-1] == pytest.approx(1.5, rel=0.05)


def test_mmpp_realised_rate_is_the_requested_rate_for_every_seed():
    for seed in range(5):
        times = mmpp_arrivals(2000, 1.3, seed)
        assert (len(times) - 1) / times[-1] == pytest.approx(1.3, rel=1e-9)


@pytest.mark.parametrize("spec", ["poisson", "gamma:2", "mmpp:4:0.2:100"])
def test_a_rate_sweep_scales_one_realisation(spec):
    slow, fast = make_arrivals(spec, 3000, 1.0, 3), make_arrivals(spec, 3000, 1.6, 3)
    np.testing.assert_allclose(fast * 1.6, slow, rtol=1e-9, atol=1e-9)


def test_arrival_spec_parses_what_the_cli_accepts():
    assert ArrivalSpec.parse("gamma:3") == ArrivalSpec("gamma", cv=3.0)
    assert ArrivalSpec.parse("gamma", cv=1.5).cv == 1.5
    assert ArrivalSpec.parse("mmpp:8:0.1") == ArrivalSpec("mmpp", burst_ratio=8.0, burst_share=0.1)
    assert str(ArrivalSpec.parse("mmpp")) == "mmpp:4:0.2:100"
    for bad, message in [("mmpp:4:1.5", "burst_share=1.5"), ("gamma:x", "must be numbers"),
                         ("mmpp:0.5", r"burst_ratio=0.5; expected a number >= 1 \(the burst"),
                         ("gamma:1:2", "expected poisson"), ("weibull", "unknown arrival process 'weibull'"),
                         ("gamma:inf", "expected poisson")]:
        with pytest.raises(WorkloadError, match=message):
            ArrivalSpec.parse(bad)


def test_gamma_gaps_have_the_requested_coefficient_of_variation():
    gaps = np.diff(gamma_arrivals(50_000, 1.0, 3.0, 2))
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(3.0, rel=0.05)


def test_mmpp_is_burstier_than_poisson():
    cv = lambda t: np.std(np.diff(t)) / np.mean(np.diff(t))  # noqa: E731
    assert cv(mmpp_arrivals(20_000, 1.0, 5)) > cv(poisson_arrivals(20_000, 1.0, 5)) * 1.1


@pytest.mark.parametrize("call, message", [
    (lambda: poisson_arrivals(10, 0.0, 0), "rate_rps=0.0; expected a number > 0"),
    (lambda: gamma_arrivals(10, 1.0, -1.0, 0), "cv=-1.0"),
    (lambda: make_arrivals("uniform", 10, 1.0, 0), "unknown arrival process 'uniform'; expected one of: poisson"),
])
def test_bad_arrival_parameters_are_named(call, message):
    with pytest.raises(WorkloadError, match=message):
        call()


def test_attainment_on_an_mmpp_sweep_is_monotone_on_a_fixed_realisation():
    from jevserve.serving import make_queue_policy
    from jevserve.sim.engine import EngineConfig
    from jevserve.sim.metrics import Slo
    from jevserve.sim.run import simulate_summary, with_arrivals
    from jevserve.sim.workloads.synthetic import synthetic_requests
    from tests.sim.builders import make_profile

    requests = synthetic_requests(600, "uniform:5:50", "uniform:1:40", seed=2)
    profile, config, slo = make_profile(constant_us=2000.0), EngineConfig(max_num_seqs=4), Slo(ttft_ms=100.0)
    attainment = []
    for rate in (20.0, 30.0, 40.0, 50.0, 60.0, 70.0):
        timed = with_arrivals(requests, make_arrivals("mmpp:6:0.2:50", len(requests), rate, 0))
        attainment.append(simulate_summary(timed, profile, make_queue_policy("fcfs"), config,
                                           slo).metrics.slo_attainment)
    assert attainment[0] > 0.9 > attainment[-1]  # the sweep crosses the target
    assert all(a >= b for a, b in itertools.pairwise(attainment)), attainment
