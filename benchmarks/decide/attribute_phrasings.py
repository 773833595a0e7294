"""Reading or recognising? The attribute questions (train/attributes.py) asked in held-out phrasings.

Every attribute question about a state held out for the temperatures (train/run.py `is_validation`: no model fits
its weights on these states) is asked twice: in a phrasing the attribute-trained model saw in training
(`TRAIN_PHRASINGS`) and in one no model ever trains on (`HELDOUT_PHRASINGS`, which include the open-questions set's
patterns). A model that reads the question scores about the same on both; one that recognises questions drops on
the held-out phrasings. Reported per model and phrasing set: accuracy (P(yes) > 0.5 when the answer is yes), AUROC
of P(yes), and the share of (yes, no) question pairs about one text and one attribute group ordered right.

Nothing here reads a bench test side. Writes benchmarks/results/attribute_phrasings.json and a section of
docs/training.md.
Run: .venv/bin/python benchmarks/decide/attribute_phrasings.py [--weights NAME=PATH ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import TRAINING_DOC, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.decide.base import DecisionBackend, DecisionItem
from jevserve.decide.embedded import embedded_backends
from jevserve.decide.encoder import reader_backend
from jevserve.train.attributes import HELDOUT_PHRASINGS, TRAIN_PHRASINGS, attribute_families, yes_no_scores
from jevserve.train.examples import Example
from jevserve.train.run import is_validation


def score(backend: DecisionBackend, examples: list[Example]) -> dict[str, float]:
    """P(yes) of every example, scored by `yes_no_scores` (examples in (yes, no) pairs, as built)."""
    p_yes = []
    for start in tqdm(range(0, len(examples), 64), desc=backend.card.name, unit="batch", leave=False):
        chunk = examples[start : start + 64]
        answers = backend.decide([DecisionItem(ex.state, ex.question) for ex in chunk])
        p_yes += [float(a[0]) for a in answers]
    return yes_no_scores(np.array(p_yes), np.array([ex.answer for ex in examples]))


def markdown(result: dict) -> str:
    lines = [
        "## Attribute questions in held-out phrasings",
        "",
        "Attribute questions about states no model fits on (train/attributes.py), asked in phrasings the "
        "attribute-trained reader saw in training and in held-out ones no model trains on "
        f"({result['num_questions']} questions about {result['num_states']} states each way).",
        "",
        "| model | phrasings | accuracy | AUROC | pairs ordered right |",
        "|---|---|---|---|---|",
    ]
    for name, sets in result["models"].items():
        for which, s in sets.items():
            lines.append(
                f"| {name} | {which} | {s['accuracy']:.3f} | {s['auroc']:.3f} | {s['pairs_ordered_right']:.3f} |"
            )
    machine_info = result["machine"]
    lines += ["", f"Command: `{result['command']}` ({machine_info['cpus']} cores, {machine_info['when']})."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--weights",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="also score a reading model's weights file under NAME (repeatable)",
    )
    args = parser.parse_args()
    data = BenchData()
    sets = {
        "trained phrasings": [ex for ex in attribute_families(data, TRAIN_PHRASINGS) if is_validation(ex.state)],
        "held-out phrasings": [ex for ex in attribute_families(data, HELDOUT_PHRASINGS) if is_validation(ex.state)],
    }
    backends = embedded_backends()
    for spec in args.weights:
        name, _, path = spec.partition("=")
        backends.append(reader_backend(weights=Path(path), name=name))
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/attribute_phrasings.py" + "".join(f" --weights {w}" for w in args.weights),
        "num_questions": len(sets["held-out phrasings"]),
        "num_states": len({ex.state for ex in sets["held-out phrasings"]}),
        "models": {b.card.name: {which: score(b, examples) for which, examples in sets.items()} for b in backends},
    }
    path = write_result("attribute_phrasings", result)
    replace_section("attribute_phrasings", markdown(result), TRAINING_DOC)
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
