"""People's numbers from the stored rounds: a board row per decision, and people against the served model.

The board row scores people exactly as the bench scores a model, on the test items they answered: the task's metric
on their answers against the default rule's and the oracle's stored actions on the same items, on the bench's scale
(bench.paired.TaskScale: 100 × (m − default) / (oracle − chance), the denominator fixed on the items answered, the
numerator paired on each draw), with a 95% percentile-bootstrap interval. Resampling draws players
(anonymous sessions), not answers, since one person's answers are not independent of each other. These are the
row's own draws (NUM_RESAMPLES of them, not the board's shared ones), one set for every task: each draw weighs every
player the same on each task, so a category's average is the mean of its tasks' scores draw by draw, as a model
row's is.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jevserve.bench.length import LENGTH_BIN_NAMES
from jevserve.bench.metrics import metric_by_name
from jevserve.bench.paired import TaskScale
from jevserve.bench.stats import bootstrap_weights, interval, task_seed
from jevserve.web.decisions import DECISIONS

NUM_RESAMPLES = 1000  # per page view; people's cells are a live view, not a committed row


@dataclass(frozen=True)
class HumanCell:
    """People's score on one task with its interval and how much play it rests on."""

    score: float  # the bench scale: 0 = default rule; NaN when undefined (e.g. every answer had one truth)
    low: float
    high: float
    num_answers: int
    num_rounds: int
    num_players: int
    draws: np.ndarray | None = field(default=None, repr=False, compare=False)  # the score per draw (averages)


@dataclass(frozen=True)
class Versus:
    """People against the served model on the same round items of one decision."""

    decision: str
    num_answers: int
    people_accuracy: float  # share of right answers
    people_interval: tuple[float, float]
    model_accuracy: float  # NaN when the model gave no answer on these items
    model_interval: tuple[float, float]
    num_model_answers: int
    people_median_ms: float  # per question, first showing to answer
    model_median_ms: float  # per decision call of the served model


def counted(answers: Sequence[Mapping[str, Any]], min_answer_ms: float) -> tuple[list[Mapping[str, Any]], int]:
    """The answers people's numbers count, and how many were left out: those given less than `min_answer_ms` after
    the item was first shown, faster than anyone reads an item (a script's, or a click through)."""
    kept = [a for a in answers if a["time_ms"] >= min_answer_ms]
    return kept, len(answers) - len(kept)


