"""`jevserve train --tuned`: assemble the tuned reader's examples, train it, fit its temperatures on the served graph,
and write the readout, the fine-tuned layers, the manifest and the training-state hashes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from jevserve.bench.data import BenchData
from jevserve.bench.task import Task
from jevserve.decide.embedder import embed_texts
from jevserve.decide.onnx_build import Precision, cache_dir, load_bert
from jevserve.decide.reader import ReaderWeights
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.decide.trained import KINDS, question_texts
from jevserve.decide.tuned import StateEncoder, layers_file
from jevserve.train.dataset import EmbeddedExamples, subset
from jevserve.train.examples import Example, families
from jevserve.train.layer_inputs import layer_inputs
from jevserve.train.reader import fit_reader_temperatures, group_temperatures
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
    """What the served tuned encoder reads of each text: (TokenStates of unit rows, (n, 384) sentence vectors)."""
    encoder = StateEncoder(precision, layers=layers, state_cache_size=0)
    rows, vectors = [], np.empty((len(texts), 384), np.float32)
    for i, text in enumerate(tqdm(texts, desc="served states", unit="state", disable=not progress)):
        tokens, vectors[i] = encoder.read(text)
        rows.append(tokens)
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    return TokenStates(np.concatenate(rows), offsets), vectors


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


def train_tuned_model(
    tasks: Sequence[Task],
    *,
    out: Path,
    config: TunedConfig | None = None,
    data: BenchData | None = None,
    extra: Sequence[Example] = (),
    leave_out: Task | None = None,
    progress: bool = True,
    log=print,
) -> tuple[ReaderWeights, dict[str, Any]]:
    """Train the tuned reader on the reading model's examples plus `extra` and write `out` (the readout),
    `out`.layers.npz (the fine-tuned layers, float16), `out`.json and `out`.states.gz."""
    started = time.perf_counter()
    config = config or TunedConfig()
    data = data or BenchData(embed=embed_texts)
    examples = collect_examples(
        data, tasks, leave_out=leave_out, variants=True, attributes=config.reader.attribute_questions, log=log
    )
    examples += [ex for ex in extra if not (leave_out and set(ex.sources) & set(leave_out.sources))]
    keep = capped([ex.family for ex in examples], [ex.state for ex in examples], config.state_caps)
    examples = [ex for ex, kept in zip(examples, keep, strict=True) if kept]
    if not examples:
        raise SystemExit("no training examples: fetch the bench data first (jevserve data fetch)")
    log(f"{len(examples)} examples from {len(families(examples))} families")
    texts = TokenEmbedder("int8")
    inputs = tuned_inputs(examples, texts, progress=progress)
    bert = load_bert()
    lower = layer_inputs(inputs.states, texts.tokenizer, config.first_layer, progress=progress)
    top = TopLayers(bert, config.first_layer)
    fit_rows = np.flatnonzero(~inputs.held)
    net = train_tuned(
        subset(inputs.embedded, fit_rows),
        inputs.token_index[fit_rows],
        top,
        lower,
        config,
        checkpoint=cache_dir() / "tuned-checkpoints" / f"{out.stem}.pt",
        progress=progress,
        log=log,
    )
    layers = layers_file(out)
    layers.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(layers, **top.tuned_weights())
    weights = fit_served_temperatures(net.weights(dict.fromkeys(KINDS, 1.0)), inputs, layers, config, progress)
    held = np.flatnonzero(inputs.held)
    recipe = {
        "command": command_line("jevserve train --tuned"),
        "model": "tuned reader (decide/tuned.py)",
        "leave_out": leave_out.name if leave_out else None,
        "config": asdict(config),
        "torch_threads": torch.get_num_threads(),  # float sums run in another order with another count
        "layers_file": layers.name,
        "layers_bytes": layers.stat().st_size,
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


def fit_served_temperatures(
    weights: ReaderWeights, inputs: TunedInputs, layers: Path, config: TunedConfig, progress: bool
) -> ReaderWeights:
    """Temperatures fitted on the validation states as the served int8 graph reads them (so what is calibrated is
    what is served, quantisation included)."""
    held = np.flatnonzero(inputs.held)
    states = np.unique(inputs.token_index[held])
    tokens, vectors = served_states([inputs.states[s] for s in states], layers, progress=progress)
    place = {int(s): k for k, s in enumerate(states)}
    index = np.array([place[int(s)] for s in inputs.token_index[held]], np.int64)
    validation = with_state_vectors(subset(inputs.embedded, held), vectors, index)
    return fit_reader_temperatures(
        weights, validation, tokens, index, per_question=config.reader.question_temperatures
    )
