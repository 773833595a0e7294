"""A row's task cells and averages from shared draws (bench.paired): the score with its interval, the share of
the default-to-oracle gap, the raw difference from the default rule and how often the row beats it."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from jevserve.bench.paired import Resampled, StoredTask, TaskScale
from jevserve.bench.stats import interval


@dataclass(frozen=True)
class TaskCell:
    """One row's result on one task, every number from the same draws."""

    task: str
    score: float  # 100 × (m − default) / (oracle − chance), on the whole test side
    low: float  # 95% interval of the score over draws
    high: float
    gap_share: float  # 100 × (m − default) / (oracle − default): the share of the default's gap closed
    gap_low: float
    gap_high: float
    difference: float  # m − default, in the task's metric
    difference_low: float
    difference_high: float
    p_beats_rule: float  # share of draws on which m > default
    near_oracle: bool  # reported apart: the default closes ≥ 2/3 of the chance-to-oracle range on train
    nan_draws: int  # draws on which the metric was undefined (a draw without one class); 0 in practice
    draws: np.ndarray = field(repr=False, compare=False)  # the score per draw, for averages, ranks and Δs


def task_cell(
    task: StoredTask, values: np.ndarray, model_draws: np.ndarray, default_draws: np.ndarray, *, near_oracle: bool
) -> TaskCell:
    """The cell of a row whose test predictions are `values` (its metric per draw: `model_draws`)."""
    scale: TaskScale = task.scale()
    value = task.metric(task.labels, values)
    score_draws = scale.score(model_draws - default_draws + scale.default)
    gap_draws = scale.gap_share(model_draws, default_draws)
    difference = model_draws - default_draws
    nan_draws = int(np.sum(~np.isfinite(score_draws)))
    with np.errstate(invalid="ignore"):
        beats = float(np.mean(difference[np.isfinite(difference)] > 0)) if np.isfinite(difference).any() else np.nan
    return TaskCell(
        task=task.name,
        score=float(scale.score(value)),
        low=interval(score_draws)[0], high=interval(score_draws)[1],
        gap_share=float(scale.gap_share(value)),
        gap_low=interval(gap_draws)[0], gap_high=interval(gap_draws)[1],
        difference=float(value - scale.default),
        difference_low=interval(difference)[0], difference_high=interval(difference)[1],
        p_beats_rule=beats,
        near_oracle=near_oracle,
        nan_draws=nan_draws,
        draws=score_draws,
    )  # fmt: skip


def row_cells(
    tasks: Mapping[str, StoredTask], row: str, values: Mapping[str, np.ndarray], resampled: Resampled,
    near_oracle: Mapping[str, bool],
) -> dict[str, TaskCell]:
    """A row's cell on every task it has, from `resampled` (made with `values` as the row `row`)."""
    return {
        name: task_cell(task, values[name], resampled.rows[row][name], resampled.default[name],
                        near_oracle=near_oracle.get(name, False))
        for name, task in tasks.items()
        if name in values and name in resampled.rows.get(row, {})
    }


@dataclass(frozen=True)
class Average:
    """The mean of some task scores, with its 95% interval over the same draws."""

    score: float
    low: float
    high: float
    tasks: tuple[str, ...]
    draws: np.ndarray = field(repr=False, compare=False)


def average(cells: Mapping[str, TaskCell], names: Sequence[str]) -> Average:
    """The mean of the named cells (those the row has), per draw and on the whole test side."""
    present = [n for n in names if n in cells]
    if not present:
        return Average(float("nan"), float("nan"), float("nan"), (), np.array([np.nan]))
    stacked = np.vstack([cells[n].draws for n in present])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(stacked, axis=0)
    low, high = interval(means)
    return Average(float(np.mean([cells[n].score for n in present])), low, high, tuple(present), means)


def cell_fields(cell: TaskCell) -> dict:
    """What a results file stores of a cell."""
    return {
        "score": cell.score,
        "score_interval": [cell.low, cell.high],
        "gap_share": cell.gap_share,
        "gap_share_interval": [cell.gap_low, cell.gap_high],
        "difference": cell.difference,
        "difference_interval": [cell.difference_low, cell.difference_high],
        "p_beats_rule": cell.p_beats_rule,
        "near_oracle": cell.near_oracle,
        "nan_draws": cell.nan_draws,
    }


def average_fields(result: Average) -> dict:
    """What a results file stores of an average."""
    return {"score": result.score, "interval": [result.low, result.high], "num_tasks": len(result.tasks),
            "tasks": list(result.tasks)}
