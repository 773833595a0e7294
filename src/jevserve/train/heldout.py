"""Leave-one-task-out: for each task T, train a readout without T's sources and score it on T.

This is the number that says whether the trained readout answers *new* questions: T's questions, its data and every
synthetic family derived from T's sources are absent from training. The held-out heads are served by one in-process
server (one model name per task, all sharing the encoder) and scored by the bench's own pipeline, so the numbers
are comparable with every other row of the board.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.bench.answers_cache import AnswersCache
from jevserve.bench.data import BenchData
from jevserve.bench.pipeline import ask, load_tasks, result_document, score_model
from jevserve.bench.task import Task
from jevserve.client import AsyncSystemOne
from jevserve.decide.base import DecisionBackend, ModelCard
from jevserve.decide.embedded import encoder_fingerprint
from jevserve.decide.embedder import Embedder
from jevserve.decide.encoder import (
    READER_NAME,
    READER_RELEASE_DATE,
    RELEASE_DATE,
    TRAINED_NAME,
    EncoderBackend,
    ReadingBackend,
    row_name,
)
from jevserve.decide.reader import ReaderReadout, ReaderWeights
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.decide.trained import HeadWeights, TrainedReadout, question_texts
from jevserve.train.dataset import embed_examples, subset
from jevserve.train.examples import Example
from jevserve.train.head import HeadConfig, fit_temperatures, train_head
from jevserve.train.reader import ReaderConfig
from jevserve.train.run import collect_examples, fit_reading_model, reader_inputs, split_validation

HELDOUT_ROW = f"{row_name(TRAINED_NAME)}-heldout"
READER_HELDOUT_ROW = f"{row_name(READER_NAME)}-heldout"


def heldout_name(task: Task, model: str = TRAINED_NAME) -> str:
    """The model name of the head (or reader, `model=READER_NAME`) trained without `task` (after the model's row name,
    which its answers caches are filed under)."""
    return f"{row_name(model)}-without-{task.name}"


def training_digest(examples: Sequence[Example], config: HeadConfig, encoder: str) -> str:
    """A short digest of what a trained head depends on: every example, every training setting, the encoder."""
    digest = hashlib.sha256(f"{encoder}\x1e{json.dumps(asdict(config), sort_keys=True)}".encode())
    for ex in examples:
        text = f"\x1e{ex.family}\x1f{ex.state}\x1f{ex.question!r}\x1f{ex.answer}"
        digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:12]


def weights_digest(weights: HeadWeights, encoder: str) -> str:
    """A short digest of what a head's answers depend on: its parameters and the encoder (answers-cache version)."""
    digest = hashlib.sha256(f"{encoder}\x1e{json.dumps(weights.temperatures, sort_keys=True)}".encode())
    for array in (weights.w1, weights.b1, weights.w2, np.float32(weights.b2)):
        digest.update(np.ascontiguousarray(array, dtype=np.float32).tobytes())
    return digest.hexdigest()[:12]


def train_heldout_heads(
    tasks: Sequence[Task],
    *,
    data: BenchData,
    embedder: Embedder,
    config: HeadConfig,
    weights_dir: Path,
    progress: bool = True,
    log=print,
) -> dict[str, HeadWeights]:
    """One head per task, each trained on everything that does not share the task's sources (cached on disk)."""
    examples = collect_examples(data, tasks, variants=config.question_variants, log=log)
    embedded = embed_examples(examples, question_texts, embedder, progress=progress)
    states = [ex.state for ex in examples]
    heads = {}
    weights_dir.mkdir(parents=True, exist_ok=True)
    # Keyed by everything the weights depend on (examples, settings, encoder), so a changed recipe never reuses a
    # head trained by an older one.
    recipe = training_digest(examples, config, encoder_fingerprint(embedder.precision))
    for task in tasks:
        path = weights_dir / f"{heldout_name(task)}-{recipe}.npz"
        if path.exists():  # resumable: a finished head is never trained again
            heads[task.name] = HeadWeights.load(path)
            continue
        keep = np.array([i for i, ex in enumerate(examples) if not set(ex.sources) & set(task.sources)])
        log(f"{task.name}: training on {len(keep)} of {len(examples)} examples")
        part = subset(embedded, keep)
        fit_part, validation = split_validation(part, [states[i] for i in keep])
        weights = fit_temperatures(train_head(fit_part, config, progress=progress), validation)
        weights.save(path)
        heads[task.name] = weights
    return heads


