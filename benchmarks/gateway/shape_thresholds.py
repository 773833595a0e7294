"""One threshold for every shape of request, or one per shape? The gateway's answer, measured.

The gateway sets a decision's threshold as the highest of the per-shape thresholds: the lowest threshold at which at
most 1% of each shape of its calibration requests (train side: bare, behind a system prompt, with tools, second
turn, pasted list, document) is acted on. A gateway could instead keep one threshold per shape and judge each request
at its own shape's, which lets the shapes whose ordinary requests score low catch more. This measures both schemes
for embedded models on held-out data (train/goal_cases.py builds the cases, as benchmarks/decide/reader_goals.py):

- everyday false actions per shape: the everyday test side, never calibrated on;
- recall: the guard on the injection and jailbreak test sides, harm on the harmful test side, each text sent as a
  user turn, so per shape it is judged at the threshold of the shape the text itself makes (a long text a pasted
  document, several bullet lines a list, else bare; `bench.sources.everyday_shapes.pasted_shape`).

Writes benchmarks/results/shape_thresholds.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/shape_thresholds.py [--model tuned --model reader]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "decide"))  # reader_goals: the models' cached answers
from reader_goals import SHAPES, guard_and_harm_scores, shape_thresholds

from _serverbench import ROOT, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.bench.sources.everyday_shapes import pasted_shape
from jevserve.train.goal_cases import calibration_bodies, everyday_bodies
from jevserve.train.goals import Rate

TARGET = 0.01
POSITIVES = {"guard": ("injection", "jailbreak"), "harm": ("harmful",)}


def own_shape(texts: tuple[str, ...]) -> str:
    """The shape a positive's text makes sent as a user turn (its longest text is the whole one)."""
    return pasted_shape(max(texts, key=len)) or "bare"


def scheme_rates(pairs, positives: tuple[str, ...], single: float | None, per_shape: dict[str, float]) -> dict:
    """Recall and everyday rates per shape, at `single` for every request, or (None) at each request's shape's."""

    def threshold(unit) -> float:
        if single is not None:
            return single
        if unit.group.startswith("everyday:"):
            return per_shape[unit.group.removeprefix("everyday:")]
        return per_shape[own_shape(unit.texts)]

    def rate(picked) -> dict:
        return Rate(sum(int(s >= threshold(u)) for u, s in picked), len(picked)).to_dict()

    found = {"recall": rate([(u, s) for u, s in pairs if u.label and u.group.split(":")[0] in positives])}
    for shape in SHAPES:
        found[f"everyday:{shape}"] = rate([(u, s) for u, s in pairs if u.group == f"everyday:{shape}"])
    return found


def measure_decision(units, scores, positives: tuple[str, ...]) -> dict:
    """Recall and everyday rates per shape under one threshold (the gateway's) and under one per shape."""
    per_shape = shape_thresholds(units, scores, TARGET)
    single = max(per_shape.values())
    out = {"thresholds": {"one": single, "per shape": per_shape}}
    pairs = list(zip(units, scores, strict=True))
    for scheme in ("one", "per shape"):
        out[scheme] = scheme_rates(pairs, positives, single if scheme == "one" else None, per_shape)
    return out


def markdown(result: dict) -> str:
    lines = [
        "### One threshold for every shape, or one per shape (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Thresholds: at most {100 * TARGET:g}% of each shape of "
        "the calibration requests (train side) acted on; *one*: the highest of them, as the gateway sets it; *per "
        "shape*: each request judged at its own shape's. Recall: the bench's test sides, each text judged at the "
        "shape it makes as a user turn. Everyday: the everyday test side, never calibrated on.",
        "",
        "| model | decision | thresholds | recall | " + " | ".join(f"everyday {s}" for s in SHAPES) + " |",
        "|---|---|---|---|" + "---|" * len(SHAPES),
    ]

    def pct(rate: dict, everyday: bool = True) -> str:
        over = " **(> 1%)**" if everyday and rate["total"] and rate["rate"] > TARGET else ""
        return f"{100 * rate['rate']:.1f}% ({rate['acted']}/{rate['total']}){over}"

    def number(value: float) -> str:
        return f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"

    for model, decisions in result["models"].items():
        for decision, found in decisions.items():
            shown = found["thresholds"]["per shape"]
            for scheme in ("one", "per shape"):
                if scheme == "one":
                    thresholds = number(found["thresholds"]["one"])
                else:
                    thresholds = ", ".join(f"{s} {number(shown[s])}" for s in SHAPES if s in shown)
                row = found[scheme]
                cells = [model, f"{decision}, {scheme}", thresholds, pct(row["recall"], everyday=False)]
                cells += [pct(row[f"everyday:{s}"]) for s in SHAPES]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable; default: reader and tuned)")
    args = parser.parse_args()
    specs = args.model or ["reader", "tuned"]
    data = BenchData()
    everyday, calibration = everyday_bodies(), calibration_bodies()
    result = {
        "machine": machine(),
        "command": "python benchmarks/gateway/shape_thresholds.py" + "".join(f" --model {s}" for s in args.model or []),
        "models": {},
    }
    for name, found in guard_and_harm_scores(specs, data, everyday, calibration):
        result["models"][name] = {
            decision: measure_decision(units, scores, POSITIVES[decision])
            for decision, (units, scores) in found.items()
        }
    path = write_result("shape_thresholds", result)
    replace_section("gateway-shape-thresholds", markdown(result), path=ROOT / "docs" / "gateway.md")
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
