"""Per-type or per-question temperatures? The reader's calibration, cross-fitted on the train side.

The reading model's logits on the states held out for its temperatures (train/run.py `is_validation`; no weight is
fitted on them) are split in two by state hash. Each half's temperatures are fitted on the other half, two ways:
one per question type, and one per question group on top (train/reader.py
`fit_question_temperatures`: a bench task's questions with its variants'), and applied the way the served model
applies them (`ReaderWeights.temperature`). Scored per bench task on its own question: ECE of the top option's
probability (10 equal-width bins) and mean NLL, then the mean over tasks. Nothing here reads a bench test side.

Writes benchmarks/results/question_temperatures.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/question_temperatures.py [--weights PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import TRAINING_DOC, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.bench.stats import ECE_BINS, expected_calibration_error
from jevserve.bench.tasks import TASKS
from jevserve.decide.embedder import embed_texts
from jevserve.decide.encoder import READER_WEIGHTS
from jevserve.decide.reader import ReaderWeights
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.decide.trained import KINDS, softmax_at
from jevserve.train.dataset import subset
from jevserve.train.head import kind_temperatures
from jevserve.train.reader import fit_question_temperatures, reader_logits
from jevserve.train.run import collect_examples, reader_inputs

RECIPES = ("per type", "per type and question group")


def half_of(state: str) -> int:
    """0 or 1, by the state's hash: a state's examples stay in one half."""
    return int(hashlib.sha1(state.encode("utf-8", "surrogatepass")).hexdigest(), 16) % 2


def fitted(weights: ReaderWeights, logits, questions, families, answers, rows, recipe: str) -> ReaderWeights:
    """`weights` with temperatures fitted on `rows` by `recipe`."""
    chosen = [logits[i] for i in rows]
    kinds = kind_temperatures(chosen, [questions[i].kind for i in rows], answers[rows], dict.fromkeys(KINDS, 1.0))
    per_question = {}
    if recipe == RECIPES[1]:
        per_question, _ = fit_question_temperatures(
            chosen, [questions[i] for i in rows], [families[i] for i in rows], answers[rows]
        )
    return ReaderWeights(**{**weights.__dict__, "temperatures": kinds, "question_temperatures": per_question})


def markdown(result: dict) -> str:
    lines = [
        "## Per-type or per-question temperatures, cross-fitted on the train side",
        "",
        f"The reading model's logits on the {result['num_examples']} held-out train examples (states no weight is "
        "fitted on), split in two by state hash; each half's temperatures fitted on the other half. Per bench task "
        f"(its own question): ECE of the top option's probability ({ECE_BINS} bins) / mean NLL.",
        "",
        "| task | examples | " + " | ".join(RECIPES) + " |",
        "|---|---|" + "---|" * len(RECIPES),
    ]
    for task, row in result["tasks"].items():
        cells = " | ".join(f"{row[r]['ece']:.3f} / {row[r]['nll']:.3f}" for r in RECIPES)
        lines.append(f"| {task} | {row['n']} | {cells} |")
    means = " | ".join(f"**{result['mean'][r]['ece']:.3f} / {result['mean'][r]['nll']:.3f}**" for r in RECIPES)
    lines.append(f"| mean over {len(result['tasks'])} tasks | | {means} |")
    info = result["machine"]
    lines += ["", f"Command: `{result['command']}` ({info['cpus']} cores, {info['when']})."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, default=READER_WEIGHTS, help="reading model weights (.npz)")
    args = parser.parse_args()
    tasks = list(TASKS.values())
    examples = collect_examples(BenchData(embed=embed_texts), tasks, variants=True, attributes=True)
    inputs = reader_inputs(examples, TokenEmbedder("int8"))
    held = np.flatnonzero(inputs.held)
    weights = ReaderWeights.load(args.weights)
    logits = reader_logits(weights, subset(inputs.embedded, held), inputs.tokens, inputs.token_index[held])
    questions = [examples[i].question for i in held]
    families = [examples[i].family for i in held]
    answers = np.array([examples[i].answer for i in held])
    half = np.array([half_of(examples[i].state) for i in held])

    top_p = {r: np.zeros(len(held)) for r in RECIPES}
    right = np.zeros(len(held))
    nll = {r: np.zeros(len(held)) for r in RECIPES}
    for recipe in RECIPES:
        for h in (0, 1):
            model = fitted(weights, logits, questions, families, answers, np.flatnonzero(half != h), recipe)
            for i in np.flatnonzero(half == h):
                p = softmax_at(logits[i], model.temperature(questions[i]))
                top_p[recipe][i], right[i] = p.max(), float(p.argmax() == answers[i])
                nll[recipe][i] = -np.log(p[answers[i]])
    task_rows = {}
    for task in sorted(t.name for t in tasks):
        rows = np.array([i for i, f in enumerate(families) if f == task])
        if len(rows) == 0:
            continue
        task_rows[task] = {"n": len(rows)} | {
            r: {"ece": expected_calibration_error(top_p[r][rows], right[rows]), "nll": float(nll[r][rows].mean())}
            for r in RECIPES
        }
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/question_temperatures.py"
        + (f" --weights {args.weights}" if args.weights != READER_WEIGHTS else ""),
        "weights": str(args.weights),
        "num_examples": len(held),
        "tasks": task_rows,
        "mean": {
            r: {k: float(np.mean([row[r][k] for row in task_rows.values()])) for k in ("ece", "nll")} for r in RECIPES
        },
    }
    path = write_result("question_temperatures", result)
    replace_section("question_temperatures", markdown(result), TRAINING_DOC)
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
