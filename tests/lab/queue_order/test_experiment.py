import math

import numpy as np
import pytest

from jevserve.lab.queue_order.experiment import (
    QueueOrderSetup,
    aggregate,
    base_requests,
    build_context,
    calibrate_knob,
    fcfs_goodput,
)
from jevserve.lab.queue_order.scenarios import get_scenario
from jevserve.lab.queue_order.sweep import Cell, PolicySpec, run_cells
from jevserve.sim.engine import EngineConfig
from jevserve.sim.errors import WorkloadError
from jevserve.sim.profile import load_profile
from jevserve.sim.stats import max_rate_meeting
from jevserve.sim.workloads.lengths import scale_output_lengths


def small_setup(scenario: str = "two-seqs", **kwargs) -> QueueOrderSetup:
    chosen = get_scenario(scenario)
    return QueueOrderSetup(scenario=chosen, profile=load_profile(chosen.profile), config=chosen.config,
                           num_requests=kwargs.pop("num_requests", 150), rates=kwargs.pop("rates", (1.0, 1.3, 1.6)),
                           seeds=(0, 1), **kwargs)


def test_setup_runs_the_orders_and_the_aging_variants_and_delays_only_those_reading_predictions():
    specs = small_setup().policies()
    assert [s.label for s in specs] == ["fcfs", "spf", "plf", "plf+aging", "plf-edf", "plf-relage", "tlf"]
    assert {s.name for s in specs if s.decision_delay_s > 0} == {"plf", "plf-edf", "plf-relage"}


def test_context_holds_test_split_requests_with_oracle_predictions():
    context, source = build_context(small_setup(), 1.0)
    assert len(context.requests) == 150 and all(r.predicted_output_tokens is not None for r in context.requests)
    assert source["kind"] == "noisy oracle" and source["kendall_tau"] == pytest.approx(0.6, abs=0.01)


def test_a_predictions_file_is_attached_and_its_kendall_tau_measured(tmp_path):
    import json

    base = base_requests(small_setup())
    path = tmp_path / "p.jsonl"
    # Predictions that reverse the true order: tau must come out -1 (ties aside), measured, not assumed.
    path.write_text("".join(json.dumps({"request_id": r.request_id, "predicted_tokens": 1e6 - r.num_output_tokens})
                            + "\n" for r in base))
    context, source = build_context(small_setup(predictions_path=path), 1.0)
    assert [r.predicted_output_tokens for r in context.requests] == [1e6 - r.num_output_tokens for r in base]
    assert source["kind"] == "file" and source["kendall_tau"] == pytest.approx(-1.0, abs=1e-9)


def test_output_scaling_is_applied_once_and_every_policy_and_seed_serves_the_same_tokens():
    setup = small_setup("thinking", num_requests=60, rates=(0.5, 2.0))
    context, _ = build_context(setup, 3.0)
    expected = scale_output_lengths(base_requests(setup), 3.0, max_model_len=setup.scenario.max_model_len)
    assert [r.num_output_tokens for r in context.requests] == [r.num_output_tokens for r in expected]
    assert context.profile == setup.profile  # the reply-length knob leaves the step times alone
    cells = [Cell(p, r, s) for p in setup.policies() for r in setup.rates for s in setup.seeds]
    rows = run_cells(cells, context, jobs=1)
    total = sum(r.num_output_tokens for r in expected)
    served = {round(row.metrics.output_throughput * row.metrics.duration_s) for row in rows}
    assert served == {total}  # 32 runs: 8 policies x 2 rates x 2 seeds, each sending every scaled reply


def test_lazy_fcfs_goodput_equals_the_goodput_over_every_rate():
    setup = small_setup(knob_value=0.8, rates=(0.8, 1.1, 1.4, 1.7, 2.0))
    context, _ = build_context(setup, 0.8)
    rows = run_cells([Cell(PolicySpec("fcfs"), r, s) for r in setup.rates for s in setup.seeds], context, jobs=1)
    attainment = [np.mean([x.metrics.slo_attainment for x in rows if x.rate_rps == r]) for r in setup.rates]
    rate, qualifier = max_rate_meeting(setup.rates, attainment, 0.9)
    assert qualifier == ""  # the check only means something when the goodput falls inside the sweep
    assert fcfs_goodput(context, setup, jobs=1) == pytest.approx(rate)


def test_aggregate_keeps_means_intervals_and_per_seed_values_for_every_policy():
    setup = small_setup()
    context, _ = build_context(setup, 0.8)
    cells = [Cell(p, r, s) for p in setup.policies() for r in setup.rates for s in setup.seeds]
    rows = run_cells(cells, context, jobs=1)
    agg = aggregate(rows, setup)
    assert set(agg) == {s.label for s in setup.policies()}
    entry = agg["tlf"]["per_rate"][1]
    seeds = [r.metrics.slo_attainment for r in sorted(rows, key=lambda r: r.seed)
             if r.policy == "tlf" and r.rate_rps == 1.3]
    assert entry["by_seed"]["slo_attainment"] == seeds
    assert entry["slo_attainment"][0] == pytest.approx(np.mean(seeds))
    assert len(agg["fcfs"]["goodput_by_seed"]) == 2


def test_calibration_finds_the_step_scale_where_fcfs_goodput_hits_the_target():
    setup = small_setup(target_fcfs_goodput=1.3)
    scale = calibrate_knob(setup, jobs=1, log=lambda _: None)
    context, _ = build_context(setup, scale)
    assert fcfs_goodput(context, setup, jobs=1) == pytest.approx(1.3, abs=0.02)
    assert not math.isnan(scale)


def test_unreachable_calibration_target_says_which_knob_and_what_to_do():
    setup = small_setup(target_fcfs_goodput=50.0)
    with pytest.raises(WorkloadError, match=r"target_fcfs_goodput=50.0 is not reachable with step_scale in "
                                            r"\[0.2, 3.0\] in scenario 'two-seqs'; fix the knob instead"):
        calibrate_knob(setup, jobs=1, log=lambda _: None)


def test_two_sequence_setup_uses_the_first_version_engine():
    assert small_setup().config == EngineConfig(max_num_seqs=2)


def test_a_doubled_run_sends_the_same_requests_again_in_another_order():
    from jevserve.lab.queue_order.experiment import doubled

    context, _ = build_context(small_setup(), 1.0)
    long = doubled(context)
    first, second = long.requests[:150], long.requests[150:]
    assert first == context.requests and len({r.request_id for r in long.requests}) == 300
    assert sorted(r.request_id for r in second) == sorted(f"{r.request_id}#2" for r in context.requests)
    assert [r.request_id.removesuffix("#2") for r in second] != [r.request_id for r in first]


def test_the_calibration_log_says_a_goodput_outside_the_sweep_as_such_not_as_a_number():
    # "step-time scale 3.0000: FCFS goodput -0.100 req/s" was the sweep's lowest rate pushed down for the root finder
    from jevserve.lab.queue_order.experiment import _said

    rates = (0.9, 1.0, 1.54)
    assert _said(0.9 - 1.0, rates) == "below the sweep (the SLO is missed at its lowest rate, 0.9 req/s)"
    assert _said(1.54 + 1.0, rates) == "above the sweep (the SLO is met at its highest rate, 1.54 req/s)"
    assert _said(1.25, rates) == "1.250 req/s"
