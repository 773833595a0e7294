"""Train-side validation of the reading model's recipe against the trained readout's, on the same examples.

Both are fitted on the training examples outside the ~10% of states held out by hash for the temperatures
(train/run.py `is_validation`) and scored on the held-out ones, at temperature 1: per family (question variants
counted with their family), the mean negative log-likelihood and the accuracy of the top option, then the mean over
families. The attribute questions (train/attributes.py) are left out of that mean (only recipes with
"attribute_questions" fit them) and reported as their own accuracy. Nothing here reads a bench test side; this is
how the reader's settings were chosen (docs/training.md).

Writes benchmarks/results/reader_validation.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/reader_validation.py [--reader '{"epochs": 3}' ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import TRAINING_DOC, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.bench.stats import BOOTSTRAP_SEED, NUM_RESAMPLES, bootstrap_weights, interval
from jevserve.bench.tasks import TASKS
from jevserve.decide.embedder import embed_texts_fp32
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.decide.trained import TrainedReadout
from jevserve.train.dataset import subset
from jevserve.train.head import HeadConfig, train_head
from jevserve.train.reader import ReaderConfig, reader_logits, train_reader
from jevserve.train.run import collect_examples, reader_inputs
from jevserve.train.validation import family_scores, paired_difference, per_example, resampled_family_means, summary


def markdown(result: dict, name: str = "reader_validation") -> str:
    title = "Reading model recipe" if name == "reader_validation" else f"Reading model recipes ({name})"
    lines = [
        f"## {title}, train-side validation",
        "",
        f"`{result['command']}`, {result['machine']['when']}: {result['num_fit']} training examples fitted "
        f"({result['num_fit_with_attributes']} with the attribute questions), {result['num_validation']} held out by "
        f"state (no bench test side read); mean over {result['num_families']} families at temperature 1. Attribute "
        f"accuracy: the {result['num_attribute_validation']} attribute questions (train/attributes.py) about the "
        "held-out states, in trained phrasings.",
        "",
        "| recipe | settings | mean NLL | mean accuracy | NLL − first reader row [95%] | "
        "accuracy − first reader row [95%] | attribute accuracy | train s |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def difference(row: dict, measure: str) -> str:
        return paired_difference(row.get("against_first_reader"), measure)

    for row in result["rows"]:
        lines.append(
            f"| {row['recipe']} | `{json.dumps(row['settings'])}` | {row['mean_nll']:.3f} | "
            f"{row['mean_accuracy']:.3f} | {difference(row, 'nll')} | {difference(row, 'accuracy')} | "
            f"{row['attribute_accuracy']:.3f} | {row['train_s']:.0f} |"
        )
    lines += [
        "",
        "Differences are paired: every row is scored on the same resamples of the held-out states (drawn with "
        f"replacement, {NUM_RESAMPLES} resamples, 95% percentile interval) against the first reading-model row.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--reader",
        action="append",
        metavar="JSON",
        help="reader settings to try, e.g. '{\"epochs\": 3}' (repeatable; default: the ReaderConfig defaults)",
    )
    parser.add_argument("--no-head", action="store_true", help="skip the trained readout's row")
    parser.add_argument(
        "--name",
        default="reader_validation",
        help="results file benchmarks/results/NAME.json and its docs/training.md section (default: "
        "reader_validation, the recipe table docs/training.md cites); another name keeps that table",
    )
    args = parser.parse_args()
    embedder = TokenEmbedder("int8")
    examples = collect_examples(BenchData(embed=embed_texts_fp32), list(TASKS.values()), variants=True, attributes=True)
    inputs = reader_inputs(examples, embedder)
    # Scored on the families every recipe trains on; the attribute questions (train/attributes.py) are reported
    # apart, and fitted only by recipes with "attribute_questions".
    attribute = np.array([f.startswith("attribute:") for f in inputs.embedded.families])
    validation_rows = np.flatnonzero(inputs.held & ~attribute)
    attribute_rows = np.flatnonzero(inputs.held & attribute)
    validation, attribute_validation = subset(inputs.embedded, validation_rows), subset(inputs.embedded, attribute_rows)

    def fit_rows(with_attributes: bool) -> np.ndarray:
        return np.flatnonzero(~inputs.held & (with_attributes | ~attribute))

    def attribute_accuracy(logits: list[np.ndarray]) -> float:
        return float(np.mean([np.argmax(z) == a for z, a in zip(logits, attribute_validation.answers, strict=True)]))

    rows = []
    if not args.no_head:
        started = time.perf_counter()
        readout = TrainedReadout(train_head(subset(inputs.embedded, fit_rows(False)), HeadConfig()))
        elapsed = time.perf_counter() - started

        def head_logits(part):
            return [
                readout.logits(part.vectors[s], part.vectors[t], q)
                for s, t, q in zip(part.state_rows, part.text_rows, part.questions, strict=True)
            ]

        scores = family_scores(head_logits(validation), validation.answers, validation.families)
        rows.append(
            {
                "recipe": "trained readout",
                "settings": {},
                "train_s": elapsed,
                **summary(scores),
                "attribute_accuracy": attribute_accuracy(head_logits(attribute_validation)),
                "families": scores,
            }
        )
    # One set of resampling weights (held-out states drawn with replacement) for every row: paired differences.
    resampling = bootstrap_weights(inputs.token_index[validation_rows].tolist(), NUM_RESAMPLES, BOOTSTRAP_SEED).astype(
        np.float64
    )
    first_reader: tuple[dict, np.ndarray, np.ndarray] | None = None
    for settings in [json.loads(s) for s in args.reader or ["{}"]]:
        config = ReaderConfig(**settings)
        rows_fit = fit_rows(config.attribute_questions)
        started = time.perf_counter()
        net = train_reader(subset(inputs.embedded, rows_fit), inputs.tokens, inputs.token_index[rows_fit], config)
        elapsed = time.perf_counter() - started
        weights = net.weights({})
        logits = reader_logits(weights, validation, inputs.tokens, inputs.token_index[validation_rows])
        scores = family_scores(logits, validation.answers, validation.families)
        on_attributes = reader_logits(weights, attribute_validation, inputs.tokens, inputs.token_index[attribute_rows])
        nll, right = per_example(logits, validation.answers)
        resampled_nll = resampled_family_means(nll, validation.families, resampling)
        resampled_accuracy = resampled_family_means(right, validation.families, resampling)
        row = {
            "recipe": "reading model",
            "settings": settings,
            "train_s": elapsed,
            **summary(scores),
            "attribute_accuracy": attribute_accuracy(on_attributes),
            "families": scores,
        }
        if first_reader is None:
            first_reader = (row, resampled_nll, resampled_accuracy)
        else:
            first, first_nll, first_accuracy = first_reader
            row["against_first_reader"] = {
                "nll": row["mean_nll"] - first["mean_nll"],
                "nll_interval": interval(resampled_nll - first_nll),
                "accuracy": row["mean_accuracy"] - first["mean_accuracy"],
                "accuracy_interval": interval(resampled_accuracy - first_accuracy),
            }
        rows.append(row)
        print(f"reader {settings}: {summary(scores)}", file=sys.stderr)
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/reader_validation.py"
        + (f" --name {args.name}" if args.name != "reader_validation" else "")
        + (" --no-head" if args.no_head else "")
        + "".join(f" --reader '{s}'" for s in args.reader or []),
        "num_fit": len(fit_rows(False)),
        "num_fit_with_attributes": len(fit_rows(True)),
        "num_validation": len(validation_rows),
        "num_attribute_validation": len(attribute_rows),
        "num_families": len(rows[0]["families"]),
        "rows": rows,
    }
    path = write_result(args.name, result)
    replace_section(args.name, markdown(result, args.name), TRAINING_DOC)
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
