import pytest

from jevserve.plan.table import MAX_PROBES, TableCell, TableContext, parse_policy, run_table_cell, search_replicas
from jevserve.sim.engine import EngineConfig
from jevserve.sim.metrics import Slo
from tests.plan.builders import make_profile, make_workload


def step_attainment(needed: int):
    """Attainment that meets 0.9 from `needed` replicas on, and records what was asked."""
    asked = []

    def attainment(n: int) -> float:
        asked.append(n)
        return 0.95 if n >= needed else 0.5

    return attainment, asked


@pytest.mark.parametrize("start", [1, 3, 5, 9])
def test_search_finds_the_fewest_replicas_from_any_start(start):
    attainment, asked = step_attainment(5)
    found, tried = search_replicas(attainment, start, 0.9)
    assert found == 5
    assert len(asked) == len(set(asked))  # each count simulated once
    assert tried[5] == 0.95 and (5 == 1 or tried.get(4) == 0.5)


def test_search_gives_up_after_max_probes():
    found, tried = search_replicas(lambda n: 0.0, 1, 0.9)
    assert found is None and len(tried) == MAX_PROBES


def test_parse_policy_gives_plf_its_decision_delay_and_aging():
    plf = parse_policy("plf+aging", aging_s=10.0, decision_delay_s=0.092)
    fcfs = parse_policy("fcfs", aging_s=10.0, decision_delay_s=0.092)
    assert (plf.label, plf.aging_s, plf.decision_delay_s) == ("plf+aging", 10.0, 0.092)
    assert (fcfs.label, fcfs.aging_s, fcfs.decision_delay_s) == ("fcfs", None, 0.0)
    with pytest.raises(ValueError, match="expected NAME or NAME\\+aging"):
        parse_policy("fcfs+fast", aging_s=1.0, decision_delay_s=0.0)


def test_a_table_cell_simulates_a_cluster_and_reports_attainment():
    profile = make_profile(constant_us=2000)
    requests = tuple(r.__class__(r.request_id, 0.0, r.num_prompt_tokens, r.num_output_tokens, 100.0)
                     for r in make_workload(60, output=40))
    ctx = TableContext(requests, {profile.name: profile}, {"fcfs": parse_policy("fcfs", aging_s=1, decision_delay_s=0)},
                       EngineConfig(max_num_seqs=8), Slo(), 40.0, "jsq", 256.0)
    row = run_table_cell(TableCell(profile.name, "fcfs", 2, 0), ctx)
    assert row["key"] == f"{profile.name}|fcfs|2|0"
    assert 0.0 <= row["slo_attainment"] <= 1.0 and row["ttft_p99_ms"] > 0


def test_search_never_goes_below_the_stable_floor():
    found, tried = search_replicas(lambda n: 1.0, 6, 0.9, floor=4)
    assert found == 4 and min(tried) == 4
