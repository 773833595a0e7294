import numpy as np
import pytest

from jevserve.sim.arrivals import gamma_arrivals, make_arrivals, mmpp_arrivals, poisson_arrivals
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


def test_mmpp_long_run_rate_matches_the_requested_rate():
    # Short phases so that many calm/burst cycles average out (the phase-length noise is large per cycle).
    times = mmpp_arrivals(100_000, 1.5, 11, mean_phase_s=5.0)
    assert (len(times) - 1) / times[-1] == pytest.approx(1.5, rel=0.03)


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
