import json

import numpy as np
import pytest

from jevserve.serving import Request
from jevserve.sim.entities import SimRequest
from jevserve.sim.metrics import MetricsRecorder, RequestRecord, RunSummary, Slo, is_good, summarize


def finished(request_id: str, arrival: float, token_times: list[float], admit: float) -> SimRequest:
    r = SimRequest(Request(request_id, arrival, 10, len(token_times)))
    r.first_admit_s, r.first_token_s, r.num_generated = admit, token_times[0], len(token_times)
    r.token_times = [token_times[0], np.array(token_times[1:])]
    return r


def test_records_follow_vllm_definitions_of_ttft_tpot_itl_e2el():
    rec = MetricsRecorder()
    rec.on_finish(finished("a", 1.0, [1.5, 1.6, 1.8], admit=1.2), 1.8)
    (r,) = rec.records
    assert (r.ttft_s, r.e2el_s, r.wait_s) == pytest.approx((0.5, 0.8, 0.2))
    assert r.tpot_s == pytest.approx(0.15)  # (E2EL - TTFT) / (output - 1)
    np.testing.assert_allclose(rec.itls_s[0], [0.1, 0.2])


def test_one_token_reply_has_no_tpot_and_no_itl():
    rec = MetricsRecorder()
    rec.on_finish(finished("a", 0.0, [0.3], admit=0.0), 0.3)
    assert rec.records[0].tpot_s is None and rec.itls_s == []


def record(ttft: float, e2el: float, arrival: float = 0.0, tpot: float | None = 0.01) -> RequestRecord:
    return RequestRecord("r", arrival, 10, 5, ttft, e2el, tpot, 0.0, 0)


def test_is_good_checks_every_target_set():
    assert is_good(record(0.9, 5.0), Slo(ttft_ms=1000))
    assert not is_good(record(1.1, 5.0), Slo(ttft_ms=1000))
    assert not is_good(record(0.5, 5.0, tpot=0.2), Slo(ttft_ms=1000, tpot_ms=100))
    assert not is_good(record(0.5, 5.0), Slo(ttft_ms=None, e2el_ms=4000))


def test_summary_attainment_goodput_and_percentiles():
    records = [record(0.1 * (i + 1), 1.0 + i, arrival=float(i)) for i in range(10)]  # TTFT 0.1 .. 1.0 s
    out = summarize(records, [np.array([0.01, 0.03])], Slo(ttft_ms=500))
    assert out.slo_attainment == pytest.approx(0.5)
    assert out.duration_s == pytest.approx(9 + 10.0)  # last arrival 9 + its E2EL 10
    assert out.goodput_rps == pytest.approx(5 / 19)
    assert out.ttft_ms.p50 == pytest.approx(np.percentile(np.arange(1, 11) * 100.0, 50))
    assert out.itl_ms.mean == pytest.approx(20.0)
    assert RunSummary.from_dict(json.loads(json.dumps(out.as_dict()))) == out
    assert out.as_dict()["ttft_ms"] == {"mean": out.ttft_ms.mean, "p50": out.ttft_ms.p50, "p90": out.ttft_ms.p90,
                                        "p99": out.ttft_ms.p99}


def test_requests_refused_as_too_large_count_as_misses_in_attainment():
    records = [record(0.1, 1.0, arrival=float(i)) for i in range(6)]  # all six finished ones meet the SLO
    out = summarize(records, [], Slo(ttft_ms=500), num_refused=2)
    assert out.slo_attainment == pytest.approx(6 / 8)  # not 1.0: refusing what cannot fit meets no SLO
    assert out.num_requests == 6 and out.goodput_rps == summarize(records, [], Slo(ttft_ms=500)).goodput_rps


def test_slo_needs_at_least_one_target():
    with pytest.raises(ValueError, match="set at least one"):
        Slo(ttft_ms=None)


def test_token_times_keep_their_order_across_single_steps_and_decode_runs():
    import numpy as np

    from jevserve.sim.metrics import token_times_array

    parts = [0.5, 0.7, np.array([0.9, 1.1]), 1.3, np.array([1.5]), 1.7, 1.9]
    assert token_times_array(parts).tolist() == [0.5, 0.7, 0.9, 1.1, 1.3, 1.5, 1.7, 1.9]
    assert token_times_array([]).size == 0
