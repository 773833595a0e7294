"""One bench run from data to result documents: load tasks, ask what is missing, evaluate, score, summarise.

The thin shells around it are `cli.py` (arguments, the embedded server, writing files) and `runner.py` (asking).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jevserve import __version__
from jevserve.bench.answers_cache import AnswersCache, request_key
from jevserve.bench.data import BenchData
from jevserve.bench.evaluate import DEFAULT, MAJORITY, MODEL, STYLE, TFIDF, evaluate
from jevserve.bench.everyday import EverydayItems, calibration_requests, everyday_items
from jevserve.bench.everyday_export import read_calibration
from jevserve.bench.leaks import reference_index, without_near_duplicates
from jevserve.bench.resolve import resolve_tasks
from jevserve.bench.runner import AskStats, DecisionClient, ask_missing, keyed
from jevserve.bench.scoring import score_row
from jevserve.bench.sources import SourceMissingError, active_salt
from jevserve.bench.sources.everyday import load_everyday
from jevserve.bench.stats import BOOTSTRAP_SEED, ECE_BINS, ERROR_BUDGET, NUM_RESAMPLES
from jevserve.bench.task import Answers, Item, Task, split_items

BENCH_VERSION = "0.4"  # what the results files were computed under (docs/bench.md's changelog says what changed)

# Rows that need no endpoint: their results folder name and the predictor they show.
BASELINE_ROWS = {"default-rules": DEFAULT, TFIDF: TFIDF, "source-style": STYLE, "source-majority": MAJORITY}


@dataclass(frozen=True)
class LoadedTask:
    """A task with its items split into sides."""

    task: Task
    train: tuple[Item, ...]
    test: tuple[Item, ...]
    near_duplicates_dropped: int = 0  # test items dropped as near-duplicates of training texts (bench.leaks)
    everyday: EverydayItems | None = None  # what the task reads on everyday traffic (bench.everyday), when measured


@dataclass(frozen=True)
class Skipped:
    """A task that could not run here, and what to run to fix it."""

    task: str
    message: str
    command: str


def load_tasks(
    tasks: Sequence[Task], data: Any, log: Callable[[str], None] = print, *, near_duplicates: bool = True,
    everyday: bool = True,
) -> tuple[list[LoadedTask], list[Skipped]]:
    """Load every task's items; a task whose data is missing is skipped with the command that fetches it. With
    real data, test items that are near-duplicates of a text training may read are dropped (bench.leaks), and
    (with `everyday`) each task gets the items it reads on everyday traffic."""
    loaded, skipped = [], []
    if isinstance(data, BenchData):  # reading the sources and the leak check take half a minute before any request
        log(f"reading the data of {len(tasks)} task{'s' if len(tasks) != 1 else ''} and the texts training may read "
            "(about half a minute)")
    for task in tasks:
        try:
            train, test = split_items(task.load_items(data))
        except SourceMissingError as exc:
            skipped.append(Skipped(task.name, str(exc), exc.command))
            log(f"skipping {task.name}: {exc}")
            continue
        loaded.append(LoadedTask(task, train, test))
    if near_duplicates and isinstance(data, BenchData) and loaded:
        index = reference_index(data, log)
        filtered = []
        for entry in loaded:
            test, dropped = without_near_duplicates(entry.test, index)
            filtered.append(LoadedTask(entry.task, entry.train, test, dropped))
        loaded = with_everyday(filtered, data, log) if everyday else filtered
    return loaded, skipped


def with_everyday(loaded: list[LoadedTask], data: BenchData, log: Callable[[str], None]) -> list[LoadedTask]:
    """The tasks with their everyday items (test side and the packaged calibration file); unchanged, with a note,
    when the everyday source's data is missing."""
    if not any(e.task.everyday_reads for e in loaded):
        return loaded
    try:
        test = load_everyday("test", data.cache)
    except SourceMissingError as exc:
        log(f"everyday false-action rates skipped: {exc}")
        return loaded
    calibration = calibration_requests(read_calibration())
    return [replace(e, everyday=everyday_items(e.task, test, calibration)) if e.task.everyday_reads else e
            for e in loaded]


def needed_requests(model: str, loaded: Sequence[LoadedTask]) -> dict[str, dict[str, Any]]:
    """Every distinct request the tasks need, train and test, by cache key."""
    return keyed(model, [entry.task.request(item) for entry in loaded
                         for item in (*entry.train, *entry.test, *(entry.everyday.items if entry.everyday else ()))])


