"""What a lower target rate buys and costs: guard and harm at the gateway's operating point set for 1%, 0.7% and
0.4% of each shape of the calibration requests (train side; with 300 requests a shape: 3, 2 and 1 of them).

The everyday goal (at most 1% of held-out everyday requests acted on in each goal shape) is met or missed by one
request when the threshold is set for exactly 1% of 300 calibration requests a shape. A margin (a lower target)
moves the held-out rate down and the recall with it; this measures both for several models, so that a serving rule
can ask for the goal with a margin instead of a seed's luck. Cases as benchmarks/decide/reader_goals.py builds them
(train/goal_cases.py); answers come from that script's per-model cache.

Writes benchmarks/results/rate_margin.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/rate_margin.py [--model tuned --model tuned:PATH ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from reader_goals import calibrated_threshold, guard_and_harm_scores

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.train.goal_cases import calibration_bodies, everyday_bodies
from jevserve.train.goals import Rate

RATES = (0.01, 0.007, 0.004)
GOAL_SHAPES = ("bare", "system", "tools", "second-turn")  # the shapes the everyday goal is stated for
POSITIVES = {"guard": ("injection", "jailbreak"), "harm": ("harmful",)}


def at_rate(units, scores: np.ndarray, positives: tuple[str, ...], rate: float) -> dict:
    """Threshold, recall and the held-out everyday rate per goal shape at the gateway's point for `rate`."""
    threshold = calibrated_threshold(units, scores, rate)
    pairs = list(zip(units, scores, strict=True))

    def rate_of(picked: list[float]) -> dict:
        return Rate(int(np.sum(np.asarray(picked) >= threshold)), len(picked)).to_dict()

    out = {"threshold": threshold,
           "recall": rate_of([s for u, s in pairs if u.label and u.group.split(":")[0] in positives])}
    for shape in GOAL_SHAPES:
        out[f"everyday:{shape}"] = rate_of([s for u, s in pairs if u.group == f"everyday:{shape}"])
    worst = max(GOAL_SHAPES, key=lambda s: out[f"everyday:{s}"]["rate"])
    out["worst"] = {"shape": worst, **out[f"everyday:{worst}"]}
    return out


TITLE = "Guard and harm at lower target rates"


def markdown(result: dict) -> str:
    lines = [
        f"### {result.get('title', TITLE)} (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Each cell: recall on the bench's test side at the "
        "gateway's threshold for that target (the highest of the per-shape thresholds acting on at most that share "
        "of each shape of the calibration requests), then the held-out everyday rate in the worst goal shape "
        "(bare, system, tools, second turn; the goal: ≤ 1%).",
        "",
        "| decision | model | " + " | ".join(f"target {100 * r:g}%" for r in RATES) + " |",
        "|---|---|" + "---|" * len(RATES),
    ]
    for decision in POSITIVES:
        for model, found in result["models"].items():
            cells = []
            for rate in RATES:
                point = found[decision][f"{rate:g}"]
                worst = point["worst"]
                cells.append(
                    f"{100 * point['recall']['rate']:.1f}%; {100 * worst['rate']:.2f}% "
                    f"({worst['acted']}/{worst['total']} {worst['shape']})"
                )
            lines.append(f"| {decision} | {model} | " + " | ".join(cells) + " |")
    lines.append("")
    for decision in POSITIVES:
        met = [sum(f[decision][f"{r:g}"]["worst"]["rate"] <= 0.01 for f in result["models"].values()) for r in RATES]
        lines.append(
            f"{decision}: models meeting the everyday goal at each target: "
            + ", ".join(f"{100 * r:g}%: {m} of {len(result['models'])}" for r, m in zip(RATES, met, strict=True))
            + "."
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable; default: tuned)")
    parser.add_argument("--section", default="rate_margin",
                        help="name of the results file and of the docs/training.md section it writes "
                             "(default: rate_margin; another name keeps a side study apart)")
    parser.add_argument("--title", default=TITLE, help="heading of the section")
    args = parser.parse_args()
    specs = args.model or ["tuned"]
    data = BenchData()
    everyday, calibration = everyday_bodies(), calibration_bodies()
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/rate_margin.py" + "".join(f" --model {s}" for s in args.model or [])
        + (f" --section {args.section}" if args.section != "rate_margin" else "")
        + (f" --title '{args.title}'" if args.title != TITLE else ""),
        "title": args.title,
        "rates": list(RATES),
        "models": {},
    }
    for name, found in guard_and_harm_scores(specs, data, everyday, calibration):
        result["models"][name] = {
            decision: {f"{r:g}": at_rate(units, scores, POSITIVES[decision], r) for r in RATES}
            for decision, (units, scores) in found.items()
        }
    publish(args.section, result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
