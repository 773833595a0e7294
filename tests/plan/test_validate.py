import numpy as np
import pytest

from jevserve.plan.planner import CapacityModel
from jevserve.plan.validate import (
    OVERLOAD_FACTOR,
    RATE_FRACTIONS,
    ValidationCase,
    build_case,
    cells_for,
    compare,
    run_validation_cell,
    windowed_throughput,
)
from jevserve.sim.engine import EngineConfig
from jevserve.sim.errors import WorkloadError
from jevserve.sim.metrics import Slo
from tests.plan.builders import make_profile, make_workload


def test_windowed_throughput_of_evenly_spaced_finishes_is_their_rate():
    finishes = np.concatenate([np.linspace(0, 1, 5), 1 + np.arange(400) / 20.0, [50.0, 60.0]])
    assert windowed_throughput(finishes) == pytest.approx(20.0)


def test_validation_runs_every_fraction_and_the_overload_and_compares():
    profile = make_profile(constant_us=2000)
    case = ValidationCase("tiny", tuple(make_workload(300, output=60)), profile, EngineConfig(max_num_seqs=8), Slo())
    model = CapacityModel(case.requests, profile, case.config, ttft_slo_s=1.0)
    cells = cells_for(case, model.bound().rate_rps, [0])
    assert len(cells) == len(RATE_FRACTIONS) + 1
    assert cells[-1].rate_rps == pytest.approx(OVERLOAD_FACTOR * model.bound().rate_rps, rel=1e-4)
    rows = [run_validation_cell(c, {"tiny": case}) for c in cells]
    result = compare(case, model, rows, 0.9)
    assert result["binding"] == "batch slots"
    # The bound is an upper limit on the throughput a simulated replica reaches.
    assert result["measured_saturation_rps"] <= 1.05 * result["analytic_saturation_rps"]
    assert len(result["per_rate"]) == len(RATE_FRACTIONS)


def test_unknown_validation_case_lists_the_known_ones():
    with pytest.raises(WorkloadError, match="unknown validation case 'huge'; expected one of: sharegpt"):
        build_case("huge", make_profile(), EngineConfig(), Slo())


def test_the_validation_runs_every_case_by_default():
    from jevserve.cli import build_parser
    from jevserve.plan.validate import CASES

    args = build_parser().parse_args(["plan", "validate"])
    assert args.cases.split(",") == list(CASES)
