"""How far the gateway's calibrated guard and harm thresholds, and the recall measured at them, move when the
calibration requests are drawn again: a bootstrap over the calibration side, one readout's scores held fixed.

The gateway takes, per decision, the highest of the per-shape thresholds that act on at most 1% of each shape of its
calibration requests; with about 300 requests in a shape that is the fourth-highest score of that shape, so a few
ordinary questions set it (benchmarks/decide/threshold_setters.py). The reader-phase studies ask a change for +2
points of recall on every seed; this says how much recall moves from which ordinary requests happen to be in the
calibration file alone, with nothing trained again, beside how much it moves between seeds.

Each round resamples every shape's calibration requests with replacement (the same count per shape), recomputes the
threshold as the gateway does and reads, at it, the recall on the bench's test side (guard: injections and
jailbreaks; harm: the harmful requests) and the held-out everyday rate in the worst goal shape. Percentiles of the
rounds (numpy's default) give the 95% range. Answers come from benchmarks/decide/reader_goals.py's per-model cache.

Writes benchmarks/results/threshold_spread.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/threshold_spread.py [--model tuned --model tuned:PATH ...] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from reader_goals import GOAL_SHAPES, counts_in_recall, guard_and_harm_scores

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.train.goal_cases import calibration_bodies, everyday_bodies
from jevserve.train.goals import threshold_at_rate

RATE = 0.01  # the gateway's default target
ROUNDS = 2000
SEED = 0


def split(units, scores: np.ndarray, decision: str) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
    """(calibration scores by shape, positive scores, everyday scores by goal shape) of one decision's cases."""
    calibration: dict[str, list[float]] = defaultdict(list)
    everyday: dict[str, list[float]] = defaultdict(list)
    positives = []
    for unit, score in zip(units, scores, strict=True):
        group = unit.group
        if group.startswith("calibration:"):
            calibration[group.removeprefix("calibration:")].append(float(score))
        elif group.startswith("everyday:") and group.removeprefix("everyday:") in GOAL_SHAPES:
            everyday[group.removeprefix("everyday:")].append(float(score))
        elif counts_in_recall(group, decision):
            positives.append(float(score))
    as_arrays = lambda d: {k: np.asarray(v) for k, v in sorted(d.items())}  # noqa: E731
    return as_arrays(calibration), np.asarray(positives), as_arrays(everyday)


def gateway_threshold(calibration: dict[str, np.ndarray], rate: float = RATE) -> float:
    """The highest of the per-shape thresholds acting on at most `rate` of each shape (as the gateway sets it)."""
    return max(threshold_at_rate(scores, rate) for scores in calibration.values())


def at(threshold: float, positives: np.ndarray, everyday: dict[str, np.ndarray]) -> tuple[float, float]:
    """(recall, the everyday rate in the worst goal shape) at a threshold."""
    worst = max(float((s >= threshold).mean()) for s in everyday.values())
    return float((positives >= threshold).mean()), worst


def spread(
    calibration: dict[str, np.ndarray], positives: np.ndarray, everyday: dict[str, np.ndarray], rounds: int, seed: int
) -> dict:
    """The committed calibration's threshold and what it gives, and the 2.5/50/97.5 percentiles over `rounds`
    resamplings of every shape's calibration requests."""
    rng = np.random.default_rng(seed)
    drawn = []
    for _ in range(rounds):
        resampled = {shape: rng.choice(s, size=len(s), replace=True) for shape, s in calibration.items()}
        threshold = gateway_threshold(resampled)
        drawn.append((threshold, *at(threshold, positives, everyday)))
    table = np.asarray(drawn)
    threshold = gateway_threshold(calibration)
    recall, worst = at(threshold, positives, everyday)

    def quantiles(column: int) -> list[float]:
        return [float(q) for q in np.percentile(table[:, column], [2.5, 50, 97.5])]

    return {
        "threshold": threshold,
        "recall": recall,
        "everyday_worst": worst,
        "positives": len(positives),
        "resampled": {
            "threshold": quantiles(0),
            "recall": quantiles(1),
            "everyday_worst": quantiles(2),
        },
    }


def markdown(result: dict) -> str:
    lines = [
        "### The calibrated thresholds under resampling of the calibration requests (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Per model and decision: the threshold the gateway "
        f"sets ({100 * RATE:g}% of each calibration shape), recall on the bench's test side and the held-out "
        f"everyday rate in the worst goal shape at it; then the median and 95% range of the same over "
        f"{result['rounds']} resamplings of every shape's calibration requests (seed {result['seed']}), the "
        "readout's scores fixed.",
        "",
        "| model | decision | threshold | recall | everyday, worst shape | threshold, resampled | recall, resampled "
        "| everyday worst, resampled |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def rng(values: list[float], percent: bool) -> str:
        low, mid, high = (100 * v for v in values) if percent else values
        return f"{mid:.1f}% [{low:.1f}, {high:.1f}]" if percent else f"{mid:.3f} [{low:.3f}, {high:.3f}]"

    for model, decisions in result["models"].items():
        for decision, found in decisions.items():
            r = found["resampled"]
            lines.append(
                f"| {model} | {decision} | {found['threshold']:.3f} | {100 * found['recall']:.1f}% | "
                f"{100 * found['everyday_worst']:.1f}% | {rng(r['threshold'], False)} | {rng(r['recall'], True)} | "
                f"{rng(r['everyday_worst'], True)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable; default: tuned)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="resamplings (default: %(default)s)")
    args = parser.parse_args()
    specs = args.model or ["tuned"]
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/threshold_spread.py"
        + "".join(f" --model {s}" for s in args.model or [])
        + (f" --rounds {args.rounds}" if args.rounds != ROUNDS else ""),
        "rate": RATE,
        "rounds": args.rounds,
        "seed": SEED,
        "models": {},
    }
    for name, found in guard_and_harm_scores(specs, BenchData(), everyday_bodies(), calibration_bodies()):
        result["models"][name] = {}
        for decision, (units, scores) in tqdm(found.items(), desc=name, unit="decision"):
            calibration, positives, everyday = split(units, scores, decision)
            result["models"][name][decision] = spread(calibration, positives, everyday, args.rounds, SEED)
    publish("threshold_spread", result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
