import json

from jevserve.lab.cluster.sweep import ClusterCell, RouterRun, cells_for, run_cluster_cells
from jevserve.serving import Request
from jevserve.sim.cluster import ReplicaSpec
from jevserve.sim.cluster_run import ClusterSetup
from jevserve.sim.engine import EngineConfig
from jevserve.sim.metrics import Slo
from tests.sim.builders import make_profile


def make_setup(n: int = 60) -> ClusterSetup:
    requests = tuple(Request(f"r{i}", 0.0, 20 + (i * 7) % 50, 5 + (i * 3) % 20, float(5 + (i * 3) % 20))
                     for i in range(n))
    spec = ReplicaSpec(make_profile(constant_us=2000, prefill_us=5, decode_us=20), EngineConfig(max_num_seqs=4))
    return ClusterSetup((spec, spec), requests, Slo(ttft_ms=50.0))


def test_sweep_appends_each_cell_and_a_rerun_reuses_them(tmp_path):
    path = tmp_path / "runs.jsonl"
    cells = cells_for(["rr", "latency"], [50.0, 100.0], [0])
    done = []
    rows = run_cluster_cells(cells, make_setup(), results_path=path, jobs=1, on_done=done.append)
    assert len(done) == 4 and [r.key for r in rows] == [c.key for c in cells]
    assert len(path.read_text().splitlines()) == 4
    again = []
    rows_again = run_cluster_cells(cells, make_setup(), results_path=path, jobs=1, on_done=again.append)
    assert again == [] and rows_again == rows


def test_a_torn_last_line_is_rerun_not_fatal(tmp_path):
    path = tmp_path / "runs.jsonl"
    cells = [ClusterCell("jsq", 50.0, 0), ClusterCell("jsq", 50.0, 1)]
    run_cluster_cells(cells[:1], make_setup(), results_path=path, jobs=1)
    path.write_text(path.read_text() + '{"key": "jsq|50.0000|1", "rou')  # killed mid-write
    rows = run_cluster_cells(cells, make_setup(), results_path=path, jobs=1)
    assert [r.seed for r in rows] == [0, 1]


def test_the_same_seed_gives_every_router_the_same_arrivals_and_summary_fields():
    rows = run_cluster_cells(cells_for(["rr", "jsq"], [80.0], [3]), make_setup(), jobs=1)
    rr, jsq = rows
    assert rr.summary.metrics.num_requests == jsq.summary.metrics.num_requests == 60
    assert {"per_replica", "estimator", "slo_attainment", "ttft_ms"} <= set(rr.as_dict())
    assert sum(x.num_requests for x in rr.summary.per_replica) == 60
    assert RouterRun.from_dict(rr.as_dict()) == rr
    json.dumps(rr.as_dict())  # a results-file line is plain JSON
