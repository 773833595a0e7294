"""threshold_spread.py on made-up scores: the gateway's threshold is the highest per-shape one, the resampled range
contains what the committed calibration gives, and the rounds are the same for the same seed."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "decide"))
import threshold_spread as ts


def test_the_gateway_threshold_is_the_highest_of_the_shapes():
    calibration = {"bare": np.linspace(0, 0.5, 100), "system": np.linspace(0, 0.9, 100)}
    # 1% of 100: one request may be acted on, so the threshold sits just above the second-highest
    assert ts.gateway_threshold(calibration) == np.nextafter(np.linspace(0, 0.9, 100)[-2], np.inf)


def test_split_reads_calibration_positives_and_goal_shapes():
    groups = ["calibration:bare", "everyday:bare", "everyday:list", "injection", "suffixed:injection", "harmful:x"]
    units = [SimpleNamespace(group=g) for g in groups]
    scores = np.arange(len(groups), dtype=float)
    calibration, positives, everyday = ts.split(units, scores, "guard")
    assert list(calibration) == ["bare"] and list(everyday) == ["bare"]  # lists are not a goal shape
    assert positives.tolist() == [3.0]  # the suffixed injection is not in guard recall, as in reader_goals
    assert ts.split(units, scores, "harm")[1].tolist() == [5.0]


def test_the_resampled_range_holds_the_committed_point_and_repeats_for_a_seed():
    rng = np.random.default_rng(1)
    calibration = {"bare": rng.random(300), "system": rng.random(300) ** 3}
    positives, everyday = rng.random(200) ** 0.2, {"bare": rng.random(400)}
    found = ts.spread(calibration, positives, everyday, rounds=300, seed=0)
    low, _, high = found["resampled"]["threshold"]
    assert low <= found["threshold"] <= high and low < high
    low, _, high = found["resampled"]["recall"]
    assert low <= found["recall"] <= high
    assert found == ts.spread(calibration, positives, everyday, rounds=300, seed=0)
