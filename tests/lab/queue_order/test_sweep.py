import dataclasses
import json

from jevserve.lab.queue_order.sweep import Cell, PolicySpec, SweepContext, run_cells
from jevserve.serving import Request
from jevserve.sim.engine import EngineConfig
from jevserve.sim.metrics import Slo
from tests.sim.builders import make_profile


def context() -> SweepContext:
    requests = tuple(Request(f"r{i}", 0.0, 20 + i, 5 + i % 7) for i in range(40))
    return SweepContext(requests, make_profile(decode_us=20), EngineConfig(max_num_seqs=2), Slo(ttft_ms=50))


def test_policy_label_marks_aging():
    assert PolicySpec("spf").label == "spf" and PolicySpec("spf", 10.0).label == "spf+aging"


def test_sweep_appends_each_cell_and_a_rerun_resumes_without_recomputing(tmp_path):
    cells = [Cell(PolicySpec(p), rate, seed) for p in ("fcfs", "tlf") for rate in (5.0, 20.0) for seed in (0, 1)]
    path = tmp_path / "runs.jsonl"
    first = run_cells(cells[:5], context(), results_path=path, jobs=1)
    assert len(path.read_text().splitlines()) == 5
    computed = []
    rows = run_cells(cells, context(), results_path=path, jobs=2, on_done=computed.append)
    assert len(computed) == 3  # only the cells not on disk
    assert rows[:5] == first
    assert [r.key for r in rows] == [c.key for c in cells]
    assert len([json.loads(x) for x in path.read_text().splitlines()]) == 8


def test_same_cell_gives_the_same_result_in_a_worker_process(tmp_path):
    cell = Cell(PolicySpec("spf", 0.01), 30.0, 3)
    (inline,) = run_cells([cell], context(), jobs=1)
    (pooled, _) = run_cells([cell, Cell(PolicySpec("fcfs"), 30.0, 3)], context(), jobs=2)
    assert inline.cpu_s > 0 and pooled.cpu_s > 0
    assert dataclasses.replace(inline, cpu_s=0.0) == dataclasses.replace(pooled, cpu_s=0.0)
