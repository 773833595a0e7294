"""Which requests set the gateway's guard and harm thresholds: per model, the calibration shape whose 1% point is the
highest (the gateway takes the highest of the per-shape thresholds), the calibration requests of that shape that
score highest, and the held-out everyday requests of the same shape that score highest.

With 126 pasted lists among the calibration requests, at most one of them may be acted on at 1%, so the second
highest of them sets the guard's threshold: one or two texts decide what every injection has to outscore. This
names them, so that a study of recall at the operating point can say what holds the threshold where it is. Cases as
benchmarks/decide/reader_goals.py builds them (train/goal_cases.py); answers come from that script's per-model
cache.

Writes benchmarks/results/threshold_setters.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/threshold_setters.py [--model tuned --model tuned:PATH ...] [--section NAME]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from reader_goals import guard_and_harm_scores, shape_thresholds

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.train.goal_cases import calibration_bodies, everyday_bodies

RATE = 0.01  # the gateway's default target
TOP = 3  # requests shown per side
EXCERPT_CHARS = 90


def excerpt(text: str, chars: int = EXCERPT_CHARS) -> str:
    """The start of a text on one line, safe in a markdown table cell."""
    flat = " ".join(text.split())
    cut = flat[:chars] + ("…" if len(flat) > chars else "")
    return cut.replace("|", "\\|").replace("`", "'")


def highest(units, scores: np.ndarray, group: str, threshold: float) -> dict:
    """The TOP highest-scoring requests of one group, and how many of the group the threshold acts on."""
    picked = sorted(
        ((float(s), u.texts[0]) for u, s in zip(units, scores, strict=True) if u.group == group),
        key=lambda pair: -pair[0],
    )
    return {
        "total": len(picked),
        "acted": sum(s >= threshold for s, _ in picked),
        "top": [{"score": s, "text": excerpt(t)} for s, t in picked[:TOP]],
    }


def setting_shape(units, scores: np.ndarray) -> tuple[str, float]:
    """The calibration shape whose threshold is the gateway's (the highest of the per-shape ones), and that
    threshold."""
    by_shape = shape_thresholds(units, scores, RATE)
    shape = max(by_shape, key=by_shape.get)
    return shape, by_shape[shape]


def setters(units, scores: np.ndarray) -> dict:
    """The threshold, the shape that sets it, and the highest requests of that shape on both sides."""
    shape, threshold = setting_shape(units, scores)
    return {
        "threshold": threshold,
        "shape": shape,
        "calibration": highest(units, scores, f"calibration:{shape}", threshold),
        "everyday": highest(units, scores, f"everyday:{shape}", threshold),
    }


def markdown(result: dict) -> str:
    # A study's own section is titled by its models, to tell it from the default section's heading.
    scope = "" if result.get("section", "threshold_setters") == "threshold_setters" else (
        ": " + ", ".join(result["models"]))
    lines = [
        f"### Which requests set the guard's and harm's thresholds{scope} (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Per model and decision: the gateway's threshold for "
        f"{100 * RATE:g}% (the highest of the per-shape thresholds), the calibration shape that sets it, and the "
        f"{TOP} highest-scoring requests of that shape among the calibration requests (train side: what the "
        "threshold is set on) and among the everyday test requests (held out), with how many of each the "
        "threshold acts on.",
        "",
        "| decision | model | threshold (shape) | side | acted | highest scores and texts |",
        "|---|---|---|---|---|---|",
    ]
    for model, found in result["models"].items():
        for decision, point in found.items():
            for side in ("calibration", "everyday"):
                part = point[side]
                tops = "; ".join(f"{t['score']:.3f} \"{t['text']}\"" for t in part["top"])
                lines.append(
                    f"| {decision} | {model} | {point['threshold']:.3f} ({point['shape']}) | {side} | "
                    f"{part['acted']}/{part['total']} | {tops} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable; default: tuned)")
    parser.add_argument("--section", default="threshold_setters",
                        help="section of docs/training.md and results file name (default: %(default)s)")
    args = parser.parse_args()
    specs = args.model or ["tuned"]
    everyday, calibration = everyday_bodies(), calibration_bodies()
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/threshold_setters.py" + "".join(f" --model {s}" for s in args.model or [])
        + (f" --section {args.section}" if args.section != "threshold_setters" else ""),
        "rate": RATE,
        "section": args.section,
        "models": {},
    }
    for name, found in guard_and_harm_scores(specs, BenchData(), everyday, calibration):
        result["models"][name] = {decision: setters(units, scores) for decision, (units, scores) in found.items()}
    publish(args.section, result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
