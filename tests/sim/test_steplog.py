import pytest

from jevserve.serving import Request, make_queue_policy
from jevserve.sim.calibrate import fit_step_time
from jevserve.sim.engine import EngineConfig
from jevserve.sim.run import simulate
from jevserve.sim.steplog import StepLogger
from tests.sim.builders import make_profile


def test_step_logger_expands_decode_runs_into_single_steps_a_fit_recovers():
    profile = make_profile(constant_us=3000, prefill_us=12, decode_us=6, context_us=0.02)
    requests = [Request(f"r{i}", i * 0.05, 50 + 37 * i, 40 + 13 * i) for i in range(30)]
    logger = StepLogger()
    _, recorder = simulate(requests, profile, make_queue_policy("fcfs"), EngineConfig(max_num_seqs=4),
                           observers=(logger,))
    assert len(logger.rows) == recorder.num_steps
    import numpy as np

    result = fit_step_time(np.asarray(logger.rows, dtype=float))
    assert result.model.constant == pytest.approx(3000, rel=1e-6)
    assert result.model.per_decode_token == pytest.approx(6, rel=1e-6)
    assert result.model.per_decode_context_token == pytest.approx(0.02, rel=1e-6)
