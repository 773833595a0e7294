"""The reliability plot reads a model's answers cache and bins it as the bench's ECE does."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from jevserve.bench import TASKS, Item
from jevserve.bench.answers_cache import request_key
from jevserve.web.calibration import reliability, reliability_svg


def _loaded(n: int = 20):
    task = TASKS["guard-injection"]
    test = tuple(Item(f"i{k}", f"text {k}", k % 2 == 0, "test", "s") for k in range(n))
    return task, [SimpleNamespace(task=task, train=(), test=test)]


def _write_cache(path, task, items, probability):
    with path.open("w") as f:
        for item in items:
            key = request_key("m", task.request(item))
            f.write(json.dumps({"key": key, "answers": {"injection": {"type": "noul", "noul": probability(item)}}}))
            f.write("\n")


def test_perfectly_separated_answers_sit_in_the_end_bins(tmp_path):
    task, loaded = _loaded()
    _write_cache(tmp_path / "m@abc.jsonl", task, loaded[0].test, lambda i: 0.95 if i.label else 0.05)
    curve = reliability(tmp_path, "m", loaded)
    assert curve.tasks == ("guard-injection",) and curve.num_items == 20
    assert curve.mean_predicted == pytest.approx((0.05, 0.95)) and curve.positive_share == (0.0, 1.0)
    assert curve.bin_counts == (10, 10)
    assert reliability_svg(curve).count("<circle") == 2


def test_task_only_partly_in_the_cache_is_left_out(tmp_path):
    task, loaded = _loaded()
    _write_cache(tmp_path / "m.jsonl", task, loaded[0].test[:5], lambda i: 0.5)
    assert reliability(tmp_path, "m", loaded) is None


def test_no_cache_file_means_no_plot(tmp_path):
    _, loaded = _loaded()
    assert reliability(tmp_path, "m", loaded) is None
