"""New questions, not new phrasings: does a reader trained on attribute questions answer attributes it never saw?

Three reading models are fitted on the training states outside the temperature split (train/run.py
`is_validation`): without attribute questions (the recipe before them), with every attribute group but the held-out
ones, and with all of them (the held-out groups seen: an upper bound). Each answers the held-out groups' questions in
the held-out phrasings (train/attributes.py `HELDOUT_PHRASINGS`, never trained on) about every state of those
groups: the states themselves were read in training under other questions (their kind, their language), their
groups' subjects ("number theory", "shopping", "the law", "poison") never. Reported per group: accuracy, AUROC of
P(yes) at temperature 1, and the share of (yes, no) pairs ordered right. Nothing here reads a bench test side.

Writes benchmarks/results/attribute_concepts.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/attribute_concepts.py [--hold GROUP ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import TRAINING_DOC, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.bench.tasks import TASKS
from jevserve.decide.embedder import embed_texts
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.decide.trained import question_texts
from jevserve.train.attributes import HELDOUT_PHRASINGS, attribute_families, yes_no_scores
from jevserve.train.dataset import embed_examples, subset
from jevserve.train.reader import ReaderConfig, reader_logits, train_reader
from jevserve.train.run import collect_examples, reader_inputs

HELD_GROUPS = ("math-area", "overrefusal-domain", "web-domain", "refusal-pair")


def scores(logits: list[np.ndarray], answers: np.ndarray) -> dict[str, float]:
    """The yes/no scores of P(yes) at temperature 1."""
    return yes_no_scores(np.array([np.exp(z[0] - np.logaddexp.reduce(z)) for z in logits]), answers)


def markdown(result: dict) -> str:
    lines = [
        "## Attribute questions of groups never trained on",
        "",
        f"`{result['command']}`, {result['machine']['when']}: the groups {', '.join(result['held_groups'])} "
        "asked in held-out phrasings about all their states; each reader fitted on the training states outside the "
        "temperature split.",
        "",
        "| reader | group | accuracy | AUROC | pairs ordered right | questions |",
        "|---|---|---|---|---|---|",
    ]
    for model, groups in result["models"].items():
        for group, s in groups.items():
            lines.append(
                f"| {model} | {group} | {s['accuracy']:.3f} | {s['auroc']:.3f} | {s['pairs_ordered_right']:.3f} | "
                f"{s['n']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hold", action="append", metavar="GROUP", help=f"held-out groups (default: {HELD_GROUPS})")
    args = parser.parse_args()
    held_groups = tuple(args.hold or HELD_GROUPS)
    held_families = {f"attribute:{g}" for g in held_groups}
    data = BenchData(embed=embed_texts)
    embedder = TokenEmbedder("int8")
    examples = collect_examples(data, list(TASKS.values()), variants=True, attributes=True)
    inputs = reader_inputs(examples, embedder)
    token_row = dict(zip((ex.state for ex in examples), inputs.token_index.tolist(), strict=True))
    families = np.array(inputs.embedded.families)
    attribute = np.char.startswith(families.astype(str), "attribute:")
    recipes = {
        "without attribute questions": ~attribute,
        "attribute questions, held-out groups left out": ~np.isin(families, sorted(held_families)),
        "all attribute questions (held-out groups seen)": np.ones(len(examples), bool),
    }
    asked = [ex for ex in attribute_families(data, HELDOUT_PHRASINGS) if ex.family in held_families]
    asked_embedded = embed_examples(asked, question_texts, embedder)
    asked_tokens = np.array([token_row[ex.state] for ex in asked], dtype=np.int64)
    config = ReaderConfig(attribute_questions=True)
    result = {"machine": machine(), "command": "python benchmarks/decide/attribute_concepts.py",
              "held_groups": held_groups}
    result["models"], result["train_s"] = {}, {}
    for name, keep in recipes.items():
        rows = np.flatnonzero(keep & ~inputs.held)
        started = time.perf_counter()
        net = train_reader(subset(inputs.embedded, rows), inputs.tokens, inputs.token_index[rows], config)
        result["train_s"][name] = round(time.perf_counter() - started, 1)
        weights = net.weights({})
        per_group = {}
        for family in sorted(held_families):
            mine = np.array([ex.family == family for ex in asked])
            part = subset(asked_embedded, np.flatnonzero(mine))
            per_group[family.removeprefix("attribute:")] = scores(
                reader_logits(weights, part, inputs.tokens, asked_tokens[mine]), part.answers
            )
        result["models"][name] = per_group
        print(name, per_group, file=sys.stderr)
    path = write_result("attribute_concepts", result)
    replace_section("attribute_concepts", markdown(result), TRAINING_DOC)
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
