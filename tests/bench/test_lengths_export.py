"""Reply-length predictions are written in the format the simulator reads."""

from __future__ import annotations

import numpy as np

from jevserve.bench.lengths_export import write_predictions
from jevserve.sim.workloads.predictions import read_predictions
from tests.bench.builders import make_items


def test_written_predictions_read_back_through_the_simulators_reader(tmp_path):
    items = make_items([True, False, True], prefix="conv")
    path = tmp_path / "lengths.jsonl"
    write_predictions(path, items, np.array([12.345, 300.0, 0.0]))
    assert read_predictions(path) == {"conv-0": 12.3, "conv-1": 300.0, "conv-2": 0.0}
    assert all('"split": "test"' in line for line in path.read_text().splitlines())
