"""How much of each task's decision the frozen encoder carries: a logistic probe on the state's embedding, per task.

A readout can only rank a task's items as well as the embedding separates them. For every task whose primary answer
is a probability, this fits a task-specific logistic regression on the int8 MiniLM embedding of the state and
reports its AUROC two ways:

- **cross-validated on the train side** (5 folds grouped by the task's clusters, the regularisation chosen by an
  inner cross-validation): the ceiling estimate that never reads a test item;
- **on the test side**, fit on the whole train side.

Next to them, the test-side AUROC of the served readouts' probabilities, read from the bench's answers caches. A
task whose probe is near 0.5 has nothing in the embedding for any readout to find; a task whose probe is well above
the trained readout has signal the shared readout misses.
"""

from __future__ import annotations

import datetime as dt
import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegressionCV
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold, cross_val_predict

from jevserve.bench.answers_cache import AnswersCache, request_key
from jevserve.bench.data import BenchData
from jevserve.bench.pipeline import LoadedTask, load_tasks
from jevserve.bench.task import Task
from jevserve.decide.embedder import Embedder  # or any object with .embed(texts) -> unit vectors

RESULT = Path("benchmarks/results/embedding_probe.json")
FOLDS = 5


def auroc(targets: np.ndarray, scores: np.ndarray) -> float | None:
    """AUROC, or None when the targets hold one class only."""
    targets = np.asarray(targets, dtype=bool)
    if targets.all() or not targets.any():
        return None
    return float(roc_auc_score(targets, scores))


def _probe() -> LogisticRegressionCV:
    return LogisticRegressionCV(Cs=np.logspace(-3, 3, 13), cv=FOLDS, scoring="roc_auc", max_iter=5000)


def probe_task(entry: LoadedTask, embed: Callable[[Sequence[str]], np.ndarray]) -> dict[str, Any]:
    """The probe's cross-validated train AUROC and its test AUROC for one task."""
    task = entry.task
    x_train = embed([i.state for i in entry.train])
    x_test = embed([i.state for i in entry.test])
    y_train = task.target(task.labels(entry.train))
    y_test = task.target(task.labels(entry.test))
    groups = [i.cluster for i in entry.train]
    folds = min(FOLDS, len(set(groups)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)  # sklearn's notices about its own coming defaults
        out_of_fold = cross_val_predict(
            _probe(), x_train, y_train, cv=GroupKFold(folds), groups=groups, method="predict_proba"
        )[:, 1]
        fitted = _probe().fit(x_train, y_train)
    return {
        "n_train": len(entry.train),
        "n_test": len(entry.test),
        "positive_share_train": float(np.mean(y_train)),
        "probe_cv_auroc_train": auroc(y_train, out_of_fold),
        "probe_auroc_test": auroc(y_test, fitted.predict_proba(x_test)[:, 1]),
    }


def readout_auroc(entry: LoadedTask, model: str, cache: AnswersCache) -> float | None:
    """Test-side AUROC of a model's primary probability, from its answers cache (None when any answer is missing)."""
    task: Task = entry.task
    answers = [cache.get(request_key(model, task.request(item))) for item in entry.test]
    if any(a is None for a in answers):
        return None
    _, scores = task.model_scores(entry.train, [], entry.test, answers)
    return auroc(task.target(task.labels(entry.test)), scores)


def embedding_probe(
    tasks: Sequence[Task],
    data: BenchData,
    embedder: Embedder,
    readouts: dict[str, tuple[str, AnswersCache]],
    *,
    log: Callable[[str], None] = print,
    command: str = "jevserve train --probe",
) -> dict[str, Any]:
    """Probe every thresholded task; `readouts` maps a row name to (model name, its answers cache)."""
    loaded, skipped = load_tasks([t for t in tasks if t.thresholded], data, log=log)
    rows: dict[str, Any] = {}
    for entry in loaded:
        row = probe_task(entry, embedder.embed)
        for name, (model, cache) in readouts.items():
            row[f"{name}_auroc_test"] = readout_auroc(entry, model, cache)
        rows[entry.task.name] = row
        log(
            f"{entry.task.name}: probe CV AUROC {row['probe_cv_auroc_train']:.3f} (train side), "
            f"test {row['probe_auroc_test']:.3f}"
        )
    return {
        "created": dt.date.today().isoformat(),
        "command": command,
        "encoder": getattr(embedder, "description", "int8 all-MiniLM-L6-v2"),
        "probe": f"logistic regression on the state embedding, C by {FOLDS}-fold CV (AUROC); "
        f"train-side AUROC out of {FOLDS} folds grouped by cluster",
        "skipped": [s.task for s in skipped],
        "tasks": rows,
    }


def probe_result_path(encoder: str) -> Path:
    """Where the probe of `encoder` is written: the embedded MiniLM's at RESULT, another's next to it."""
    return RESULT if encoder == "minilm" else RESULT.with_name(f"embedding_probe_{encoder}.json")


def write_embedding_probe(result: dict[str, Any], path: Path = RESULT) -> None:
    """Write the probe's result as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
