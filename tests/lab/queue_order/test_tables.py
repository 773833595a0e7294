import math

from jevserve.lab.queue_order.tables import PUBLISHED, fmt, goodput_table, rate_table, side_by_side_table

NAN3 = (math.nan, math.nan, math.nan)


def make_agg(rates=(1.30, 1.42, 1.54), attainment=0.5, ttft_s=2.0) -> dict:
    """Every policy with the same values at every rate, two seeds that straddle the mean."""
    def entry(rate):
        return {"rate_rps": rate,
                "slo_attainment": (attainment, attainment - 0.1, attainment + 0.1),
                "ttft_p90_s": (ttft_s, ttft_s, ttft_s), "ttft_p99_s": (ttft_s, ttft_s, ttft_s),
                "max_wait_s": (7.0, *NAN3[1:]), "num_preemptions": (3.0, 3.0, 3.0),
                "keeps_up": (1.0, 1.0, 1.0), "completion_ratio": (0.99, 0.98, 1.0),
                "long_wait_p999_s": (4.0, 3.0, 5.0),
                "by_seed": {"slo_attainment": [attainment - 0.01, attainment + 0.01], "ttft_p90_s": [ttft_s, ttft_s],
                            "ttft_p99_s": [ttft_s, ttft_s]}}

    return {label: {"per_rate": [entry(r) for r in rates], "goodput_rps": (1.2, ""),
                    "latency_only_goodput_rps": (1.4, ""),
                    "goodput_by_seed": [(1.1, ""), (1.3, "")], "goodput_interval": (1.2, 0.9, 1.5)}
            for label in ("fcfs", "fcfs+aging", "spf", "spf+aging", "plf", "plf+aging", "tlf", "tlf+aging")}


def test_side_by_side_has_one_row_per_published_number_and_one_column_per_scenario():
    table = side_by_side_table({"thinking": make_agg(), "two-seqs": make_agg()})
    lines = table.splitlines()
    assert len(lines) == 2 + sum(len(v) for v in PUBLISHED.values())
    assert lines[0] == "| metric | policy | published | fitted or predicted | `thinking` | `two-seqs` |"


def test_side_by_side_cells_show_interval_seeds_and_distance_from_published():
    table = side_by_side_table({"thinking": make_agg()})
    assert ("| SLO attainment at 1.42 req/s | FCFS | 42.0% | prediction | 50.0% [40.0%, 60.0%]; seeds 49.0%, 51.0% "
            "(+8.0 pts) |") in table
    assert "| p90 TTFT (s) at 1.54 req/s | true length | 0.09 | prediction | 2 [2, 2]; seeds 2, 2 (x22) |" in table
    assert ("| goodput (req/s) | FCFS | 1.13 | **fitted** (calibration target) | 1.20 [0.90, 1.50]; seeds 1.10, "
            "1.30 (+0.07 req/s) |") in table
    assert "(-0.10 req/s from the range)" in table  # predicted length: 1.20 against 1.30-1.36


def test_rate_missing_from_the_sweep_shows_a_dash():
    table = side_by_side_table({"thinking": make_agg(rates=(1.0, 1.1))})
    assert "| SLO attainment at 1.30 req/s | FCFS | 75.0% | prediction | — |" in table


def test_rate_and_goodput_tables_list_every_policy():
    agg = make_agg()
    assert rate_table(agg, (1.30, 1.42, 1.54), "slo_attainment").splitlines()[2] == "| fcfs | 50.0% | 50.0% | 50.0% |"
    assert "| tlf+aging | 1.20 | +0% | [0.90, 1.50] | 1.10, 1.30 | 1.40 | 7.0 |" in goodput_table(agg)


def test_format_by_metric():
    assert fmt(0.925, "slo_attainment") == "92.5%" and fmt(52.94, "ttft_p99_s") == "52.9"
    assert fmt(math.nan, "ttft_p90_s") == "—" and fmt(12.4, "num_preemptions") == "12"
    assert fmt(1234.5, "max_wait_s") == "1,234" and fmt(0.0426, "ttft_p90_s") == "0.0426"


def test_a_knob_fixed_by_hand_is_not_called_a_prediction_of_the_number_it_may_have_been_fitted_to():
    # a knob passed on the command line was labelled "prediction (knob not calibrated to it)" even when its value was
    # the calibrated one, on the calibration's own runs
    fcfs_goodput = "| goodput (req/s) | FCFS | 1.13 | "
    fixed = side_by_side_table({"two-seqs": make_agg()}, fitted_in=[], fixed_in=["two-seqs"])
    assert fcfs_goodput + "knob fixed by hand: fitted where these runs are the ones it was calibrated on" in fixed
    other_target = side_by_side_table({"two-seqs": make_agg()}, fitted_in=[])
    assert fcfs_goodput + "prediction (knob not calibrated to it) |" in other_target
    mixed = side_by_side_table({"thinking": make_agg(), "two-seqs": make_agg()}, fitted_in=["thinking"],
                               fixed_in=["two-seqs"])
    assert fcfs_goodput + "**fitted** in `thinking`; knob fixed by hand in `two-seqs` |" in mixed
