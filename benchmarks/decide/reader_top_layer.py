"""Is the frozen encoder the reading model's ceiling? Fine-tune MiniLM's top layer(s) with the reader, train side only.

Runs the tuned reader's training loop (train/tuned.py, what `jevserve train --tuned` runs) on the training states
outside the hash-held-out ones, once per layer learning rate, and scores each on the held-out states at temperature 1
(mean over the bench's families; attribute questions apart), as benchmarks/decide/reader_validation.py scores recipes.
The row with learning rate 0 runs the same loop with the layers frozen (same states, batches and seed), so the
difference between two rows is what fine-tuning the top of the encoder adds; differences are paired, resampling the
held-out states. Scoring reads the states through the trained layers in torch (fp32), not the served int8 graph.
`--tuned-data` adds the tuned reader's everyday and rule-made examples to training (train/tuned_data.py). Nothing
here reads a bench test side.

Writes benchmarks/results/reader_top_layer[_N][_lr…].json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/reader_top_layer.py [--layers 1] [--layer-lr 3e-5 ...] [--tuned-data]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import TRAINING_DOC, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.bench.stats import BOOTSTRAP_SEED, NUM_RESAMPLES, bootstrap_weights, interval
from jevserve.bench.tasks import TASKS
from jevserve.decide.embedder import embed_texts_fp32
from jevserve.decide.onnx_build import load_bert
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.train.dataset import subset
from jevserve.train.layer_inputs import layer_inputs
from jevserve.train.reader import reader_logits
from jevserve.train.run import collect_examples
from jevserve.train.token_states import TokenStates
from jevserve.train.tuned import TopLayers, TunedConfig, read_states, train_tuned
from jevserve.train.tuned_run import tuned_inputs, with_state_vectors
from jevserve.train.validation import family_scores, paired_difference, per_example, resampled_family_means, summary


def held_out_logits(net, top, lower, inputs, rows: np.ndarray) -> list[np.ndarray]:
    """Logits of examples `rows` with their states read through `top` (torch fp32)."""
    states = np.unique(inputs.token_index[rows])
    tokens, vectors = [], []
    with torch.no_grad():
        for start in range(0, len(states), 64):
            t, v = read_states(top, lower, states[start : start + 64])
            tokens += [x.numpy() for x in t]
            vectors.append(v.numpy())
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in tokens])]).astype(np.int64)
    place = {int(s): k for k, s in enumerate(states)}
    index = np.array([place[int(s)] for s in inputs.token_index[rows]], np.int64)
    part = with_state_vectors(subset(inputs.embedded, rows), np.concatenate(vectors), index)
    return reader_logits(net.weights({}), part, TokenStates(np.concatenate(tokens), offsets), index)


def markdown(result: dict) -> str:
    lines = [
        "## Reading model with the encoder's top layers fine-tuned, train-side validation",
        "",
        f"`{result['command']}`, {result['machine']['when']}: {result['num_fit']} training examples on "
        f"{result['num_fit_states']} states, {result['num_validation']} held out by state, mean over "
        f"{result['num_families']} families at temperature 1. Every row runs train/tuned.py's loop (fp32 hidden "
        "states of the shipped weights, batches of whole states, the sentence vector the mean of the tuned token "
        "states); the frozen row trains only the reader. Differences from the frozen row: paired, the held-out "
        f"states resampled with replacement ({NUM_RESAMPLES} resamples, 95% percentile interval).",
        "",
        "| top layers | layer learning rate | mean NLL | mean accuracy | NLL − frozen [95%] | accuracy − frozen [95%] "
        "| attribute accuracy | train s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        against = row.get("against_frozen")
        lines.append(
            f"| {row['layers']} | {row['layer_lr']:g} | {row['mean_nll']:.3f} | {row['mean_accuracy']:.3f} | "
            f"{paired_difference(against, 'nll')} | {paired_difference(against, 'accuracy')} | "
            f"{row['attribute_accuracy']:.3f} | {row['train_s']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=1, help="how many of the encoder's top layers to tune (1-6)")
    parser.add_argument(
        "--layer-lr",
        type=float,
        action="append",
        help="layers' peak learning rate (repeatable; 0 = frozen; default: 0 and 3e-5)",
    )
    parser.add_argument("--tuned-data", action="store_true", help="also train on train/tuned_data.py's examples")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    data = BenchData(embed=embed_texts_fp32)
    examples = collect_examples(data, list(TASKS.values()), variants=True, attributes=True)
    if args.tuned_data:
        from jevserve.train.tuned_data import tuned_examples

        examples += tuned_examples(data)
    texts = TokenEmbedder("int8")
    inputs = tuned_inputs(examples, texts)
    bert = load_bert()
    base = TunedConfig(layers=args.layers)
    lower = layer_inputs(inputs.states, texts.tokenizer, base.first_layer)
    attribute = np.array([f.startswith("attribute:") for f in inputs.embedded.families])
    fit_rows = np.flatnonzero(~inputs.held)
    validation_rows = np.flatnonzero(inputs.held & ~attribute)
    attribute_rows = np.flatnonzero(inputs.held & attribute)
    validation = subset(inputs.embedded, validation_rows)
    resampling = bootstrap_weights(inputs.token_index[validation_rows].tolist(), NUM_RESAMPLES, BOOTSTRAP_SEED)
    resampling = resampling.astype(np.float64)
    rates = sorted(set(args.layer_lr or [0.0, 3e-5]))  # the frozen row first: the others are paired with it
    rows, resampled = [], {}
    for layer_lr in rates:
        top = TopLayers(bert, base.first_layer)
        started = time.perf_counter()
        net = train_tuned(
            subset(inputs.embedded, fit_rows),
            inputs.token_index[fit_rows],
            top,
            lower,
            replace(base, layer_lr=layer_lr),
        )
        elapsed = time.perf_counter() - started
        logits = held_out_logits(net, top, lower, inputs, validation_rows)
        scores = family_scores(logits, validation.answers, validation.families)
        nll, right = per_example(logits, validation.answers)
        on_attributes = held_out_logits(net, top, lower, inputs, attribute_rows)
        answers = inputs.embedded.answers[attribute_rows]
        accuracy = float(np.mean([np.argmax(z) == a for z, a in zip(on_attributes, answers, strict=True)]))
        row = {
            "layers": args.layers,
            "layer_lr": layer_lr,
            "train_s": elapsed,
            **summary(scores),
            "attribute_accuracy": accuracy,
            "families": scores,
        }
        resampled[layer_lr] = (
            resampled_family_means(nll, validation.families, resampling),
            resampled_family_means(right, validation.families, resampling),
        )
        if layer_lr and 0.0 in resampled:
            frozen = rows[0]
            row["against_frozen"] = {
                "nll": row["mean_nll"] - frozen["mean_nll"],
                "nll_interval": interval(resampled[layer_lr][0] - resampled[0.0][0]),
                "accuracy": row["mean_accuracy"] - frozen["mean_accuracy"],
                "accuracy_interval": interval(resampled[layer_lr][1] - resampled[0.0][1]),
            }
        rows.append(row)
        print(f"layer lr {layer_lr:g}: {summary(scores)}, attribute accuracy {accuracy:.3f}", file=sys.stderr)
    command = "python benchmarks/decide/reader_top_layer.py" + (f" --layers {args.layers}" if args.layers != 1 else "")
    command += "".join(f" --layer-lr {v:g}" for v in args.layer_lr or []) + (" --tuned-data" if args.tuned_data else "")
    result = {
        "machine": machine(),
        "command": command,
        "config": {"layers": args.layers, "tuned_data": args.tuned_data},
        "num_fit": len(fit_rows),
        "num_fit_states": len(np.unique(inputs.token_index[fit_rows])),
        "num_validation": len(validation_rows),
        "num_families": len(rows[0]["families"]),
        "rows": rows,
    }
    name = "reader_top_layer" + (f"_{args.layers}" if args.layers != 1 else "")
    name += "" if rates == [0.0, 3e-5] else "_lr" + "_".join(f"{v:g}" for v in rates if v)
    name += "_tuned_data" if args.tuned_data else ""
    path = write_result(name, result)
    replace_section(name, markdown(result), TRAINING_DOC)
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