def ask(
    client: DecisionClient,
    model: str,
    loaded: Sequence[LoadedTask],
    cache: AnswersCache,
    *,
    concurrency: int,
    progress: bool = True,
) -> AskStats:
    """Ask the endpoint whatever the cache lacks (see runner.ask_missing)."""
    return asyncio.run(
        ask_missing(client, model, needed_requests(model, loaded), cache, concurrency=concurrency, progress=progress)
    )


def _answers(model: str, cache: AnswersCache, task: Task, items: Sequence[Item]) -> list[Answers | None]:
    return [cache.get(request_key(model, task.request(item))) for item in items]


def headline_tasks(tasks: Sequence[Task]) -> list[Task]:
    """The tasks of the headline average (every task but those reported beside it, e.g. schedule-return)."""
    return [t for t in tasks if t.headline]


def result_document(
    model: str,
    command: str,
    task_results: dict[str, dict[str, Any]],
    tasks: dict[str, Task],
    skipped: Sequence[Skipped],
    num_resamples: int,
    **fields: Any,
) -> dict[str, Any]:
    """A results file's document: the per-task rows, their average with its interval, and how they were made."""
    return {
        "model": model,
        "date": dt.datetime.now(dt.UTC).date().isoformat(),
        "command": command,
        "bench_version": BENCH_VERSION,
        **fields,
        "num_resamples": num_resamples,
        "bootstrap_seed": BOOTSTRAP_SEED,
        "ece_bins": ECE_BINS,
        "error_budget": ERROR_BUDGET,
        "environment": {
            "jevserve": __version__,
            "python": platform.python_version(),
            "platform": sys.platform,
            "cpus": os.cpu_count(),
        },
        "skipped": [s.__dict__ for s in skipped],
        "split_salt": active_salt(),
        **resolve_tasks(task_results, tasks, num_resamples),
        "tasks": task_results,
    }


def score_model(
    model: str,
    loaded: Sequence[LoadedTask],
    data: Any,
    cache: AnswersCache,
    *,
    command: str,
    skipped: Sequence[Skipped] = (),
    num_resamples: int = NUM_RESAMPLES,
    **fields: Any,
) -> dict[str, Any]:
    """The result document of a model whose answers are in `cache`."""
    results, refused, scored = {}, 0, 0
    for entry in loaded:
        train_answers = _answers(model, cache, entry.task, entry.train)
        test_answers = _answers(model, cache, entry.task, entry.test)
        refused += sum(a is None for a in (*train_answers, *test_answers))
        scored += len(train_answers) + len(test_answers)
        everyday_answers = _answers(model, cache, entry.task, entry.everyday.items) if entry.everyday else None
        outcome = evaluate(entry.task, entry.train, entry.test, data, train_answers, test_answers,
                           everyday=entry.everyday, everyday_answers=everyday_answers)
        results[entry.task.name] = score_row(outcome, MODEL, num_resamples=num_resamples)
        results[entry.task.name]["near_duplicates_dropped"] = entry.near_duplicates_dropped
        details = entry.task.details(entry.train, entry.test, train_answers, test_answers)
        if details is not None:
            results[entry.task.name]["details"] = details
    tasks = {e.task.name: e.task for e in loaded}
    return result_document(
        model, command, results, tasks, skipped, num_resamples, row_kind="model", num_unanswered=refused,
        num_items=scored, **fields
    )



def score_baselines(
    loaded: Sequence[LoadedTask],
    data: Any,
    *,
    command: str,
    skipped: Sequence[Skipped] = (),
    num_resamples: int = NUM_RESAMPLES,
) -> list[dict[str, Any]]:
    """Result documents of the rows that need no endpoint: the default rules and the source-only baselines."""
    outcomes = [evaluate(e.task, e.train, e.test, data, everyday=e.everyday) for e in loaded]
    dropped = {e.task.name: e.near_duplicates_dropped for e in loaded}
    tasks = {e.task.name: e.task for e in loaded}
    documents = []
    for row, predictor in BASELINE_ROWS.items():
        results = {
            o.task.name: {**score_row(o, predictor, num_resamples=num_resamples),
                          "near_duplicates_dropped": dropped[o.task.name]}
            for o in outcomes
            if predictor in o.predictions
        }
        kind = "probe" if predictor in (STYLE, MAJORITY) else "baseline"  # leak probes get their own table
        documents.append(
            result_document(
                row, command, results, tasks, skipped, num_resamples, row_kind=kind, wall_s=None, num_decisions=0
            )
        )
    return documents
