"""`jevserve train --tuned`: assemble the tuned reader's examples, train it in two phases, fit its temperatures on
the served graph, and write the readout, the fine-tuned layers, the manifest and the training-state hashes.

1. The layers: the encoder's top layers with a scaffold reader, on the families of the gateway's decisions
   (train/tuned.py; the costly phase: it runs the layers forward and backward).
2. The reader: a reading model trained from scratch on every example, over the token states the served int8 graph
   with those layers gives (as the reading model is trained over the shipped graph's), so it reads exactly what it
   is served.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from jevserve.bench.data import BenchData
from jevserve.bench.task import Task
from jevserve.decide.embedder import embed_texts_fp32
from jevserve.decide.onnx_build import Precision, cache_dir, layers_digest, load_bert
from jevserve.decide.reader import ReaderWeights
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.decide.trained import KINDS, question_texts
from jevserve.decide.tuned import StateEncoder, layers_file
from jevserve.train.dataset import EmbeddedExamples, KeptAsItGoes, subset
from jevserve.train.examples import Example, families
from jevserve.train.layer_inputs import layer_inputs
from jevserve.train.lexical_head import write_lexical_heads
from jevserve.train.reader import fit_reader_temperatures, group_temperatures, train_reader
from jevserve.train.run import collect_examples, command_line, is_validation, write_model
from jevserve.train.token_states import TokenStates
from jevserve.train.tuned import TopLayers, TunedConfig, capped, train_tuned


@dataclass
class TunedInputs:
    """What the tuned reader trains on: the examples' question texts embedded (state rows point at a zero row: the
    state's vector comes from the tuned layers), the distinct states, each example's state, the validation mark."""

    embedded: EmbeddedExamples
    states: list[str]
    token_index: np.ndarray
    held: np.ndarray


def tuned_inputs(examples: Sequence[Example], embedder: TokenEmbedder, *, progress: bool = True) -> TunedInputs:
    """Embed every distinct question and option text once (the shipped encoder, as served) and index the states."""
    index: dict[str, int] = {"": 0}
    for ex in examples:
        for text in question_texts(ex.question):
            index.setdefault(text, len(index))
    texts = list(index)[1:]
    vectors = np.zeros((len(index), 384), np.float32)  # row 0: the placeholder state vector
    for start in tqdm(range(0, len(texts), 256), desc="question texts", unit="batch", disable=not progress):
        vectors[1 + start : 1 + start + 256] = embedder.embed(texts[start : start + 256])
    embedded = EmbeddedExamples(
        vectors=vectors,
        state_rows=np.zeros(len(examples), np.int64),
        text_rows=[np.array([index[t] for t in question_texts(ex.question)], np.int64) for ex in examples],
        questions=[ex.question for ex in examples],
        answers=np.array([ex.answer for ex in examples], np.int64),
        families=[ex.family for ex in examples],
    )
    states = list(dict.fromkeys(ex.state for ex in examples))
    position = {state: i for i, state in enumerate(states)}
    token_index = np.array([position[ex.state] for ex in examples], np.int64)
    held = np.array([is_validation(ex.state) for ex in examples])
    return TunedInputs(embedded, states, token_index, held)


def served_states(texts: Sequence[str], layers: Path, precision: Precision = "int8", *, progress: bool = True):
    """What the served tuned encoder reads of each text: (TokenStates of unit rows in float16, (n, 384) sentence
    vectors); kept on disk under the cache directory, keyed by the layers and the texts, and kept as it goes (every
    minute and at Ctrl-C), so that the same command goes on from the texts it had read."""
    digest = hashlib.sha256(f"{layers_digest(layers)}-{precision}".encode())
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\x1e")
    path = cache_dir() / "tuned-token-states" / f"{digest.hexdigest()[:16]}.npz"
    if path.exists():
        with np.load(path) as stored:
            return TokenStates(stored["rows"], stored["offsets"]), stored["vectors"]
    encoder: StateEncoder | None = None

    def read(text: str) -> tuple[np.ndarray, np.ndarray]:
        nonlocal encoder
        if encoder is None:  # built only when a text is left to read
            encoder = StateEncoder(precision, layers=layers, state_cache_size=0)
        return encoder.read(text)

    return read_states_resumably(texts, read, path, progress=progress)


def partial_states_path(path: Path) -> Path:
    """Where `read_states_resumably` keeps the states read so far for `path`."""
    return path.with_name(f"{path.stem}.partial.npz")


def read_states_resumably(
    texts: Sequence[str], read: Callable[[str], tuple[np.ndarray, np.ndarray]], path: Path, *, progress: bool = True
) -> tuple[TokenStates, np.ndarray]:
    """`read` each text ((tokens, 384), (384,)) into TokenStates (float16 rows) and sentence vectors, written whole to
    `path` at the end; what is read so far is kept beside it every PARTIAL_SAVE_S and at Ctrl-C, and read back by
    the next call for the same `path` (its name is the digest of every text, so the same texts in order)."""
    partial = partial_states_path(path)
    rows: list[np.ndarray] = []
    vectors = np.empty((len(texts), 384), np.float32)
    if partial.exists():
        try:
            with np.load(partial) as saved:
                offsets = saved["offsets"]
                if saved["vectors"].shape == vectors.shape:
                    done = len(offsets) - 1
                    vectors[:done] = saved["vectors"][:done]
                    rows = [saved["rows"][offsets[i] : offsets[i + 1]] for i in range(done)]
        except (OSError, ValueError, KeyError):
            rows = []  # a save cut short: start again

    def keep() -> None:
        if rows:
            _write_states(partial, rows, vectors)

    with KeptAsItGoes(keep) as kept:
        for i in tqdm(range(len(rows), len(texts)), desc="served states", unit="state", disable=not progress,
                      initial=len(rows), total=len(texts)):
            tokens, vectors[i] = read(texts[i])
            rows.append(tokens.astype(np.float16))
            kept.tick()
    result = _write_states(path, rows, vectors)  # whole or not at all
    partial.unlink(missing_ok=True)
    return result, vectors


def _write_states(path: Path, rows: list[np.ndarray], vectors: np.ndarray) -> TokenStates:
    """The rows as TokenStates, written with the vectors to `path` atomically (a reader never sees half a file)."""
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    states = TokenStates(np.concatenate(rows), offsets)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.tmp.npz")
    np.savez(tmp, rows=states.rows, offsets=offsets, vectors=vectors)
    tmp.replace(path)
    return states


def with_state_vectors(data: EmbeddedExamples, vectors: np.ndarray, token_index: np.ndarray) -> EmbeddedExamples:
    """`data` with example i's state vector set to vectors[token_index[i]] (appended to the text vectors)."""
    return EmbeddedExamples(
        vectors=np.concatenate([data.vectors, vectors]),
        state_rows=len(data.vectors) + token_index,
        text_rows=data.text_rows,
        questions=data.questions,
        answers=data.answers,
        families=data.families,
    )