def head_backends(
    tasks: Sequence[Task], heads: dict[str, HeadWeights], embedder: Embedder
) -> dict[str, tuple[DecisionBackend, str]]:
    """Per task, its held-out head served under its own name, and the version its answers are cached under."""
    return {
        task.name: (
            EncoderBackend(
                TrainedReadout(heads[task.name]),
                embedder=embedder,
                card=ModelCard(heldout_name(task), "held-out trained readout", RELEASE_DATE),
            ),
            weights_digest(heads[task.name], encoder_fingerprint(embedder.precision)),
        )
        for task in tasks
        if task.name in heads
    }


def score_heldout(
    tasks: Sequence[Task],
    models: dict[str, tuple[DecisionBackend, str]],
    *,
    data: BenchData,
    answers_dir: Path,
    serve_backends: Callable[[Sequence[DecisionBackend]], AbstractContextManager[str]],
    row: str = HELDOUT_ROW,
    command: str = "jevserve train --heldout && jevserve bench board",
    concurrency: int = 32,
    progress: bool = True,
    log=print,
) -> dict[str, Any]:
    """Each task scored by its own held-out model (`models[task]`: the backend and its answers-cache version),
    combined into one result document; `serve_backends` serves them at a local URL (the command line hands in the
    decision server's, which train/ may not import)."""
    started = time.perf_counter()
    loaded, skipped = load_tasks(tasks, data, log=log)
    loaded = [entry for entry in loaded if entry.task.name in models]
    documents = {}
    num_decisions = 0
    with serve_backends([models[entry.task.name][0] for entry in loaded]) as url:
        for entry in loaded:
            backend, version = models[entry.task.name]
            model = backend.card.name
            client = AsyncSystemOne(url, timeout_s=600)
            # resumable, like any bench run; answers of another model or encoder are kept apart
            cache = AnswersCache(answers_dir, model, version)
            try:
                stats = ask(client, model, [entry], cache, concurrency=concurrency, progress=progress)
                documents[entry.task.name] = score_model(model, [entry], data, cache, command="")
            finally:
                cache.close()
            num_decisions += stats.num_decisions
    results = {name: doc["tasks"][name] for name, doc in documents.items()}
    combined = result_document(
        row,
        command,
        results,
        {e.task.name: e.task for e in loaded},
        skipped,
        next(iter(documents.values()))["num_resamples"],
        row_kind="model",
        num_unanswered=0,
        wall_s=round(time.perf_counter() - started, 1),
        num_decisions=num_decisions,
        note="each task scored by a model trained without that task's sources (leave-one-task-out)",
        created=dt.date.today().isoformat(),
    )
    return combined


def train_heldout_readers(
    tasks: Sequence[Task],
    *,
    data: BenchData,
    embedder: TokenEmbedder,
    config: ReaderConfig,
    weights_dir: Path,
    progress: bool = True,
    log=print,
) -> dict[str, tuple[DecisionBackend, str]]:
    """One reading model per task, trained on everything that does not share the task's sources (cached on disk),
    each as a backend with its answers-cache version (the digest of its weights file and the token graph)."""
    examples = collect_examples(data, tasks, variants=True, attributes=config.attribute_questions, log=log)
    inputs = reader_inputs(examples, embedder, progress=progress)
    weights_dir.mkdir(parents=True, exist_ok=True)
    recipe = training_digest(examples, config, f"{encoder_fingerprint(embedder.precision)}-tokens")
    models = {}
    for task in tasks:
        path = weights_dir / f"{heldout_name(task, READER_NAME)}-{recipe}.npz"
        if not path.exists():  # resumable: a finished reader is never trained again
            keep = np.array([not set(ex.sources) & set(task.sources) for ex in examples])
            log(f"{task.name}: training on {int(keep.sum())} of {len(examples)} examples")
            weights = fit_reading_model(inputs, keep, config, progress=progress)
            weights.save(path)
        card = ModelCard(heldout_name(task, READER_NAME), "held-out reading model", READER_RELEASE_DATE)
        version = hashlib.sha256(path.read_bytes() + recipe.encode()).hexdigest()[:12]
        models[task.name] = (
            ReadingBackend(ReaderReadout(ReaderWeights.load(path)), card=card, embedder=embedder),
            version,
        )
    return models
