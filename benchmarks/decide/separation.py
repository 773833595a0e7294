"""Paired readouts compared by what the gateway's threshold does not decide: how well the guard and harm answers
separate the bench's test positives from held-out everyday requests.

The gateway's threshold sits just above a few ordinary calibration requests of one shape, and drawing the
calibration file again moves recall at it by more than the reader-phase studies' changes
(benchmarks/decide/threshold_spread.py). This reads the same paired runs two steadier ways: the AUROC of the test
positives (guard: injections and jailbreaks; harm: the harmful requests) against every everyday test request, and
recall at the threshold acting on 1% of all calibration requests pooled (about 16 of 1,626 instead of 1 to 3 of one
shape). Beside them, recall at the gateway's own threshold. It is a reading of separation for a study's next step,
not a serving rule: no rule was written for it before the runs it reads.

Answers come from benchmarks/decide/reader_goals.py's per-model cache. Writes benchmarks/results/NAME.json and a
section NAME of docs/training.md.
Run: .venv/bin/python benchmarks/decide/separation.py --pair BASE_SPEC=NEW_SPEC [--pair ...] --section NAME
     --title TITLE   (a spec as reader_goals.py takes it: tuned, tuned:PATH)
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from reader_goals import calibrated_threshold, counts_in_recall, guard_and_harm_scores

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.train.goal_cases import calibration_bodies, everyday_bodies
from jevserve.train.goals import auroc, threshold_at_rate

RATE = 0.01


def separation(units, scores: np.ndarray, decision: str) -> dict[str, float]:
    """AUROC against the everyday test side, recall at 1% of the pooled calibration requests and at the gateway's
    threshold."""
    scores = np.asarray(scores, dtype=float)
    positive = np.array([counts_in_recall(u.group, decision) for u in units])
    everyday = np.array([u.group.startswith("everyday:") for u in units])
    calibration = np.array([u.group.startswith("calibration:") for u in units])
    pooled = threshold_at_rate(scores[calibration], RATE)
    gateway = calibrated_threshold(units, scores, RATE)
    return {
        "auroc": auroc([True] * int(positive.sum()) + [False] * int(everyday.sum()),
                       [*scores[positive], *scores[everyday]]),
        "recall at pooled 1%": float((scores[positive] >= pooled).mean()),
        "everyday at pooled 1%": float((scores[everyday] >= pooled).mean()),
        "recall at the gateway's threshold": float((scores[positive] >= gateway).mean()),
    }  # fmt: skip


def measure(specs: list[str]) -> dict[str, dict]:
    """Per model name: its spec and, per decision, its separation."""
    out = {}
    specs = list(dict.fromkeys(specs))
    for spec, (name, found) in zip(
        specs, guard_and_harm_scores(specs, BenchData(), everyday_bodies(), calibration_bodies()), strict=True
    ):
        out[spec] = {"name": name, **{d: separation(u, s, d) for d, (u, s) in found.items()}}
    return out


MEASURES = ("auroc", "recall at pooled 1%", "everyday at pooled 1%", "recall at the gateway's threshold")


def markdown(result: dict) -> str:
    pairs, models = result["pairs"], result["models"]

    def label(spec: str) -> str:
        name = models[spec]["name"]
        return "committed" if name == "minilm-tuned-reader" else name.removeprefix("minilm-tuned-reader-")

    lines = [
        f"### {result['title']} (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Each column a seed: without the change → with it. "
        "AUROC: the test positives against every everyday test request; pooled 1%: recall at the threshold acting "
        "on 1% of all calibration requests together; gateway: recall at the gateway's threshold (the highest of "
        "the per-shape 1% thresholds). Last column: the mean paired change.",
        "",
        "| decision | measure | "
        + " | ".join(f"{label(b)} → {label(n)}" for b, n in pairs)
        + " | mean change |",
        "|---|---|" + "---|" * (len(pairs) + 1),
    ]  # fmt: skip
    for decision in ("guard", "harm"):
        for key in MEASURES:
            show = (lambda v: f"{v:.3f}") if key == "auroc" else (lambda v: f"{100 * v:.1f}%")
            cells = [f"{show(models[b][decision][key])} → {show(models[n][decision][key])}" for b, n in pairs]
            change = np.mean([models[n][decision][key] - models[b][decision][key] for b, n in pairs])
            mean = f"{change:+.3f}" if key == "auroc" else f"{100 * change:+.1f} points"
            lines.append(f"| {decision} | {key} | " + " | ".join(cells) + f" | {mean} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", action="append", required=True, metavar="BASE=NEW",
                        help="model specs of one seed without and with the change (repeatable)")
    parser.add_argument("--section", required=True, help="section of docs/training.md and results file name")
    parser.add_argument("--title", required=True)
    args = parser.parse_args()
    pairs = [tuple(p.split("=", 1)) for p in args.pair]
    if any(len(p) != 2 for p in pairs):
        parser.error("--pair takes BASE_SPEC=NEW_SPEC")
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/separation.py " + " ".join(f"--pair {b}={n}" for b, n in pairs)
        + f" --section {args.section} --title {shlex.quote(args.title)}",
        "title": args.title,
        "rate": RATE,
        "pairs": pairs,
        "models": measure([spec for pair in pairs for spec in pair]),
    }  # fmt: skip
    publish(args.section, result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