def recipe_examples(
    tasks: Sequence[Task],
    *,
    data: BenchData,
    extra: Sequence[Example] = (),
    leave_out: Task | None = None,
    config: TunedConfig | None = None,
    log=print,
) -> list[Example]:
    """Every example the tuned recipe trains on (its fit and validation rows), in its order."""
    config = config or TunedConfig()
    examples = collect_examples(
        data, tasks, leave_out=leave_out, variants=True, attributes=config.reader.attribute_questions, log=log
    )
    examples += [ex for ex in extra if not (leave_out and set(ex.sources) & set(leave_out.sources))]
    if not examples:
        raise SystemExit("no training examples: fetch the bench data first (jevserve data fetch)")
    return examples


def train_lexical_heads_only(
    tasks: Sequence[Task], *, out: Path, data: BenchData, extra: Sequence[Example] = (), log=print
) -> Path:
    """Fit only the lexical heads of the tuned reader whose readout is `out`, on the recipe's fit rows (what
    train_tuned_model's last step fits), leaving the readout and layers as they are."""
    if not out.exists():
        raise SystemExit(f"no tuned readout at {out}: train it with `jevserve train --tuned --out {out}`")
    examples = recipe_examples(tasks, data=data, extra=extra, log=log)
    held = [ex for ex in examples if is_validation(ex.state)]
    fit = [ex for ex in examples if not is_validation(ex.state)]
    heads = write_lexical_heads(out, fit, data, log=log, validation=held)
    manifest = out.with_suffix(".json")
    if manifest.exists():  # the readout's manifest names what now goes with it, and how it was made
        recorded = json.loads(manifest.read_text())
        recorded.update(
            lexical_heads_file=heads.name,
            lexical_heads_bytes=heads.stat().st_size,
            lexical_heads_command=command_line("jevserve train --tuned --lexical-heads-only"),
        )
        manifest.write_text(json.dumps(recorded, indent=2) + "\n")  # as train.run.write_model writes it
    return heads


