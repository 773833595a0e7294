"""Committed results files are what the current code computes: baselines from the data, model rows from their
stored answers' actions against the current zero-points (staleness checks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jevserve.bench.paired import StoredTask
from jevserve.bench.pipeline import score_baselines
from jevserve.bench.results import latest_results

RESULTS = Path(__file__).resolve().parents[2] / "results"
COMPARED = ("ids", "labels", "values", "default", "oracle")


def _committed() -> dict[str, dict]:
    return {d["model"]: d for d in latest_results(RESULTS).documents}


@pytest.fixture(scope="module")
def fresh_baselines(bench_tasks) -> dict[str, dict]:
    data, loaded = bench_tasks
    # few resamples: the intervals are not compared here, and the full count tripled this fixture's time
    return {d["model"]: d for d in score_baselines(loaded, data, command="", num_resamples=10)}


def _same_task(committed: dict, fresh: dict, where: str) -> None:
    for key in COMPARED:
        assert committed["items"][key] == pytest.approx(fresh["items"][key]) if key in ("values", "default") and \
            isinstance(fresh["items"][key][0], float) else committed["items"][key] == fresh["items"][key], \
            f"{where}: stored {key} differ from what the code computes; regenerate this row"
    assert committed["score"] == pytest.approx(fresh["score"], abs=1e-9), where
    for name, metric in fresh["metrics"].items():
        assert committed["metrics"][name]["value"] == pytest.approx(metric["value"], abs=1e-12), f"{where} {name}"


@pytest.mark.slow
def test_committed_baseline_rows_match_what_the_code_computes(fresh_baselines):
    committed = _committed()
    for row, fresh in fresh_baselines.items():
        assert row in committed, f"results/{row}/ is missing; run `jevserve bench run --baselines`"
        assert set(committed[row]["tasks"]) == set(fresh["tasks"]), row
        for name, result in fresh["tasks"].items():
            _same_task(committed[row]["tasks"][name], result, f"{row}/{name}")


def test_model_rows_are_scored_on_the_current_items_and_zero_points():
    """Rows of the current bench version; older rows are shown only where their items are current (the board leaves
    the other cells out and says so)."""
    committed = _committed()
    reference = committed["default-rules"]["tasks"]
    current = committed["default-rules"]["bench_version"]
    for row, document in committed.items():
        if document.get("bench_version") != current:
            continue
        for name, result in document["tasks"].items():
            where = f"{row}/{name}"
            items, ref = result["items"], reference[name]["items"]
            assert items["ids"] == ref["ids"], f"{where}: test items differ from the default-rules row"
            assert items["default"] == ref["default"] and items["oracle"] == ref["oracle"], \
                f"{where}: scored against another default or oracle than the current one; regenerate or rebase"
            task = StoredTask.from_result(name, result)
            score = task.scale().score(task.metric(task.labels, np.asarray(items["values"])))
            assert result["score"] == pytest.approx(float(score), abs=1e-9, nan_ok=True), where
