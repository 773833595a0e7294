import pytest

from jevserve.sim.engine import EngineConfig
from jevserve.sim.metrics import Slo, summarize
from jevserve.sim.run import simulate
from jevserve.sim.stats import max_rate_meeting, steady_goodput
from jevserve.sim.steady import keep_up
from tests.sim.builders import make_profile, make_requests


def _run(gap_s: float, n: int = 400):
    """One sequence at a time, 10 steps of 1 ms per request: the engine serves 100 req/s."""
    requests = make_requests(n, prompt_len=8, output_len=10, gap_s=gap_s)
    _, recorder = simulate(requests, make_profile(constant_us=1000.0), _fcfs(), EngineConfig(max_num_seqs=1))
    return recorder


def _fcfs():
    from jevserve.serving import make_queue_policy

    return make_queue_policy("fcfs")


def test_a_run_below_capacity_keeps_up():
    verdict = keep_up(_run(gap_s=0.0125).records)  # 80 req/s offered
    assert verdict.keeps_up
    assert verdict.completion_ratio == pytest.approx(1.0, abs=0.02)


def test_a_run_whose_backlog_grows_is_not_counted_as_meeting_goodput():
    recorder = _run(gap_s=0.009)  # 111 req/s offered to a 100 req/s engine: the queue grows all the time
    verdict = keep_up(recorder.records)
    assert not verdict.keeps_up
    assert verdict.completion_ratio < 0.95 and verdict.waiting_growth > 0.05
    # a lenient SLO is met by every request, so latency alone counts the overloaded rate
    slo = Slo(ttft_ms=10_000.0)
    assert summarize(recorder.records, recorder.itls_s, slo).slo_attainment == 1.0
    rates, attainment = [80.0, 111.0], [1.0, 1.0]
    assert max_rate_meeting(rates, attainment) == (111.0, ">=")
    assert steady_goodput(rates, attainment, [True, verdict.keeps_up]) == (80.0, "")


def test_steady_goodput_interpolates_attainment_below_the_first_rate_that_falls_behind():
    rates, attainment = [1.0, 1.1, 1.2, 1.3], [0.99, 0.95, 0.85, 0.95]
    assert steady_goodput(rates, attainment, [True, True, True, False]) == pytest.approx((1.15, ""))
    assert steady_goodput(rates, attainment, [False, True, True, True]) == (1.0, "<")


def test_keep_up_rejects_a_tolerance_outside_zero_one():
    with pytest.raises(ValueError, match=r"tol=1\.5"):
        keep_up(_run(gap_s=0.02, n=10).records, tol=1.5)


def test_steady_goodput_interpolates_where_the_keep_up_margin_crosses_zero():
    rates, attainment = [1.0, 1.1, 1.2], [1.0, 1.0, 1.0]
    assert steady_goodput(rates, attainment, [True, True, False], margins=[0.05, 0.03, -0.01]) == \
        pytest.approx((1.175, ""))