def task_references(documents: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per playground task, the stored test labels, default actions and oracle actions by item id, and its metric."""
    refs: dict[str, dict[str, Any]] = {}
    for document in documents:
        for decision in DECISIONS.values():
            result = document["tasks"].get(decision.task)
            if decision.task in refs or not result or "items" not in result:
                continue
            items = result["items"]
            refs[decision.task] = {
                "metric": result["metric"],
                "by_id": {i: (lab, d, o) for i, lab, d, o in
                          zip(items["ids"], items["labels"], items["default"], items["oracle"], strict=True)},
            }
    return refs


def _human_value(decision_key: str, choice: str) -> float:
    if decision_key == "length":
        return float(LENGTH_BIN_NAMES.index(choice))  # τ-b reads only the order of the bins
    return float(choice == "yes")


def human_cells(
    answers: Sequence[Mapping[str, Any]], refs: Mapping[str, Mapping[str, Any]], num_resamples: int = NUM_RESAMPLES
) -> dict[str, HumanCell]:
    """Per playground task with answers, people's normalised score (see the module doc)."""
    cells = {}
    # one draw of players for every task (seeded), so that tasks' draws line up for category averages
    players = sorted({a["session_id"] for a in answers})
    player_draws = bootstrap_weights(players, num_resamples, task_seed("web:people")) if players else None
    player_index = {p: i for i, p in enumerate(players)}
    for decision in DECISIONS.values():
        ref = refs.get(decision.task)
        rows = [a for a in answers if a["decision"] == decision.key and ref and a["item_id"] in ref["by_id"]]
        if not rows:
            continue
        metric = metric_by_name(ref["metric"])
        stored = [ref["by_id"][a["item_id"]] for a in rows]
        dtype = np.float64 if decision.key == "length" else bool
        labels = np.array([s[0] for s in stored], dtype=dtype)
        default = np.array([s[1] for s in stored], dtype=dtype)
        oracle = np.array([s[2] for s in stored], dtype=dtype)
        num_rounds, num_players = len({a["round_id"] for a in rows}), len({a["session_id"] for a in rows})
        if np.unique(labels).size < 2:
            # every answered item had one truth: no metric tells players apart there (τ-b would read 0, "the same as
            # today's rule"); undefined, shown "–", as the docs say
            nan = math.nan
            cells[decision.task] = HumanCell(nan, nan, nan, len(rows), num_rounds, num_players,
                                             np.full(num_resamples, nan))
            continue
        values = np.array([_human_value(decision.key, a["choice"]) for a in rows])
        if decision.key != "length":
            values = values.astype(bool)
        weights = player_draws[:, [player_index[a["session_id"]] for a in rows]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # τ-b of a draw with one distinct value is undefined (NaN), not an error
            scale = TaskScale(metric.chance(labels), metric(labels, default), metric(labels, oracle))
            point = float(scale.score(metric(labels, values)))
            paired = metric.weighted(labels, values, weights) - metric.weighted(labels, default, weights)
            draws = np.asarray(scale.score(paired + scale.default), dtype=float)
            low, high = interval(draws)
        if num_players < 2:  # the draws resample players: with one, every draw is the same and no interval is told
            low = high = math.nan
        cells[decision.task] = HumanCell(point, low, high, len(rows), num_rounds, num_players, draws)
    return cells


def category_cells(cells: Mapping[str, HumanCell], category_tasks: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Per category (→ the tasks its average covers), the mean of people's scores on those tasks and its interval
    from the mean per draw, as bench.cells.average does for a model row; categories without a scored task are
    left out. Values are bench.board.Cell."""
    from jevserve.bench.board import Cell

    out = {}
    for category, names in category_tasks.items():
        present = [n for n in names if n in cells and math.isfinite(cells[n].score)]
        if not present:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            means = np.nanmean(np.vstack([cells[n].draws for n in present]), axis=0)
        low, high = interval(means)
        if any(not math.isfinite(cells[n].low) for n in present):  # a task without an interval (one player)
            low = high = math.nan
        out[category] = Cell(float(np.mean([cells[n].score for n in present])), low, high)
    return out


def _share_with_interval(hits: np.ndarray, clusters: Sequence[str], seed: int) -> tuple[float, tuple[float, float]]:
    if hits.size == 0:
        return float("nan"), (float("nan"), float("nan"))
    if len(set(clusters)) < 2:  # the draws resample players: with one, every draw is the same and no interval is told
        return float(hits.mean()), (float("nan"), float("nan"))
    weights = bootstrap_weights(list(clusters), NUM_RESAMPLES, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        resampled = (weights * hits).sum(axis=1) / weights.sum(axis=1)
    return float(hits.mean()), interval(resampled)


def versus(answers: Sequence[Mapping[str, Any]]) -> list[Versus]:
    """Per decision, people's and the served model's accuracy (intervals over players) and median times."""
    out = []
    for decision in DECISIONS.values():
        rows = [a for a in answers if a["decision"] == decision.key]
        if not rows:
            continue
        seed = task_seed(f"web:{decision.key}")
        people = _share_with_interval(np.array([a["correct"] for a in rows], dtype=float),
                                      [a["session_id"] for a in rows], seed)
        answered = [a for a in rows if a["model_choice"] is not None]
        model = _share_with_interval(np.array([a["model_choice"] == a["truth"] for a in answered], dtype=float),
                                     [a["session_id"] for a in answered], seed)
        # the time of the answers counted: a call whose answer is not counted (none, or not the item's) has no time
        # here either, so a model time is never shown beside "0 answers"
        timed = [a["model_decision_ms"] for a in answered if a["model_decision_ms"] is not None]
        out.append(Versus(
            decision.key, len(rows), people[0], people[1], model[0], model[1], len(answered),
            float(np.median([a["time_ms"] for a in rows])),
            float(np.median(timed)) if timed else float("nan"),
        ))
    return out


def expected_accuracy(pools: Any, rows: Sequence[Any]) -> dict[str, dict[str, float]]:
    """Per board row and decision, the accuracy its stored answers would get on the playground's draw: the mean over
    right answers of its share right on pool items with that answer (a round draws each answer equally often)."""
    from jevserve.web.answering import stored_choice

    out: dict[str, dict[str, float]] = {}
    for row in rows:
        for key, by_truth in pools.by_truth.items():
            decision = DECISIONS[key]
            if decision.task not in row.values or (key == "length" and row.kind != "model"):
                continue
            shares = []
            for truth, ids in by_truth.items():
                choices = [stored_choice(row, decision, i) for i in ids]
                shares.append(np.mean([c == truth for c in choices if c is not None]) if any(choices) else np.nan)
            out.setdefault(row.model, {})[key] = float(np.mean(shares))
    return out
