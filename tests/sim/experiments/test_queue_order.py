import math

import pytest

from jevserve.sim.engine import EngineConfig
from jevserve.sim.experiments.queue_order import QueueOrderSetup, aggregate, build_requests, calibrate_step_scale
from jevserve.sim.experiments.report import comparison_table, write_doc
from jevserve.sim.experiments.sweep import Cell, SweepContext, run_cells
from jevserve.sim.profile import load_profile


def small_setup(**kwargs) -> QueueOrderSetup:
    return QueueOrderSetup(profile=load_profile("qwen3-8b-h200"), num_requests=150, rates=(1.0, 1.3, 1.6),
                           seeds=(0, 1), config=EngineConfig(max_num_seqs=2), **kwargs)


def test_setup_runs_every_policy_with_and_without_aging_and_delays_only_plf():
    specs = small_setup().policies()
    assert [s.label for s in specs] == ["fcfs", "fcfs+aging", "spf", "spf+aging", "plf", "plf+aging", "tlf",
                                        "tlf+aging"]
    assert {s.name for s in specs if s.decision_delay_s > 0} == {"plf"}


def test_requests_come_from_the_test_split_with_oracle_predictions():
    requests, source = build_requests(small_setup())
    assert len(requests) == 150 and all(r.predicted_output_tokens is not None for r in requests)
    assert source["kind"] == "noisy oracle" and source["kendall_tau"] == pytest.approx(0.6, abs=0.01)


def test_aggregate_and_comparison_table_cover_every_policy_and_published_cell():
    setup = small_setup(step_scale=0.8)
    requests, _ = build_requests(setup)
    context = SweepContext(tuple(requests), load_profile("qwen3-8b-h200"), setup.config, setup.slo)
    cells = [Cell(p, r, s) for p in setup.policies() for r in setup.rates for s in setup.seeds]
    agg = aggregate(run_cells(cells, context, jobs=1), setup)
    assert set(agg) == {s.label for s in setup.policies()}
    for data in agg.values():
        attainment = [e["slo_attainment"][0] for e in data["per_rate"]]
        assert all(0 <= a <= 1 for a in attainment)
    table = comparison_table(agg)
    assert table.count("\n") == 2 + 12  # header, rule and one row per published number
    assert "| SLO attainment at 1.42 req/s | FCFS | 42.0% | — |" in table  # 1.42 is not in this small sweep


def test_calibration_finds_the_scale_where_fcfs_goodput_hits_the_target():
    setup = small_setup(target_fcfs_goodput=1.3)
    requests, _ = build_requests(setup)
    scale = calibrate_step_scale(setup, requests, jobs=1, log=lambda _: None)
    from jevserve.sim.experiments.queue_order import fcfs_goodput, scaled_profile

    context = SweepContext(tuple(requests), scaled_profile(setup.profile, scale), setup.config, setup.slo)
    assert fcfs_goodput(context, setup, jobs=1) == pytest.approx(1.3, abs=0.02)
    assert not math.isnan(scale)


def test_write_doc_replaces_only_the_generated_section(tmp_path):
    from jevserve.sim.experiments.report import GENERATED_END, GENERATED_START

    doc = tmp_path / "q.md"
    doc.write_text(f"# Title\n\nhand-written intro\n\n{GENERATED_START}\nold\n{GENERATED_END}\n\nhand-written end\n")
    write_doc(doc, f"{GENERATED_START}\nnew\n{GENERATED_END}")
    text = doc.read_text()
    assert "hand-written intro" in text and "hand-written end" in text and "new" in text and "old" not in text