def train_tuned_model(
    tasks: Sequence[Task],
    *,
    out: Path,
    config: TunedConfig | None = None,
    data: BenchData | None = None,
    extra: Sequence[Example] = (),
    leave_out: Task | None = None,
    average_layers: Sequence[Path] = (),
    checkpoint: Path | None = None,
    progress: bool = True,
    log=print,
) -> tuple[ReaderWeights, dict[str, Any]]:
    """Train the tuned reader on the reading model's examples plus `extra` and write `out` (the readout),
    `out`.layers.npz (the fine-tuned layers, float16), `out`.json and `out`.states.gz. With `average_layers`
    (layer files of earlier runs) the first phase is not run: its layers are their mean (a "soup"), and the reader
    is trained over them (benchmarks/decide/layer_soup.py). `checkpoint`: where the first phase saves its progress
    (default: `checkpoint_path(out)`)."""
    started = time.perf_counter()
    config = config or TunedConfig()
    data = data or BenchData(embed=embed_texts_fp32)
    examples = recipe_examples(tasks, data=data, extra=extra, leave_out=leave_out, config=config, log=log)
    log(f"{len(examples)} examples from {len(families(examples))} families")
    texts = TokenEmbedder("int8")
    inputs = tuned_inputs(examples, texts, progress=progress)
    fit_rows = np.flatnonzero(~inputs.held)
    layers = layers_file(out)
    if average_layers:
        log(f"layers: the mean of {len(average_layers)} trained layer files, no first phase")
        write_mean_layers(average_layers, layers)
    else:
        layer_rows = layer_phase_rows(examples, fit_rows, config)
        log(f"layers: {len(layer_rows)} examples on {len(np.unique(inputs.token_index[layer_rows]))} states")
        train_layers(inputs, layer_rows, config, layers, checkpoint=checkpoint or checkpoint_path(out),
                     progress=progress, log=log)
    tokens, vectors = served_states(inputs.states, layers, progress=progress)
    served = with_state_vectors(inputs.embedded, vectors, inputs.token_index)
    net = train_reader(subset(served, fit_rows), tokens, inputs.token_index[fit_rows], config.reader, progress=progress)
    held = np.flatnonzero(inputs.held)
    weights = fit_reader_temperatures(
        net.weights(dict.fromkeys(KINDS, 1.0)), subset(served, held), tokens, inputs.token_index[held],
        per_question=config.reader.question_temperatures,
    )
    heads = write_lexical_heads(
        out, [examples[i] for i in fit_rows], data, log=log, validation=[examples[i] for i in held]
    )
    recipe = {
        "command": command_line("jevserve train --tuned"),
        "model": "tuned reader (decide/tuned.py)",
        "leave_out": leave_out.name if leave_out else None,
        "config": asdict(config),
        "torch_threads": torch.get_num_threads(),  # float sums run in another order with another count
        "layers_file": layers.name,
        "layers_averaged_from": [str(p) for p in average_layers] or None,
        "layers_bytes": layers.stat().st_size,
        "lexical_heads_file": heads.name,
        "lexical_heads_bytes": heads.stat().st_size,
    }
    manifest = write_model(
        out,
        weights,
        examples,
        recipe,
        num_fit=len(fit_rows),
        num_validation=len(held),
        encoder=f"all-MiniLM-L6-v2 with layers {config.first_layer + 1}-6 fine-tuned ({layers.name}), int8, first "
        f"{texts.read_tokens} positions (decide/onnx_build.py, decide/tuned.py)",
        started=started,
        extra_temperatures=group_temperatures(
            weights, [examples[i].question for i in held], [examples[i].family for i in held]
        ),
    )
    return weights, manifest


def layer_phase_rows(examples: Sequence[Example], fit_rows: np.ndarray, config: TunedConfig) -> np.ndarray:
    """The training rows the first phase trains the layers on: its families, capped."""
    rows = np.array([i for i in fit_rows if config.in_layer_phase(examples[i].family)], np.int64)
    keep = capped([examples[i].family for i in rows], [examples[i].state for i in rows], config.layer_state_caps)
    return rows[keep]


def checkpoint_path(out: Path) -> Path:
    """Where a run writing `out` saves its layer phase: one file per output path, so rerunning the same command
    resumes it, and a run into another path (`jevserve train --check` trains into a temporary folder) never picks up
    a checkpoint it did not write."""
    where = hashlib.sha256(str(out.resolve()).encode("utf-8")).hexdigest()[:12]
    return cache_dir() / "tuned-checkpoints" / f"{out.stem}-{where}.pt"


def train_layers(
    inputs: TunedInputs, rows: np.ndarray, config: TunedConfig, out: Path, *, checkpoint: Path, progress: bool, log
) -> None:
    """The first phase: the top layers with a scaffold reader on examples `rows`; writes the layers to `out`."""
    bert = load_bert()
    lower = layer_inputs(inputs.states, TokenEmbedder("int8").tokenizer, config.first_layer, progress=progress)
    top = TopLayers(bert, config.first_layer)
    train_tuned(
        subset(inputs.embedded, rows), inputs.token_index[rows], top, lower, config.layer_phase(),
        checkpoint=checkpoint, progress=progress, log=log,
    )  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **top.tuned_weights())


def write_mean_layers(paths: Sequence[Path], out: Path) -> None:
    """The element-wise mean of layer files of one shape (float32 sums, stored float16 like trained layers)."""
    stored = []
    for path in paths:
        with np.load(path) as layer_file:
            stored.append(dict(layer_file))
    names = list(stored[0])  # the first file's order, so the written file is laid out as a trained one
    if any(sorted(s) != sorted(names) for s in stored):
        raise ValueError(f"layer files {[str(p) for p in paths]} hold different layers: train them with one --layers")
    mean = {k: np.mean([s[k].astype(np.float32) for s in stored], axis=0).astype(np.float16) for k in names}
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **mean)
