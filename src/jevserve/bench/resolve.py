"""Fill a results document's scores, intervals and averages from one set of shared draws (bench.paired).

A task result from `scoring.score_row` holds its point values and stored test arrays; `resolve_tasks` adds, from
the document's joint draws, each task's score interval, share of the gap, difference from the default rule and
P(beats the rule), the raw metric intervals of the row, the default and the oracle, and returns the averages:
"average" (the headline: tasks with `headline` set and not near-oracle) and "average_all" (every task that is
not near-oracle). Near-oracle tasks (the default closes ≥ 2/3 of the chance-to-oracle range on the train side)
are listed in "near_oracle_tasks" and reported by their raw difference and P(beats the rule) only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jevserve.bench.cells import TaskCell, average, average_fields, cell_fields, row_cells
from jevserve.bench.paired import StoredTask, near_oracle, resample
from jevserve.bench.stats import BOOTSTRAP_SEED, NUM_RESAMPLES, interval

ROW = "row"


def resolve_tasks(
    task_results: dict[str, dict[str, Any]], tasks: Mapping[str, Any], num_resamples: int = NUM_RESAMPLES,
    seed: int = BOOTSTRAP_SEED, cells_out: dict[str, TaskCell] | None = None,
) -> dict[str, Any]:
    """Update every task result in place from the shared draws; return the averages and the near-oracle list
    (`cells_out`, when given, receives the cells with their draws)."""
    if not task_results:
        empty = {"score": float("nan"), "interval": [float("nan"), float("nan")], "num_tasks": 0, "tasks": []}
        return {"average": empty, "average_all": dict(empty), "near_oracle_tasks": []}
    stored = {n: StoredTask.from_result(n, r) for n, r in task_results.items()}
    values = {n: np.asarray(r["items"]["values"]) for n, r in task_results.items()}
    resampled = resample(stored, {ROW: values}, num_resamples, seed)
    near = {n: near_oracle(r.get("default_train_share")) for n, r in task_results.items()}
    cells = row_cells(stored, ROW, values, resampled, near)
    if cells_out is not None:
        cells_out.update(cells)
    for name, result in task_results.items():
        result.update(cell_fields(cells[name]))
        metrics = result["metrics"]
        for key, draws in (("default", resampled.default[name]), ("oracle", resampled.oracle[name]),
                           (result.get("predictor"), resampled.rows[ROW][name])):
            if key in metrics:
                metrics[key]["interval"] = list(interval(draws))
    apart = [n for n in task_results if near[n]]
    headline = [n for n in task_results if getattr(tasks.get(n), "headline", True) and not near[n]]
    every = [n for n in task_results if not near[n]]
    return {
        "average": average_fields(average(cells, headline)),
        "average_all": average_fields(average(cells, every)),
        "near_oracle_tasks": apart,
    }
