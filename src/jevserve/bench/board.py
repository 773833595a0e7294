"""The leaderboard's numbers: per row, task and category scores with intervals, averages, paired differences,
minimum detectable differences and ranks, all from ONE set of draws (bench.paired).

Rows are the newest results file of each folder under `results/`. The default-rules row is the reference: its
test items and their clusters define the draws, its fixed reference points the scale, and its train-side default
shares which tasks are near-oracle (reported apart, by raw difference and P(beats the rule)). Every other row is
scored from its stored test predictions on the same draws, so cells, averages, Δs and ranks agree. A row whose
items for a task differ from the reference's (an older data version) has no cell there, and the board warns.
The headline average covers the reference's headline tasks that are not near-oracle; a second average covers every
task that is not near-oracle. Leak probes and rows that lack some headline tasks are shown but not ranked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.bench.cells import Average, TaskCell, average, row_cells
from jevserve.bench.compare import (
    PairedDelta,
    draw_ranks,
    minimum_detectable_difference,
    paired_delta,
    paired_ranks,
)
from jevserve.bench.everyday import union_rate
from jevserve.bench.paired import StoredTask, near_oracle, resample
from jevserve.bench.results import MAX_UNANSWERED_SHARE, latest_results, unanswered_note, unanswered_share
from jevserve.bench.stats import BOOTSTRAP_SEED
from jevserve.bench.task import CATEGORIES

REFERENCE_ROW = "default-rules"
# Leak probes: rows that know where an item came from, not what it says; shown in their own table, never ranked.
PROBE_ROWS = ("source-style", "source-majority")
# what each probe knows, as its note says: the source's package, or only how a text looks
PROBE_KNOWS = {"source-style": "a text's look (length, punctuation), not its meaning",
               "source-majority": "the source, not the decision"}
COMPARISON_ROW = "tfidf-lr"  # the learned baseline every model row's per-task Δ is drawn against


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
    # {"rank" (1 + rows ahead on the paired Δ), "low", "high" (over draws), "first_share"}; None: unranked
    rank: dict[str, Any] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    average_all: Cell | None = None  # over every task the row has, schedule-return included
    split_salt: str | None = None  # the split salt of the row's results (None: older files, the bench's salt)
    cells: dict[str, TaskCell] = field(default_factory=dict)  # every task the row has, near-oracle ones included
    metadata: dict[str, Any] = field(default_factory=dict)  # parameters, where it runs, latency, licence
    everyday: dict[str, dict[str, Any]] = field(default_factory=dict)  # task → everyday false actions (bench.everyday)
    # the share of everyday requests that any of the row's guard decisions acts on (bench.everyday.union_rate)
    everyday_blocked: dict[str, Any] | None = None

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
    near_oracle_tasks: tuple[str, ...] = ()  # reported apart: the default closes ≥ 2/3 of the range on train
    pairs: tuple[PairedDelta, ...] = ()  # headline Δ for every ordered pair of ranked rows
    task_deltas: dict[str, dict[str, PairedDelta]] = field(default_factory=dict)  # row → task → Δ vs comparison
    comparison_row: str | None = None  # the row task_deltas are taken against
    # a row scored on some of the headline tasks (not ranked) against the comparison row on those tasks: row →
    # (the tasks, the paired Δ of the two averages over them)
    partial_deltas: dict[str, tuple[tuple[str, ...], PairedDelta]] = field(default_factory=dict)
    mdd: dict[str, float] = field(default_factory=dict)  # task (and "headline") → MDD of the top two rows
    mdd_rows: tuple[str, ...] = ()  # the two rows the MDDs are for

    def category_tasks(self) -> dict[str, list[str]]:
        """Per category, the tasks its average covers: every ranking task that is not near-oracle (schedule-return
        included; guard-jailbreak and agent-web-policy, shown as Δ metric, not)."""
        every = [t for t in self.ranking_tasks if t not in self.near_oracle_tasks]
        return {c: [t for t in every if self.task_categories.get(t) == c] for c in CATEGORIES}

    def coverage(self, cells: dict[str, Any], category: str) -> tuple[int, int]:
        """(tasks of `category` with a score among `cells`, tasks its average covers): a partial average is marked
        where it is shown. An undefined cell ("–") is not in the average."""
        names = self.category_tasks()[category]
        return sum(scored(cells.get(t)) for t in names), len(names)


def scored(cell: Any) -> bool:
    """Whether a task cell has a score (an undefined one is shown "–" and averages nothing)."""
    return cell is not None and math.isfinite(getattr(cell, "score", math.nan))


def _cell(score: float | None, low: float | None, high: float | None) -> Cell:
    as_float = [float("nan") if v is None else float(v) for v in (score, low, high)]
    return Cell(*as_float)


def _as_cell(value: TaskCell | Average) -> Cell:
    return Cell(value.score, value.low, value.high)


def _task_order(documents: Sequence[dict[str, Any]]) -> list[str]:
    from jevserve.bench.tasks import TASKS

    seen = {name for d in documents for name in d["tasks"]}
    return [n for n in TASKS if n in seen] + sorted(seen - set(TASKS))


def _notes(
    document: dict[str, Any], probe: bool, covered: int, needed: int, ranked: bool, shown: Sequence[str] = ()
) -> list[str]:
    notes = []
    if probe:
        known = PROBE_KNOWS.get(document.get("model"), "the source, not the decision")
        notes.append(f"leak probe: knows {known}; never ranked")
    elif unanswered_share(document) > MAX_UNANSWERED_SHARE:
        notes.append(f"over {100 * MAX_UNANSWERED_SHARE:g}% of its items unanswered: not ranked")
    elif not ranked:
        notes.append(f"covers {covered} of {needed} headline tasks on the current items: not ranked")
    if document.get("rebased_from"):
        # a rerun task whose rerun scored other test items than the reference row's is not on the board (`shown`
        # holds the row's cells): said so, not listed as rerun as if its cell were there
        rerun = document.get("rerun_tasks") or []
        on_board, left_out = [t for t in rerun if t in shown], [t for t in rerun if t not in shown]
        said = ([f"rerun: {', '.join(on_board)}"] if on_board else []) + (
            [f"rerun on other test items, so left out: {', '.join(left_out)}"] if left_out else [])
        notes.append(f"bench {document.get('bench_version')}: stored test actions rescored on the current items "
                     "and zero-points, not rerun" + (f" ({'; '.join(said)})" if said else ""))
    elif document.get("bench_version") not in (None, "0.4"):
        notes.append(f"bench {document.get('bench_version')} results, rescored where their items are current")
    if document.get("skipped"):
        notes.append("skipped: " + ", ".join(s["task"] for s in document["skipped"]))
    unanswered = unanswered_note(document)
    if unanswered:
        notes.append(unanswered)
    return notes


def _row_values(document: dict[str, Any], stored: dict[str, StoredTask], warnings: list[str]) -> dict[str, Any]:
    values, other_items = {}, []
    for name, result in document["tasks"].items():
        if name in stored and tuple(result["items"]["ids"]) == stored[name].ids:
            values[name] = np.asarray(result["items"]["values"])
        elif name in stored:
            other_items.append(name)
    # one warning per row, not per task: a row of an older data version would otherwise fill the page with them
    if len(other_items) == 1:
        warnings.append(f"{document['model']}: task {other_items[0]} was scored on other test items than the "
                        "reference row (another data version); its cell is left out")
    elif other_items:
        warnings.append(f"{document['model']}: {len(other_items)} tasks were scored on other test items than the "
                        f"reference row (another data version); their cells are left out: {', '.join(other_items)}")
    return values


def build_board(results_dir: Path, num_resamples: int | None = None, seed: int = BOOTSTRAP_SEED) -> Board:
    """Read the newest results of every row and compute the board on one set of draws (`num_resamples`: the
    reference row's count, unless given)."""
    latest = latest_results(results_dir)
    documents = list(latest.documents)
    if not documents:
        if latest.ignored:  # result files are there but none can be read: say which and why
            raise FileNotFoundError(f"no readable bench results under {results_dir}: {'; '.join(latest.ignored)}; "
                                    "replace or remove them (`jevserve bench run` writes new ones)")
        raise FileNotFoundError(f"no bench results under {results_dir}; run `jevserve bench run` first")
    reference = next((d for d in documents if d["model"] == REFERENCE_ROW), documents[0])
    # Every row is rescored from its stored items on the reference row's draws, so its count decides.
    num_resamples = num_resamples or int(reference.get("num_resamples", 1000))
    tasks = _task_order(documents)
    categories = {n: next(d["tasks"][n]["category"] for d in documents if n in d["tasks"]) for n in tasks}
    stored = {n: StoredTask.from_result(n, r) for n, r in reference["tasks"].items()}
    near = {n: near_oracle(r.get("default_train_share")) for n, r in reference["tasks"].items()}
    listed = reference.get("average", {}).get("tasks")
    ranking_tasks = [n for n in tasks if n in stored]
    headline = [n for n in ranking_tasks if (not listed or n in listed) and not near[n]]
    every = [n for n in ranking_tasks if not near[n]]
    warnings: list[str] = list(latest.ignored)  # files left out (unreadable, or a row's newer narrower run)
    if reference["model"] != REFERENCE_ROW:  # its tasks become the headline: a one-task run would be ranked on one
        warnings.append(f"no {REFERENCE_ROW} row under {results_dir}: {reference['model']} is the reference, so "
                        "the headline covers only its tasks; `jevserve bench run --baselines` writes the rules' row")
    values = {d["model"]: _row_values(d, stored, warnings) for d in documents}
    resampled = resample(stored, values, num_resamples, seed)

    guard_decisions = _distinct_decisions([n for n in tasks if categories.get(n) == "guard"])
    rows, headline_of = [], {}
    for document in documents:
        model = document["model"]
        cells = row_cells(stored, model, values[model], resampled, near)
        head, everything = average(cells, headline), average(cells, every)
        category_cells = {}
        for category in CATEGORIES:
            names = [n for n in every if categories.get(n) == category and n in cells]
            if names:
                category_cells[category] = _as_cell(average(cells, names))
        probe = document.get("row_kind") == "probe" or model in PROBE_ROWS
        mostly_refused = unanswered_share(document) > MAX_UNANSWERED_SHARE  # what bench validate refuses
        ranked = not probe and not mostly_refused and all(n in cells for n in headline)
        if ranked:
            headline_of[model] = head
        complete = all(n in cells for n in headline)  # an average over some of the tasks is not the headline
        if not complete:
            head, everything = _missing(), _missing()
        rows.append(Row(
            model=model, kind=document.get("row_kind", "model"), date=document["date"], command=document["command"],
            wall_s=document.get("wall_s"), num_decisions=document.get("num_decisions"), average=_as_cell(head),
            categories=category_cells, tasks={n: _as_cell(c) for n, c in cells.items()},
            notes=tuple(_notes(document, probe, sum(n in cells for n in headline), len(headline), ranked,
                               tuple(cells))),
            average_all=_as_cell(everything), split_salt=document.get("split_salt"), cells=cells,
            metadata=dict(document.get("metadata") or {}),
            everyday={n: _lean(r["everyday"]) for n, r in document["tasks"].items()
                      if r.get("everyday") and n in cells},
            everyday_blocked=union_rate([document["tasks"][n]["everyday"] for n in guard_decisions
                                         if document["tasks"].get(n, {}).get("everyday") and n in cells]),
        ))
    ranks = _ranks(headline_of)
    rows = [Row(**{**r.__dict__, "rank": ranks.get(r.model)}) for r in rows]
    rows.sort(key=lambda r: (r.probe, r.rank is None, r.rank["rank"] if r.rank else 0,
                             -np.nan_to_num(r.average.score, nan=-1e9)))
    ranked_rows = [r for r in rows if r.model in headline_of]
    comparison = COMPARISON_ROW if any(r.model == COMPARISON_ROW for r in rows) else REFERENCE_ROW
    return Board(
        rows=tuple(rows), tasks=tuple(tasks), task_categories=categories, ranking_tasks=tuple(ranking_tasks),
        num_resamples=num_resamples, ignored=latest.ignored, warnings=tuple(warnings),
        reference=_reference(reference), headline_tasks=tuple(headline),
        near_oracle_tasks=tuple(n for n in ranking_tasks if near[n]),
        pairs=tuple(paired_delta(a.model, b.model, headline_of[a.model].score, headline_of[b.model].score,
                                 headline_of[a.model].draws, headline_of[b.model].draws)
                    for a in ranked_rows for b in ranked_rows if a.model != b.model),
        task_deltas=_task_deltas(rows, comparison), comparison_row=comparison,
        partial_deltas=_partial_deltas(rows, comparison, headline, set(headline_of)),
        **_mdd(ranked_rows, headline_of),
    )


def _missing() -> Average:
    return Average(float("nan"), float("nan"), float("nan"), (), np.array([np.nan]))


def _distinct_decisions(names: Sequence[str]) -> list[str]:
    # Tasks that ask the same question at two thresholds (guard-harmful, guard-overrefusal) are one gateway decision:
    # the union of everyday false actions counts the first of them only.
    from jevserve.bench.tasks import TASKS

    seen, out = [], []
    for name in names:
        task = TASKS.get(name)
        question = task.questions[task.primary] if task else name
        if question not in seen:
            seen.append(question)
            out.append(name)
    return out


def _lean(everyday: dict[str, Any]) -> dict[str, Any]:
    # The per-request list is only needed for the union; the board keeps the rates.
    return {k: v for k, v in everyday.items() if k != "acted_requests"}


def _reference(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: {"metric": r["metric"], "default": r["metrics"]["default"]["value"],
               "oracle": r["metrics"]["oracle"]["value"], "chance": r.get("chance"),
               "default_train_share": r.get("default_train_share"), "n_test": r.get("n_test")}
        for name, r in document["tasks"].items()
    }


def _ranks(headline_of: dict[str, Average]) -> dict[str, dict[str, Any]]:
    if not headline_of:
        return {}
    by_pair = paired_ranks({m: a.draws for m, a in headline_of.items()})
    by_draw = draw_ranks({m: a.draws for m, a in headline_of.items()}, {m: a.score for m, a in headline_of.items()})
    return {m: {"rank": by_pair[m], "low": by_draw[m].low, "high": by_draw[m].high,
                "point": by_draw[m].rank, "first_share": by_draw[m].first_share} for m in headline_of}


def _task_deltas(rows: Sequence[Row], comparison: str) -> dict[str, dict[str, PairedDelta]]:
    base = next((r for r in rows if r.model == comparison), None)
    if base is None:
        return {}
    return {
        r.model: {n: paired_delta(r.model, comparison, c.score, base.cells[n].score, c.draws, base.cells[n].draws)
                  for n, c in r.cells.items() if n in base.cells}
        for r in rows if not r.probe and r.model != comparison
    }


def _partial_deltas(
    rows: Sequence[Row], comparison: str, headline: Sequence[str], ranked: set[str]
) -> dict[str, tuple[tuple[str, ...], PairedDelta]]:
    """For each row scored on some but not all headline tasks: the paired Δ of its average over those tasks and the
    comparison row's over the same tasks, on the same draws (a quick run of a few tasks gets a paired answer)."""
    base = next((r for r in rows if r.model == comparison), None)
    if base is None:
        return {}
    out = {}
    for row in rows:
        covered = tuple(n for n in headline if n in row.cells and n in base.cells)
        if row.probe or row.model in ranked or row.model == comparison or not covered:
            continue
        a, b = average(row.cells, covered), average(base.cells, covered)
        out[row.model] = (covered, paired_delta(row.model, comparison, a.score, b.score, a.draws, b.draws))
    return out


def _mdd(ranked: Sequence[Row], headline_of: dict[str, Average]) -> dict[str, Any]:
    # The two best rows other than the reference: the comparison the board most needs to resolve.
    top = [r for r in ranked if r.model != REFERENCE_ROW][:2]
    if len(top) < 2:
        return {"mdd": {}, "mdd_rows": ()}
    a, b = top
    mdd = {n: minimum_detectable_difference(a.cells[n].draws, b.cells[n].draws) for n in a.cells if n in b.cells}
    mdd["headline"] = minimum_detectable_difference(headline_of[a.model].draws, headline_of[b.model].draws)
    return {"mdd": mdd, "mdd_rows": (a.model, b.model)}
