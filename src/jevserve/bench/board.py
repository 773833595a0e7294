"""The leaderboard's numbers: per row, task and category scores with intervals, the average, and paired ranks.

Rows are the newest results file of each folder under `results/`. Ranks use paired resamples: on every bootstrap
draw each row is scored on the same test items (one joint draw over all tasks, items sharing a group or a text
drawn together), each row's headline average is taken, and rows are ranked; a row's rank interval is the
2.5th–97.5th percentile of its ranks. The headline average covers the default-rules row's headline tasks (every
task but schedule-return, which is reported beside it); a second average covers every task. Leak probes
(source-style, source-majority) and rows that lack some ranking tasks are shown but not ranked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.bench.results import latest_results
from jevserve.bench.scoring import joint_rescore
from jevserve.bench.stats import mean_with_interval, paired_ranks
from jevserve.bench.task import CATEGORIES

REFERENCE_ROW = "default-rules"
# Leak probes: rows that know where an item came from, not what it says; shown in their own table, never ranked.
PROBE_ROWS = ("source-style", "source-majority")


@dataclass(frozen=True)
class Cell:
    """A score with its 95% interval (NaN when the row has no such score)."""

    score: float
    low: float
    high: float


@dataclass(frozen=True)
class Row:
    """One row of the board."""

    model: str
    kind: str  # "model" or "baseline"
    date: str
    command: str
    wall_s: float | None
    num_decisions: int | None
    average: Cell
    categories: dict[str, Cell]
    tasks: dict[str, Cell]
    rank: dict[str, int] | None = None  # {"rank", "low", "high"}; None when not ranked
    notes: tuple[str, ...] = field(default_factory=tuple)
    average_all: Cell | None = None  # over every task the row has, schedule-return included
    split_salt: str | None = None  # the split salt of the row's results (None: older files, the bench's salt)

    @property
    def probe(self) -> bool:
        """A leak probe (source-only baseline), shown apart from the ranked rows."""
        return self.kind == "probe" or self.model in PROBE_ROWS


@dataclass(frozen=True)
class Board:
    """Everything the HTML page and the markdown table show."""

    rows: tuple[Row, ...]  # ranked rows first (by rank), then unranked rows by average
    tasks: tuple[str, ...]  # task names, board order
    task_categories: dict[str, str]
    ranking_tasks: tuple[str, ...]
    num_resamples: int
    ignored: tuple[str, ...]  # results files that were not read, with the reason
    warnings: tuple[str, ...] = ()  # e.g. a task whose rows were scored on different items (not paired)
    # per task, from the default-rules row: {"metric", "default", "oracle"} raw metric values on the test side
    reference: dict[str, dict[str, Any]] = field(default_factory=dict)
    headline_tasks: tuple[str, ...] = ()  # the ranking tasks that enter the headline average


def _cell(score: float | None, low: float | None, high: float | None) -> Cell:
    as_float = [float("nan") if v is None else float(v) for v in (score, low, high)]
    return Cell(*as_float)


def _resampled(document: dict[str, Any], num_resamples: int) -> dict[str, np.ndarray]:
    return joint_rescore(document["tasks"], num_resamples=num_resamples)


def _headline(document: dict[str, Any] | None, tasks: Sequence[str]) -> list[str]:
    # The reference row's file names its headline tasks; older files (or none) count every task.
    listed = (document or {}).get("average", {}).get("tasks")
    return [n for n in tasks if n in listed] if listed else list(tasks)


def _reference(document: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    if document is None:
        return {}
    return {
        name: {"metric": r["metric"], "default": r["metrics"]["default"]["value"],
               "oracle": r["metrics"]["oracle"]["value"]}
        for name, r in document["tasks"].items()
    }


def _mean_cell(point: Sequence[float], resampled: Sequence[np.ndarray]) -> tuple[Cell, np.ndarray]:
    if not point:
        return Cell(float("nan"), float("nan"), float("nan")), np.array([np.nan])
    means, (low, high) = mean_with_interval(resampled)
    return Cell(float(np.nanmean(point)), low, high), means


def _task_order(documents: Sequence[dict[str, Any]]) -> list[str]:
    from jevserve.bench.tasks import TASKS

    seen = {name for d in documents for name in d["tasks"]}
    return [n for n in TASKS if n in seen] + sorted(seen - set(TASKS))


def build_board(results_dir: Path) -> Board:
    """Read the newest results of every row and compute the board."""
    latest = latest_results(results_dir)
    documents = list(latest.documents)
    if not documents:
        raise FileNotFoundError(f"no bench results under {results_dir}; run `jevserve bench run` first")
    num_resamples = min(int(d.get("num_resamples", 1000)) for d in documents)
    tasks = _task_order(documents)
    categories = {n: next(d["tasks"][n]["category"] for d in documents if n in d["tasks"]) for n in tasks}
    reference = next((d for d in documents if d["model"] == REFERENCE_ROW), None)
    ranking_tasks = [n for n in tasks if reference is None or n in reference["tasks"]]
    headline = _headline(reference, ranking_tasks)

    rows, averages = [], {}
    for document in documents:
        resampled = _resampled(document, num_resamples)
        task_cells = {n: _cell(r["score"], *r["score_interval"]) for n, r in document["tasks"].items()}
        category_cells = {}
        for category in CATEGORIES:
            names = [n for n in document["tasks"] if categories[n] == category]
            if names:
                category_cells[category], _ = _mean_cell([task_cells[n].score for n in names],
                                                         [resampled[n] for n in names])
        names = list(document["tasks"])
        average_all, _ = _mean_cell([task_cells[n].score for n in names], [resampled[n] for n in names])
        in_headline = [n for n in names if n in headline]
        average, _ = _mean_cell([task_cells[n].score for n in in_headline], [resampled[n] for n in in_headline])
        notes = []
        probe = document.get("row_kind") == "probe" or document["model"] in PROBE_ROWS
        if probe:
            notes.append("leak probe: knows the source, not the decision; never ranked")
        elif all(n in document["tasks"] for n in ranking_tasks):
            _, averages[document["model"]] = _mean_cell(
                [task_cells[n].score for n in headline], [resampled[n] for n in headline]
            )
        else:
            notes.append(f"covers {len(names)} of {len(ranking_tasks)} tasks: not ranked")
        if document.get("rebased_from"):
            rerun = document.get("rerun_tasks") or []
            notes.append(f"bench {document.get('bench_version')}: stored test actions rescored on the current items "
                         "and zero-points, not rerun" + (f" (rerun: {', '.join(rerun)})" if rerun else ""))
        elif document.get("bench_version") is None:
            notes.append("bench 0.2 results (before zero-points and near-duplicate checks changed): not comparable")
        if document.get("skipped"):
            notes.append("skipped: " + ", ".join(s["task"] for s in document["skipped"]))
        rows.append(Row(
            model=document["model"], kind=document.get("row_kind", "model"), date=document["date"],
            command=document["command"], wall_s=document.get("wall_s"), num_decisions=document.get("num_decisions"),
            average=average, categories=category_cells, tasks=task_cells, notes=tuple(notes),
            average_all=average_all, split_salt=document.get("split_salt"),
        ))
    warnings = [
        f"task {n}: rows were scored on different test items (different data versions?), so its resamples are not "
        "paired across rows"
        for n in tasks
        if len({tuple(d["tasks"][n]["items"]["ids"]) for d in documents if n in d["tasks"]}) > 1
    ]
    ranks = _ranks(rows, averages, headline) if averages else {}
    rows = [Row(**{**r.__dict__, "rank": ranks.get(r.model)}) for r in rows]
    rows.sort(key=lambda r: (r.probe, r.rank is None, r.rank["rank"] if r.rank else 0,
                             -np.nan_to_num(r.average.score, nan=-1e9)))
    return Board(tuple(rows), tuple(tasks), categories, tuple(ranking_tasks), num_resamples, latest.ignored,
                 tuple(warnings), _reference(reference), tuple(headline))


def _ranks(rows: Sequence[Row], averages: dict[str, np.ndarray], ranking_tasks: Sequence[str]) -> dict[str, Any]:
    point = {
        r.model: float(np.nanmean([r.tasks[n].score for n in ranking_tasks])) for r in rows if r.model in averages
    }
    return paired_ranks(averages, point)
