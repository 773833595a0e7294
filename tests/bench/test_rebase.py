"""`jevserve bench rebase`: a row's stored test actions rescored against the current items and zero-points."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from jevserve.bench.paired import StoredTask
from jevserve.bench.rebase import rebase_document
from jevserve.bench.results import latest_results

RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.fixture(scope="module")
def committed() -> dict[str, dict]:
    return {d["model"]: d for d in latest_results(RESULTS).documents}


def test_a_row_of_the_current_version_keeps_its_version_and_rescores_only_the_moved_zero_points(committed):
    # the baselines rerun under another encoder build moved the cache tasks' cosine rule: the model rows of the same
    # bench version were carried onto it as "0.4 rebased to 0.4", which the board then read as an older version
    reference = copy.deepcopy(committed["default-rules"])
    reference["num_resamples"] = 200
    row = next(d for d in committed.values()
               if d.get("bench_version") == reference["bench_version"] and d["model"] != "default-rules"
               and "cache-pairs" in d["tasks"] and not d.get("rebased_from"))
    moved = reference["tasks"]["cache-pairs"]["items"]
    moved["default"] = [not d for d in moved["default"][:5]] + moved["default"][5:]
    document = rebase_document(row, reference, note="test")
    assert document["bench_version"] == reference["bench_version"]
    for name, task in document["tasks"].items():
        if name == "cache-pairs":
            assert task["items"]["default"] == moved["default"]
            assert task["items"]["values"] == row["tasks"][name]["items"]["values"]  # the row's own actions
            stored = StoredTask.from_result(name, task)
            expected = stored.scale().score(stored.metric(stored.labels, np.asarray(task["items"]["values"])))
            assert task["score"] == pytest.approx(float(expected), abs=1e-9)
        else:
            assert task == row["tasks"][name], name  # untouched, intervals and all


def test_a_row_of_an_older_version_says_so(committed):
    reference = copy.deepcopy(committed["default-rules"])
    reference["num_resamples"] = 200
    old = copy.deepcopy(next(d for d in committed.values() if d.get("bench_version") == reference["bench_version"]
                             and d["model"] not in ("default-rules",) and "cache-pairs" in d["tasks"]))
    old["bench_version"] = "0.3"
    document = rebase_document(old, reference, note="test")
    assert document["bench_version"] == f"0.3 rebased to {reference['bench_version']}"
